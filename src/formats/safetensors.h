// Read-only safetensors over mmap, single file or sharded (model.safetensors.index.json), and the
// TensorStore that hands out a checkpoint's tensors from safetensors or a GGUF file alike.
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}
// then the data section; offsets are relative to the start of the data section.
//
// The file is untrusted input. Every field is checked on open (header length vs file size, JSON
// well-formed, known dtype string, shape entries non-negative and product not overflowing,
// end - begin == numel * dtype_size, offsets inside the data section, no overlaps); a violation
// throws mmx::Error naming the file and the tensor. Nothing is ever read out of bounds.
//
// Dtypes: the spec's other dtypes (BOOL, I8, F64, F8_E5M2, ...) are accepted on open and listed in
// names(), with dtype_supported == false; only tensor() on them throws. A dtype string that is in
// no spec is an error at open. Tensors may leave gaps between them (the reference writer does
// not); zero-size tensors take no bytes and may sit anywhere in the data section.
//
// Sharded checkpoints: the index's weight_map is authoritative. Every shard it names is opened
// once and must really hold the tensors mapped to it; shard names must be plain file names in
// the index's directory (no '/', '\', "." or ".."). Tensors a shard holds but the weight_map does
// not mention are not exposed.
//
// Not here: which format a path holds (formats/checkpoint.h sniffs it), HF-name mapping, dtype
// conversion, copying to device (model/weights does that).
// A file truncated by another process *after* open can still SIGBUS; we map, we do not copy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mmx {

// The header key of the file-level string map (not a tensor name).
inline constexpr char kSafetensorsMetadataKey[] = "__metadata__";


struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t size_bytes = 0;
  int file_index = 0;   // which shard
  std::string dtype_str;        // as spelled in the file: "BF16", or e.g. "BOOL"
  bool dtype_supported = true;  // false: `dtype` is meaningless and tensor() throws
};

class SafetensorsFile;  // one mmapped file
namespace gguf { class File; }

// A checkpoint's tensors across one or more shard files.
class TensorStore {
 public:
  // Any checkpoint path: open_checkpoint(path).tensors() (formats/checkpoint.h sniffs the
  // format, then calls one of the two below).
  static TensorStore open(const std::string& path);
  // path: a directory holding model.safetensors.index.json (+ shards) or model.safetensors,
  // a path to a single .safetensors file, or a path to a *.index.json file.
  // Throws mmx::Error naming the file (and tensor) on anything malformed.
  static TensorStore open_safetensors(const std::string& path);
  // A GGUF file (formats/gguf.h): tensors under their GGUF names, shapes outermost first.
  static TensorStore open_gguf(const std::string& path);
  // Moves every file's bytes into anonymous huge pages (base/mapped_file.h: why); call before
  // taking any view.
  void to_huge_pages();
  // After to_huge_pages: gives a tensor's bytes back to the kernel (base/mapped_file.h, release);
  // views of them read zeros after. false when mapped or not ours.
  bool release(const void* p, size_t n);
  ~TensorStore();
  TensorStore(TensorStore&&) noexcept;
  TensorStore& operator=(TensorStore&&) noexcept;

  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws mmx::Error if missing
  // A view into the mapped file (read-only memory; do not write through it). Throws mmx::Error
  // if the tensor is missing, has an unsupported dtype, or has more than kMaxDims dims.
  // The view is only valid while this TensorStore lives. It is aligned only as well as the file
  // laid it out (the reference writer keeps offsets aligned; hand-made files may not).
  Tensor tensor(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::string& file_of(const std::string& name) const;  // path of the shard holding it
  uint64_t total_bytes() const;  // sum of size_bytes over names()
  // "__metadata__" of the file; for shards, the union of theirs (first shard wins on a clash).
  const std::map<std::string, std::string>& metadata() const;
  // The whole mapping of shard file_index (0 <= file_index < number of shards); for tools/tests.
  std::span<const uint8_t> mapped_file(int file_index) const;
  // The GGUF file behind this store (its metadata), or nullptr for safetensors.
  const gguf::File* gguf() const;

 private:
  TensorStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mmx
