// Read-only safetensors over mmap, single file or sharded (model.safetensors.index.json).
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}
// then the data section; offsets are relative to the start of the data section.
//
// The file is untrusted input. Every field is checked on open (header length vs file size, JSON
// well-formed, known dtype string, shape entries non-negative and product not overflowing,
// end - begin == numel * dtype_size, offsets inside the data section, no overlaps); a violation
// throws mmx::Error naming the file and the tensor. Nothing is ever read out of bounds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mmx {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t size_bytes = 0;
  int file_index = 0;   // which shard
};

class SafetensorsFile;  // one mmapped file

// A checkpoint's tensors across one or more shard files.
class TensorStore {
 public:
  // dir: a directory holding model.safetensors or model.safetensors.index.json (+ shards),
  // or a path to a single .safetensors file.
  static TensorStore open(const std::string& path);
  ~TensorStore();
  TensorStore(TensorStore&&) noexcept;
  TensorStore& operator=(TensorStore&&) noexcept;

  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws mmx::Error if missing
  // A view into the mapped file (read-only memory; do not write through it).
  Tensor tensor(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::string& file_of(const std::string& name) const;
  uint64_t total_bytes() const;

 private:
  TensorStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes one safetensors file. Tensors are written in the order added; data is copied.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t size_bytes);
  void set_metadata(const std::string& key, const std::string& value);
  void write(const std::string& path) const;  // throws mmx::Error on I/O failure

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
