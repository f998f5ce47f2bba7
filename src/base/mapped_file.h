// MappedFile: a whole regular file mapped read-only (POSIX mmap), unmapped on destruction.
//
// `kind` ("safetensors file", "GGUF file") prefixes every error: "<kind> 'PATH': <problem>".
// A FIFO or directory is refused (S_ISREG), never waited on. A file truncated by another process
// after open can still SIGBUS; we map, we do not copy.
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

 private:
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace mmx
