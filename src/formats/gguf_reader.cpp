// GGUF reader: a bounds-checked cursor over the mapped bytes, then the checks of gguf.h.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/error.h"
#include "formats/gguf.h"

namespace mmx::gguf {

namespace {

using json = nlohmann::json;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxNameBytes = 1024;  // llama.cpp caps names at 64; keys are short too
constexpr int kMaxDims = 4;

struct TypeRow {
  uint32_t id;
  const char* name;
  DType dtype;
  bool supported;
};
// Every ggml type id a file may name (for messages); the supported ones carry their DType.
constexpr TypeRow kTypes[] = {
    {0, "F32", DType::kF32, true},    {1, "F16", DType::kF16, true},
    {2, "Q4_0", DType::kQ4_0, true},  {3, "Q4_1", DType::kU8, false},
    {6, "Q5_0", DType::kU8, false},   {7, "Q5_1", DType::kU8, false},
    {8, "Q8_0", DType::kQ8_0, true},  {9, "Q8_1", DType::kU8, false},
    {10, "Q2_K", DType::kU8, false},  {11, "Q3_K", DType::kU8, false},
    {12, "Q4_K", DType::kQ4_K, true}, {13, "Q5_K", DType::kQ5_K, true},
    {14, "Q6_K", DType::kQ6_K, true}, {15, "Q8_K", DType::kU8, false},
    {16, "IQ2_XXS", DType::kU8, false}, {17, "IQ2_XS", DType::kU8, false},
    {18, "IQ3_XXS", DType::kU8, false}, {19, "IQ1_S", DType::kU8, false},
    {20, "IQ4_NL", DType::kU8, false}, {21, "IQ3_S", DType::kU8, false},
    {22, "IQ2_S", DType::kU8, false}, {23, "IQ4_XS", DType::kU8, false},
    {24, "I8", DType::kU8, false},    {25, "I16", DType::kU8, false},
    {26, "I32", DType::kU8, false},   {27, "I64", DType::kU8, false},
    {28, "F64", DType::kU8, false},   {29, "IQ1_M", DType::kU8, false},
    {30, "BF16", DType::kBF16, true}, {34, "TQ1_0", DType::kU8, false},
    {35, "TQ2_0", DType::kU8, false}, {39, "MXFP4", DType::kU8, false},
};

const TypeRow* find_type(uint32_t id) {
  for (const TypeRow& r : kTypes)
    if (r.id == id) return &r;
  return nullptr;
}

// Reads little-endian values from [p, end); every read is bounds-checked against the file.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* base, uint64_t size)
      : path_(path), base_(base), size_(size) {}

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> f, Args&&... args) const {
    fail("GGUF file '{}': {}", path_, fmt::format(f, std::forward<Args>(args)...));
  }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > left())
      error("truncated: {} needs {} bytes at offset {}, only {} left", what, n, pos_, left());
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what, uint64_t max_len) {
    const uint64_t n = read<uint64_t>(what);
    if (n > max_len) error("{} is {} bytes long (at most {} allowed)", what, n, max_len);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kString: return 8;  // at least its length field
    case ValueType::kArray: return 12;
  }
  return 0;
}

bool known(uint32_t t) { return t <= uint32_t(ValueType::kF64); }

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
      return true;
    default: return false;
  }
}

json read_scalar(Cursor& c, ValueType t, const std::string& key) {
  switch (t) {
    case ValueType::kU8: return c.read<uint8_t>("a u8 value");
    case ValueType::kI8: return c.read<int8_t>("an i8 value");
    case ValueType::kU16: return c.read<uint16_t>("a u16 value");
    case ValueType::kI16: return c.read<int16_t>("an i16 value");
    case ValueType::kU32: return c.read<uint32_t>("a u32 value");
    case ValueType::kI32: return c.read<int32_t>("an i32 value");
    case ValueType::kU64: return c.read<uint64_t>("a u64 value");
    case ValueType::kI64: return c.read<int64_t>("an i64 value");
    case ValueType::kF32: return c.read<float>("an f32 value");
    case ValueType::kF64: return c.read<double>("an f64 value");
    case ValueType::kBool: {
      const uint8_t b = c.read<uint8_t>("a bool value");
      if (b > 1) c.error("key '{}': bool value {} is neither 0 nor 1", key, b);
      return b == 1;
    }
    case ValueType::kString: return c.string("a string value", c.left());
    case ValueType::kArray: break;
  }
  c.error("key '{}': unexpected value type", key);
}

Value read_value(Cursor& c, const std::string& key) {
  Value v;
  const uint32_t t = c.read<uint32_t>("a value type");
  if (!known(t)) c.error("key '{}': unknown value type {}", key, t);
  v.type = ValueType(t);
  if (v.type != ValueType::kArray) {
    v.v = read_scalar(c, v.type, key);
    return v;
  }
  const uint32_t e = c.read<uint32_t>("an array element type");
  if (!known(e)) c.error("key '{}': unknown array element type {}", key, e);
  if (ValueType(e) == ValueType::kArray) c.error("key '{}': arrays of arrays are not supported", key);
  v.elem = ValueType(e);
  const uint64_t n = c.read<uint64_t>("an array length");
  // Every element takes at least scalar_size bytes: a count the file cannot hold is refused
  // before anything is allocated for it.
  if (n > c.left() / scalar_size(v.elem))
    c.error("key '{}': array of {} {} elements does not fit in the {} bytes left", key, n,
            value_type_name(v.elem), c.left());
  v.v = json::array();
  v.v.get_ref<json::array_t&>().reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) v.v.push_back(read_scalar(c, v.elem, key));
  return v;
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* kNames[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? kNames[uint32_t(t)] : "?";
}

bool dtype_of_ggml(uint32_t id, DType* out) {
  const TypeRow* r = find_type(id);
  if (!r || !r->supported) return false;
  *out = r->dtype;
  return true;
}

uint32_t ggml_of_dtype(DType t) {
  for (const TypeRow& r : kTypes)
    if (r.supported && r.dtype == t) return r.id;
  MMX_CHECK(false, "dtype {} has no GGUF type", dtype_name(t));
  return 0;
}

std::string ggml_type_name(uint32_t id) {
  const TypeRow* r = find_type(id);
  return r ? std::string(r->name) : fmt::format("unknown type {}", id);
}

File::File(const std::string& path) : map_(path, "GGUF file") {}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File(path));
  f->parse();
  return f;
}

void File::parse() {
  Cursor c(path(), bytes(), map_.size());
  if (map_.size() < 4 || c.read<uint32_t>("the magic") != kMagic)
    c.error("not a GGUF file (it does not start with the bytes 'GGUF')");
  version_ = c.read<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    c.error("GGUF version {} is not supported (this reader knows versions 2 and 3)", version_);
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  if (n_tensors > kMaxTensors) c.error("{} tensors (at most {} allowed)", n_tensors, kMaxTensors);
  if (n_kv > c.left() / 12) c.error("{} metadata entries cannot fit in the file", n_kv);

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("a metadata key", kMaxNameBytes);
    if (key.empty()) c.error("metadata entry {} has an empty key", i);
    Value v = read_value(c, key);
    if (!kv_.emplace(key, std::move(v)).second) c.error("duplicate metadata key '{}'", key);
  }
  if (has("general.alignment")) {
    const int64_t a = get_int("general.alignment");
    if (a <= 0 || a > (1 << 20) || (a & (a - 1)) != 0)
      c.error("general.alignment = {} is not a power of two in [1, 2^20]", a);
    alignment_ = uint32_t(a);
  }

  std::set<std::string> names;
  std::vector<uint64_t> rel_offsets;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.string("a tensor name", kMaxNameBytes);
    if (!names.insert(t.name).second) c.error("duplicate tensor name '{}'", t.name);
    const uint32_t nd = c.read<uint32_t>("a tensor's dimension count");
    if (nd < 1 || nd > uint32_t(kMaxDims))
      c.error("tensor '{}': {} dimensions (1 to {} supported)", t.name, nd, kMaxDims);
    std::vector<int64_t> ne(nd);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t v = c.read<uint64_t>("a tensor dimension");
      if (v == 0 || v > (uint64_t(1) << 40) || numel > (uint64_t(1) << 48) / v)
        c.error("tensor '{}': dimension {} = {} is zero or makes the tensor absurdly large", t.name, d, v);
      numel *= v;
      ne[d] = int64_t(v);
    }
    t.shape.assign(ne.rbegin(), ne.rend());
    t.ggml_type = c.read<uint32_t>("a tensor type");
    t.type_name = ggml_type_name(t.ggml_type);
    t.supported = dtype_of_ggml(t.ggml_type, &t.dtype);
    rel_offsets.push_back(c.read<uint64_t>("a tensor offset"));
    if (rel_offsets.back() % alignment_ != 0)
      c.error("tensor '{}': offset {} is not a multiple of the alignment {}", t.name,
              rel_offsets.back(), alignment_);
    if (t.supported) {
      const int64_t block = dtype_block(t.dtype);
      if (ne[0] % block != 0)
        c.error("tensor '{}': rows of {} elements are not whole {}-element blocks of {}", t.name,
                ne[0], block, t.type_name);
      t.size_bytes = uint64_t(numel / uint64_t(ne[0])) * dtype_row_bytes(t.dtype, ne[0]);
    }
    tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > map_.size() && n_tensors > 0)
    c.error("truncated: the data section would start at byte {} of a {}-byte file", data_start,
            map_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    if (rel_offsets[i] > map_.size() || data_start + rel_offsets[i] > map_.size() ||
        t.size_bytes > map_.size() - (data_start + rel_offsets[i]))
      c.error("tensor '{}': {} bytes at data offset {} run past the end of the {}-byte file "
              "(truncated?)", t.name, t.size_bytes, rel_offsets[i], map_.size());
    t.offset = data_start + rel_offsets[i];
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_)
    if (t.supported) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->size_bytes > by_offset[i]->offset)
      c.error("tensors '{}' and '{}' overlap", by_offset[i - 1]->name, by_offset[i]->name);
}

// ---- typed lookups ----

namespace {
template <typename... Args>
[[noreturn]] void key_error(const std::string& path, const std::string& key,
                            fmt::format_string<Args...> f, Args&&... args) {
  fail("GGUF file '{}': key '{}': {}", path, key, fmt::format(f, std::forward<Args>(args)...));
}
}  // namespace

int64_t File::get_int(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) key_error(path(), key, "missing (the file does not describe this model fully)");
  if (!is_integer(it->second.type))
    key_error(path(), key, "is a {}, expected an integer", value_type_name(it->second.type));
  if (it->second.type == ValueType::kU64 && it->second.v.get<uint64_t>() > uint64_t(INT64_MAX))
    key_error(path(), key, "value {} is too large", it->second.v.get<uint64_t>());
  return it->second.v.get<int64_t>();
}
int64_t File::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double File::get_float(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) key_error(path(), key, "missing (the file does not describe this model fully)");
  const ValueType t = it->second.type;
  if (t != ValueType::kF32 && t != ValueType::kF64 && !is_integer(t))
    key_error(path(), key, "is a {}, expected a number", value_type_name(t));
  return it->second.v.get<double>();
}
double File::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool File::get_bool(const std::string& key, bool fallback) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return fallback;
  if (it->second.type != ValueType::kBool)
    key_error(path(), key, "is a {}, expected a bool", value_type_name(it->second.type));
  return it->second.v.get<bool>();
}

std::string File::get_string(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) key_error(path(), key, "missing");
  if (it->second.type != ValueType::kString)
    key_error(path(), key, "is a {}, expected a string", value_type_name(it->second.type));
  return it->second.v.get<std::string>();
}
std::string File::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

const json& File::get_array(const std::string& key, ValueType elem) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) key_error(path(), key, "missing");
  const Value& v = it->second;
  const bool ok = v.type == ValueType::kArray &&
                  (v.elem == elem || (is_integer(elem) && is_integer(v.elem)));
  if (!ok)
    key_error(path(), key, "is a {} of {}, expected an array of {}", value_type_name(v.type),
              value_type_name(v.elem), value_type_name(elem));
  return v.v;
}

bool is_gguf(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // never open a FIFO
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace mmx::gguf
