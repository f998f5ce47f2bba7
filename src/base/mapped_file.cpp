#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace mmx {

MappedFile::MappedFile(std::string path, const char* kind) : path_(std::move(path)) {
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
  if (bytes_) ::munmap(const_cast<uint8_t*>(bytes_), size_);
}

}  // namespace mmx
