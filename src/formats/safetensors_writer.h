// SafetensorsWriter: writes one safetensors file (tiny checkpoints, training checkpoints,
// conversions). The reader is safetensors.h. Not here: sharding (one file per writer), the
// checkpoint's JSON files (their writers write them as text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace mmx {

// Writes one safetensors file; data is copied on add(). As the reference implementation does, the
// header is padded with spaces so the data section starts at a multiple of 8 bytes, and tensors
// are laid out contiguously, largest element size first (stable: order added within a size), so
// every tensor is aligned to its element size. Header entries follow the data order.
class SafetensorsWriter {
 public:
  // Throws mmx::Error on a duplicate or reserved ("__metadata__") name, a negative shape entry,
  // or size_bytes != numel * dtype_size(dtype).
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t size_bytes);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes path + ".tmp", then renames it over path. Throws mmx::Error on I/O failure.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mmx
