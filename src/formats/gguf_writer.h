// GGUF v3 writer: metadata and tensor infos first, then the tensors' bytes streamed in order.
//
//   Writer w(path);                       // writes to PATH.partial, renamed on finish()
//   w.set("general.architecture", Value{...}) / set_u32 / set_f32 / set_string / ...
//   w.add_tensor("token_embd.weight", DType::kQ8_0, {200064, 3072});   // outermost first
//   w.begin();                            // header + infos + padding
//   w.write(bytes, n) ...                 // each tensor's bytes, in add order, any chunking
//   w.finish();                           // checks every byte arrived, pads, renames
//
// The writer lays tensors out back to back at `alignment` (32, llama.cpp's default). Every
// mistake of the caller (too many or too few bytes, write before begin) is an mmx::Error.
//
// Not here: what the keys of a minimax-m2 file are (formats/hf_view.h), converting tensors
// (formats/convert/gguf_convert.h), reading (formats/gguf.h).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace mmx::gguf {

class Writer {
 public:
  explicit Writer(std::string path, uint32_t alignment = kDefaultAlignment);
  ~Writer();  // an unfinished file is removed
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v) { set(key, {ValueType::kU32, ValueType::kU8, v}); }
  void set_i32(const std::string& key, int32_t v) { set(key, {ValueType::kI32, ValueType::kU8, v}); }
  void set_f32(const std::string& key, float v) { set(key, {ValueType::kF32, ValueType::kU8, v}); }
  void set_bool(const std::string& key, bool v) { set(key, {ValueType::kBool, ValueType::kU8, v}); }
  void set_string(const std::string& key, const std::string& v) {
    set(key, {ValueType::kString, ValueType::kU8, v});
  }
  void set_array(const std::string& key, ValueType elem, nlohmann::json values) {
    set(key, {ValueType::kArray, elem, std::move(values)});
  }

  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
  void begin();
  void write(const void* data, size_t n);
  void finish();

  uint64_t data_bytes() const { return data_bytes_; }  // total, padding included

 private:
  void put(const void* p, size_t n);
  void put_string(const std::string& s);
  void put_value(ValueType t, const nlohmann::json& v);
  void pad_to(uint64_t multiple);

  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t offset;  // relative to the data section
    uint64_t size;
  };
  std::string path_, partial_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Pending> tensors_;
  uint64_t data_bytes_ = 0;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;         // bytes written to the file
  uint64_t data_start_ = 0;  // file offset of the data section
  size_t cur_ = 0;           // tensor being written
  uint64_t cur_done_ = 0;    // its bytes written so far
  bool finished_ = false;
};

}  // namespace mmx::gguf
