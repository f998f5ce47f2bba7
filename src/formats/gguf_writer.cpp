#include "formats/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace mmx::gguf {

Writer::Writer(std::string path, uint32_t alignment)
    : path_(std::move(path)), partial_(path_ + ".partial"), alignment_(alignment) {
  MMX_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "alignment {}", alignment);
}

Writer::~Writer() {
  if (f_) std::fclose(f_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(partial_, ec);
  }
}

void Writer::set(const std::string& key, Value v) {
  if (f_) fail("GGUF writer: metadata key '{}' set after begin()", key);
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void Writer::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (f_) fail("GGUF writer: tensor '{}' added after begin()", name);
  MMX_CHECK(!shape.empty() && shape.size() <= 4, "tensor '{}': {} dims", name, shape.size());
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= uint64_t(shape[i]);
  const uint64_t size = rows * dtype_row_bytes(dtype, shape.back());
  tensors_.push_back({name, dtype, shape, data_bytes_, size});
  data_bytes_ += (size + alignment_ - 1) / alignment_ * alignment_;
}

void Writer::put(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n) fail("writing '{}' failed: {}", partial_, std::strerror(errno));
  pos_ += n;
}

void Writer::put_string(const std::string& s) {
  const uint64_t n = s.size();
  put(&n, 8);
  put(s.data(), s.size());
}

void Writer::put_value(ValueType t, const nlohmann::json& v) {
  auto num = [&](auto x) { put(&x, sizeof x); };
  switch (t) {
    case ValueType::kU8: return num(v.get<uint8_t>());
    case ValueType::kI8: return num(v.get<int8_t>());
    case ValueType::kU16: return num(v.get<uint16_t>());
    case ValueType::kI16: return num(v.get<int16_t>());
    case ValueType::kU32: return num(v.get<uint32_t>());
    case ValueType::kI32: return num(v.get<int32_t>());
    case ValueType::kU64: return num(v.get<uint64_t>());
    case ValueType::kI64: return num(v.get<int64_t>());
    case ValueType::kF32: return num(v.get<float>());
    case ValueType::kF64: return num(v.get<double>());
    case ValueType::kBool: return num(uint8_t(v.get<bool>() ? 1 : 0));
    case ValueType::kString: return put_string(v.get<std::string>());
    case ValueType::kArray: break;
  }
  MMX_CHECK(false, "put_value: nested array");
}

void Writer::pad_to(uint64_t multiple) {
  static const uint8_t zeros[64] = {};
  while (pos_ % multiple) put(zeros, size_t(std::min<uint64_t>(64, multiple - pos_ % multiple)));
}

void Writer::begin() {
  if (f_) fail("GGUF writer: begin() called twice");
  f_ = std::fopen(partial_.c_str(), "wb");
  if (!f_) fail("cannot create '{}': {}", partial_, std::strerror(errno));
  const uint32_t magic = 0x46554747, version = 3;
  const uint64_t n_tensors = tensors_.size();
  // general.alignment is written only when it differs from the default, as llama.cpp does.
  if (alignment_ != kDefaultAlignment) set_u32("general.alignment", alignment_);
  const uint64_t n_kv = kv_.size();
  put(&magic, 4);
  put(&version, 4);
  put(&n_tensors, 8);
  put(&n_kv, 8);
  for (const auto& [key, v] : kv_) {
    put_string(key);
    const uint32_t t = uint32_t(v.type);
    put(&t, 4);
    if (v.type != ValueType::kArray) {
      put_value(v.type, v.v);
      continue;
    }
    const uint32_t e = uint32_t(v.elem);
    const uint64_t n = v.v.size();
    put(&e, 4);
    put(&n, 8);
    for (const auto& x : v.v) put_value(v.elem, x);
  }
  for (const Pending& t : tensors_) {
    put_string(t.name);
    const uint32_t nd = uint32_t(t.shape.size());
    put(&nd, 4);
    for (size_t d = t.shape.size(); d-- > 0;) {  // ggml order: innermost first
      const uint64_t ne = uint64_t(t.shape[d]);
      put(&ne, 8);
    }
    const uint32_t type = ggml_of_dtype(t.dtype);
    put(&type, 4);
    put(&t.offset, 8);
  }
  pad_to(alignment_);
  data_start_ = pos_;
}

void Writer::write(const void* data, size_t n) {
  if (!f_) fail("GGUF writer: write() before begin()");
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (cur_ >= tensors_.size()) fail("GGUF writer: {} bytes more than the tensors hold", n);
    const Pending& t = tensors_[cur_];
    const size_t take = size_t(std::min<uint64_t>(n, t.size - cur_done_));
    put(p, take);
    p += take;
    n -= take;
    cur_done_ += take;
    if (cur_done_ == t.size) {
      pad_to(alignment_);
      ++cur_;
      cur_done_ = 0;
    }
  }
}

void Writer::finish() {
  if (!f_) fail("GGUF writer: finish() before begin()");
  // Zero-byte tensors complete without a write.
  while (cur_ < tensors_.size() && tensors_[cur_].size == 0) ++cur_;
  if (cur_ != tensors_.size())
    fail("GGUF writer: tensor '{}' got {} of its {} bytes", tensors_[cur_].name, cur_done_,
         tensors_[cur_].size);
  MMX_CHECK(pos_ == data_start_ + data_bytes_, "GGUF writer: {} != {} + {}", pos_, data_start_, data_bytes_);
  const bool ok = std::fflush(f_) == 0;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok) fail("writing '{}' failed: {}", partial_, std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) fail("cannot rename '{}' to '{}': {}", partial_, path_, ec.message());
  finished_ = true;
}

}  // namespace mmx::gguf
