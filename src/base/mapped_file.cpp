#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"

namespace mmx {

MappedFile::MappedFile(std::string path, const char* kind) : path_(std::move(path)), kind_(kind) {
  // O_NONBLOCK: a FIFO in a checkpoint directory must not hang us; the S_ISREG check rejects it.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{} '{}': cannot open: {}", kind, path_, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{} '{}': not a regular file", kind, path_);
  }
  size_ = uint64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      fail("{} '{}': mmap of {} bytes failed: {}", kind, path_, size_, why);
    }
    bytes_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (anon_) ::munmap(anon_, anon_len_);
  else if (bytes_) ::munmap(const_cast<uint8_t*>(bytes_), size_);
}

void MappedFile::to_huge_pages() {
  if (anon_ != nullptr || size_ == 0) return;
  constexpr size_t kHuge = size_t(2) << 20;
  // Over-allocate by one huge page so the data can start on a 2 MiB boundary (THP needs it).
  const size_t len = (size_t(size_) + kHuge - 1) / kHuge * kHuge + kHuge;
  void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    fail("{} '{}': cannot allocate {} bytes to hold it in memory: {} (--mmap maps it instead)", kind_, path_,
         size_, std::strerror(errno));
  uint8_t* dst = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) / kHuge * kHuge);
  ::madvise(dst, len - size_t(dst - static_cast<uint8_t*>(m)), MADV_HUGEPAGE);  // best effort: THP may be off
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  uint64_t done = 0;
  while (fd >= 0 && done < size_) {
    const ssize_t r = ::pread(fd, dst + done, size_t(std::min<uint64_t>(size_ - done, uint64_t(64) << 20)), off_t(done));
    if (r <= 0) break;
    done += uint64_t(r);
  }
  const std::string why = fd < 0 ? std::strerror(errno) : done < size_ ? "short read" : "";
  if (fd >= 0) ::close(fd);
  if (done < size_) {
    ::munmap(m, len);
    fail("{} '{}': reading it into memory failed after {} of {} bytes: {}", kind_, path_, done, size_, why);
  }
  ::munmap(const_cast<uint8_t*>(bytes_), size_);
  ::mprotect(m, len, PROT_READ);  // weights are read-only, as in the mapping
  anon_ = m;
  anon_len_ = len;
  bytes_ = dst;
}

bool MappedFile::release(const uint8_t* p, size_t n) {
  if (anon_ == nullptr || p < bytes_ || n > size_ || p - bytes_ > ptrdiff_t(size_ - n)) return false;
  constexpr uintptr_t kPage = 4096;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) & ~(kPage - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  return true;
}

}  // namespace mmx
