// GGUF v2/v3 files (llama.cpp's single-file format): a bounds-checked reader over mmap.
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv key/value pairs
// (string key, u32 type, value; strings are u64 length + bytes, arrays u32 element type +
// u64 count + elements); n_tensors infos (string name, u32 n_dims, u64 ne[n_dims] innermost
// first, u32 ggml type, u64 offset); padding to `general.alignment` (default 32); the data.
//
// The file is untrusted. Open checks everything before anything is handed out: magic, version
// 2 or 3, every count and length against the bytes left, known value types (no arrays of
// arrays), unique keys and tensor names, 1..4 dims with a product that does not overflow, rows
// that are whole blocks of the tensor's type, offsets aligned, inside the file and not
// overlapping. A violation throws mmx::Error naming the file (and key or tensor). Nothing is
// ever read out of bounds.
//
// Shapes are reported outermost first (ggml's ne reversed), so token_embd [n_vocab, n_embd]
// and a stacked expert tensor [n_expert, n_ff, n_embd] read like Hugging Face shapes.
// Tensor types: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K map to DTypes; every other ggml
// type is listed with supported = false and its ggml name (the loader refuses it by name).
//
// Not here: what the keys mean for a model (formats/hf_view.h), writing (formats/gguf_writer.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/dtype.h"
#include "base/mapped_file.h"

namespace mmx::gguf {

enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* value_type_name(ValueType t);

// A metadata value: numbers, bools and strings as JSON scalars; arrays as JSON arrays of the
// element type.
struct Value {
  ValueType type = ValueType::kU8;
  ValueType elem = ValueType::kU8;  // arrays only
  nlohmann::json v;
};

struct TensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::string type_name;      // "Q4_K", or "type 23 (IQ4_XS)" for unsupported ones
  bool supported = false;     // dtype is meaningful
  DType dtype = DType::kF32;
  std::vector<int64_t> shape; // outermost first
  uint64_t offset = 0;        // absolute byte offset in the file
  uint64_t size_bytes = 0;
};

// ggml type id <-> DType for the supported types; false / 0 when there is none.
bool dtype_of_ggml(uint32_t ggml_type, DType* out);
uint32_t ggml_of_dtype(DType t);   // MMX_CHECKs that t has a GGUF type
std::string ggml_type_name(uint32_t ggml_type);

inline constexpr uint32_t kDefaultAlignment = 32;

class File {
 public:
  static std::unique_ptr<File> open(const std::string& path);  // throws mmx::Error

  const std::string& path() const { return map_.path(); }
  const uint8_t* bytes() const { return map_.bytes(); }
  uint64_t size() const { return map_.size(); }
  void to_huge_pages() { map_.to_huge_pages(); }  // base/mapped_file.h
  bool release(const uint8_t* p, size_t n) { return map_.release(p, n); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, Value>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order

  // Typed metadata lookups; a missing key or a value of another kind throws mmx::Error naming
  // the file and key. Integers of any width are accepted where an integer is asked for.
  bool has(const std::string& key) const { return kv_.count(key) > 0; }
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;  // F32/F64 (or an integer)
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // An array whose elements are `elem` (any integer type when elem is kI64 / kU64 / kI32 ...:
  // pass kI64 to accept every integer type).
  const nlohmann::json& get_array(const std::string& key, ValueType elem) const;

 private:
  explicit File(const std::string& path);
  void parse();

  MappedFile map_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
};

// True when `path` is a regular file that starts with the GGUF magic (never throws). The loaders
// do not ask this themselves: open_checkpoint (formats/checkpoint.h) is the one sniff.
bool is_gguf(const std::string& path);

}  // namespace mmx::gguf
