// MappedFile: a whole regular file mapped read-only (POSIX mmap), unmapped on destruction.
//
// `kind` ("safetensors file", "GGUF file") prefixes every error: "<kind> 'PATH': <problem>".
// A FIFO or directory is refused (S_ISREG), never waited on. A file truncated by another process
// after open can still SIGBUS; we map, we do not copy — unless asked to (to_huge_pages).
#pragma once

#include <cstdint>
#include <string>

namespace mmx {

class MappedFile {
 public:
  MappedFile(std::string path, const char* kind);  // throws mmx::Error
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* bytes() const { return bytes_; }  // nullptr for an empty file
  uint64_t size() const { return size_; }

  // Reads the whole file into anonymous memory on 2 MiB transparent huge pages
  // (madvise(MADV_HUGEPAGE)) and drops the file mapping; bytes() then points there. Why: weights
  // read from page-cache pages through 4 KiB mappings are slow to reach when the accesses jump
  // around (MoE experts: 5 MB matrices chosen per token). Measured on the 2-vCPU VM of
  // docs/performance.md: a pass over random 5 MB regions of a mapped GGUF file 16 GB/s, of
  // anonymous memory 35 GB/s; the M2 slice's expert phase 1.3-1.5x faster. The file's page
  // cache is left to the kernel (reclaimable). Views taken before this call dangle: call it
  // right after opening. Throws mmx::Error (naming the file) when memory or a read fails.
  void to_huge_pages();
  bool in_huge_pages() const { return anon_ != nullptr; }
  // In huge pages, gives the whole 4 KiB pages inside [p, p + n) back to the kernel
  // (MADV_DONTNEED: they read as zeros after) — for bytes nothing will read again, e.g. a tensor
  // re-encoded into a copy at load. Returns false (and does nothing) when the file is mapped or
  // the range is not inside it.
  bool release(const uint8_t* p, size_t n);

 private:
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  void* anon_ = nullptr;  // to_huge_pages: the anonymous mapping (anon_len_ bytes)
  size_t anon_len_ = 0;
  const char* kind_ = "";
};

}  // namespace mmx
