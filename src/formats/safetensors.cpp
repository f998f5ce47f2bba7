// Safetensors reader (POSIX mmap + validated JSON header); the writer is safetensors_writer.cpp.
//
// Reading is in three layers, in reading order below:
//   header parsing   -> pure functions over the mapped bytes; every check of safetensors.h
//   SafetensorsFile  -> one mapped file and its parsed TensorInfos
//   TensorStore      -> single file, directory, sharded index or a GGUF file; hands out Tensor views
// The file is untrusted: every problem becomes an mmx::Error naming the file (and the tensor);
// no nlohmann exception, integer overflow or out-of-bounds pointer escapes.
//
// Not here: HF-name mapping, dtype conversion, device upload (model/weights does those).
#include "formats/safetensors.h"

#include "base/mapped_file.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace mmx {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit
constexpr uint64_t kMaxIndexBytes = 100ull << 20;
// A tensor entry is 3 levels deep ({name: {shape: [..]}}); allow some slack for unknown fields,
// but refuse hostile nesting before it costs memory.
constexpr int kMaxJsonDepth = 8;
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kMetadataKey = kSafetensorsMetadataKey;

// ---- errors ----

// "safetensors file 'F': <problem>"
template <typename... Args>
[[noreturn]] void file_error(const std::string& file, fmt::format_string<Args...> problem,
                             Args&&... args) {
  fail("safetensors file '{}': {}", file, fmt::format(problem, std::forward<Args>(args)...));
}

// "safetensors file 'F': tensor 'T': <problem>"
template <typename... Args>
[[noreturn]] void tensor_error(const std::string& file, const std::string& tensor,
                               fmt::format_string<Args...> problem, Args&&... args) {
  fail("safetensors file '{}': tensor '{}': {}", file, tensor,
       fmt::format(problem, std::forward<Args>(args)...));
}

// ---- dtypes ----

struct DtypeSpec {
  bool supported = false;
  DType dtype = DType::kU8;  // meaningful only when supported
  int bits = 0;              // per element
};

// Dtypes of the safetensors spec that mmx lists but cannot hand out as Tensors.
constexpr std::pair<std::string_view, int> kForeignDtypes[] = {
    {"BOOL", 8}, {"I8", 8},      {"I16", 16},    {"U16", 16},    {"U32", 32},
    {"U64", 64}, {"F64", 64},    {"F8_E5M2", 8}, {"F8_E8M0", 8}, {"C64", 64},
    {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

bool lookup_dtype(std::string_view s, DtypeSpec* out) {
  DType t;
  if (dtype_from_name(s, &t)) {
    *out = {true, t, int(dtype_size(t) * 8)};
    return true;
  }
  for (const auto& [name, bits] : kForeignDtypes) {
    if (name == s) {
      *out = {false, DType::kU8, bits};
      return true;
    }
  }
  return false;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// ---- JSON ----

// json::parse with three extra rules: no duplicate key in any object (nlohmann would silently keep
// the last one), no nesting deeper than kMaxJsonDepth, no NUL byte. `what` ("header", "index")
// names the text in messages. Throws mmx::Error via on_error(message).
template <typename OnError>
json parse_json_strict(const char* begin, const char* end, std::string_view what,
                       OnError on_error) {
  const bool is_header = what == "header";
  std::vector<std::set<std::string>> open_objects;  // keys seen, per enclosing object
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) on_error(fmt::format("JSON nested deeper than {}", kMaxJsonDepth));
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end) open_objects.pop_back();
    if (event == json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        on_error(is_header && depth == 1 ? fmt::format("duplicate tensor name '{}'", key)
                                         : fmt::format("duplicate key '{}' in {}", key, what));
      }
    }
    return true;
  };
  // nlohmann stops at a NUL byte as if the input ended, which would silently ignore whatever
  // follows; a raw NUL is never legal JSON, so refuse it up front.
  if (std::memchr(begin, '\0', size_t(end - begin)) != nullptr) {
    on_error(fmt::format("{} is not valid JSON: it contains a NUL byte", what));
  }
  try {
    return json::parse(begin, end, callback);
  } catch (const json::exception& e) {
    on_error(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
  return {};  // unreachable: on_error throws
}

// Reads a JSON integer in [0, max] into *out; false for anything else (negative, float, ...).
bool json_to_u64(const json& v, uint64_t max, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t u = v.get<uint64_t>();
  if (u > max) return false;
  *out = u;
  return true;
}

// ---- header parsing ----

// Where the header says things are, in the file's own terms.
struct HeaderLayout {
  uint64_t header_len = 0;  // N
  uint64_t data_start = 0;  // 8 + N
  uint64_t data_size = 0;   // file size - data_start
};

HeaderLayout read_header_length(const std::string& file, const uint8_t* bytes, uint64_t size) {
  if (size < 8) {
    file_error(file,
               "file is {} bytes, shorter than the 8-byte header length; "
               "not a safetensors file (or truncated?)",
               size);
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian, any host
  if (n > kMaxHeaderBytes) {
    file_error(file,
               "header length {} is absurd (limit {} bytes); "
               "not a safetensors file?",
               n, kMaxHeaderBytes);
  }
  if (n > size - 8) {
    file_error(file,
               "header length {} exceeds the {} bytes after the length "
               "prefix; file truncated or not a safetensors file?",
               n, size - 8);
  }
  return {n, 8 + n, size - 8 - n};
}

// shape: a list of non-negative integers whose product fits in int64_t. The product of the
// non-zero entries must fit too, so Tensor::numel() cannot overflow in any order. Returns numel.
uint64_t parse_shape(const std::string& file, const std::string& name, const json& v,
                     std::vector<int64_t>* shape) {
  if (!v.is_array()) tensor_error(file, name, "\"shape\" is not a list: {}", v.dump());
  const uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1, nonzero_product = 1;
  for (const json& e : v) {
    uint64_t d;
    if (!json_to_u64(e, kMax, &d)) {
      tensor_error(file, name, "shape entry {} is not an integer in [0, 2^63)", e.dump());
    }
    if (d != 0 &&
        (__builtin_mul_overflow(nonzero_product, d, &nonzero_product) || nonzero_product > kMax)) {
      tensor_error(file, name, "shape {} overflows: product too large", v.dump());
    }
    numel = d == 0 ? 0 : numel * d;  // <= nonzero_product, no overflow
    shape->push_back(int64_t(d));
  }
  return numel;
}

// data_offsets: exactly [begin, end], non-negative integers, begin <= end.
std::pair<uint64_t, uint64_t> parse_offsets(const std::string& file, const std::string& name,
                                            const json& v) {
  uint64_t b = 0, e = 0;
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (!v.is_array() || v.size() != 2 || !json_to_u64(v[0], kMax, &b) ||
      !json_to_u64(v[1], kMax, &e)) {
    tensor_error(file, name,
                 "\"data_offsets\" must be [begin, end] with non-negative "
                 "integers, got {}",
                 v.dump());
  }
  if (b > e) {
    tensor_error(file, name, "data_offsets [{}, {}] has begin > end", b, e);
  }
  return {b, e};
}

const json& required_field(const std::string& file, const std::string& name, const json& entry,
                           const char* key) {
  auto it = entry.find(key);
  if (it == entry.end()) tensor_error(file, name, "missing \"{}\"", key);
  return *it;
}

TensorInfo parse_entry(const std::string& file, const std::string& name, const json& entry,
                       const HeaderLayout& layout) {
  if (!entry.is_object()) {
    tensor_error(file, name, "entry is not an object: {}", entry.dump());
  }
  TensorInfo ti;
  ti.name = name;
  const json& dtype = required_field(file, name, entry, "dtype");
  if (!dtype.is_string()) tensor_error(file, name, "\"dtype\" is not a string");
  ti.dtype_str = dtype.get<std::string>();
  DtypeSpec spec;
  if (!lookup_dtype(ti.dtype_str, &spec)) {
    tensor_error(file, name, "unknown dtype \"{}\"", ti.dtype_str);
  }
  ti.dtype = spec.dtype;
  ti.dtype_supported = spec.supported;

  const uint64_t numel =
      parse_shape(file, name, required_field(file, name, entry, "shape"), &ti.shape);
  const auto [begin, end] =
      parse_offsets(file, name, required_field(file, name, entry, "data_offsets"));

  uint64_t bits;
  if (__builtin_mul_overflow(numel, uint64_t(spec.bits), &bits)) {
    tensor_error(file, name, "shape {} of {}: size in bytes overflows", shape_string(ti.shape),
                 ti.dtype_str);
  }
  if (bits % 8 != 0) {  // sub-byte dtypes (F4, F6_*) must fill whole bytes
    tensor_error(file, name, "shape {} of {} is not a whole number of bytes",
                 shape_string(ti.shape), ti.dtype_str);
  }
  ti.size_bytes = bits / 8;
  if (end - begin != ti.size_bytes) {
    tensor_error(file, name, "data_offsets [{}, {}] span {} bytes, but {} {} needs {}", begin, end,
                 end - begin, ti.dtype_str, shape_string(ti.shape), ti.size_bytes);
  }
  if (end > layout.data_size) {
    tensor_error(file, name,
                 "data_offsets [{}, {}] end past the data section ({} "
                 "bytes); file truncated?",
                 begin, end, layout.data_size);
  }
  ti.offset = layout.data_start + begin;
  return ti;
}

std::map<std::string, std::string> parse_metadata(const std::string& file, const json& v) {
  if (!v.is_object()) file_error(file, "\"__metadata__\" is not an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      file_error(file, "\"__metadata__\" value of '{}' is not a string: {}", key, value.dump());
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

// Non-empty byte ranges must not share a byte. Zero-size tensors occupy nothing.
void check_overlaps(const std::string& file, const std::map<std::string, TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, ti] : tensors)
    if (ti.size_bytes > 0) by_offset.push_back(&ti);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (a.offset + a.size_bytes > b.offset) {
      file_error(file, "tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", a.name,
                 b.name, a.offset, a.offset + a.size_bytes, b.offset, b.offset + b.size_bytes);
    }
  }
}

// ---- small file helpers ----

std::string errno_text() { return std::strerror(errno); }

std::string read_small_file(const std::string& path, uint64_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}': {}", path, errno_text());
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > limit) fail("'{}' is larger than {} bytes; refusing to read it", path, limit);
  }
  if (in.bad()) fail("error reading '{}': {}", path, errno_text());
  return text;
}

// Never throws (a hostile name can make the throwing overloads fail, e.g. ENAMETOOLONG).
bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// ---- SafetensorsFile: one mapped, validated file ----

class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::string path) : map_(std::move(path), "safetensors file") {
    parse_header();
  }
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return map_.path(); }
  const uint8_t* bytes() const { return map_.bytes(); }
  uint64_t size() const { return map_.size(); }
  void to_huge_pages() { map_.to_huge_pages(); }
  bool release(const uint8_t* p, size_t n) { return map_.release(p, n); }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void parse_header() {
    const std::string& path = map_.path();
    const HeaderLayout layout = read_header_length(path, map_.bytes(), map_.size());
    const char* text = reinterpret_cast<const char*>(map_.bytes() + 8);
    const json root =
        parse_json_strict(text, text + layout.header_len, "header",
                          [&](const std::string& msg) { file_error(path, "{}", msg); });
    if (!root.is_object()) {
      file_error(path, "header is a JSON {}, not an object", root.type_name());
    }
    for (const auto& [key, value] : root.items()) {
      if (key == kMetadataKey) {
        metadata_ = parse_metadata(path, value);
      } else {
        tensors_.emplace(key, parse_entry(path, key, value, layout));
      }
    }
    check_overlaps(path, tensors_);
  }

  MappedFile map_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// ---- TensorStore ----

struct TensorStore::Impl {
  std::string origin;  // what open() was given, for messages
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::unique_ptr<gguf::File> gguf;  // set instead of `files` for a GGUF file
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;

  int add_file(const std::string& path) {
    files.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [key, value] : files.back()->metadata()) metadata.emplace(key, value);
    return int(files.size()) - 1;
  }

  void load_single(const std::string& path) {
    add_file(path);
    tensors = files[0]->tensors();
  }

  void load_index(const std::string& index_path);

  // A GGUF file: its tensors under their GGUF names; types it cannot hand out are listed with
  // dtype_supported = false and their ggml name (tensor() refuses them by name).
  void load_gguf(const std::string& path) {
    gguf = gguf::File::open(path);
    for (const gguf::TensorInfo& g : gguf->tensors()) {
      TensorInfo ti;
      ti.name = g.name;
      ti.dtype = g.dtype;
      ti.shape = g.shape;
      ti.offset = g.offset;
      ti.size_bytes = g.size_bytes;
      ti.dtype_str = g.type_name;
      ti.dtype_supported = g.supported;
      tensors.emplace(g.name, std::move(ti));
    }
  }

  const std::string& path_of(int file_index) const {
    return gguf ? gguf->path() : files[size_t(file_index)]->path();
  }
  const uint8_t* bytes_of(int file_index) const {
    return gguf ? gguf->bytes() : files[size_t(file_index)]->bytes();
  }
};

void TensorStore::to_huge_pages() {
  if (impl_->gguf) impl_->gguf->to_huge_pages();
  for (auto& f : impl_->files) f->to_huge_pages();
}

bool TensorStore::release(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (impl_->gguf && impl_->gguf->release(b, n)) return true;
  for (auto& f : impl_->files)
    if (f->release(b, n)) return true;
  return false;
}

namespace {

// A shard name from an index must be a plain file name in the index's directory.
void check_shard_name(const std::string& index, const std::string& tensor,
                      const std::string& shard) {
  const bool bad = shard.empty() || shard == "." || shard == ".." ||
                   shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos;
  if (bad) {
    fail(
        "index '{}': tensor '{}' maps to shard '{}', which is not a plain file name in the "
        "index's directory; refusing it",
        index, tensor, shard);
  }
}

}  // namespace

void TensorStore::Impl::load_index(const std::string& index_path) {
  const std::string text = read_small_file(index_path, kMaxIndexBytes);
  const json root =
      parse_json_strict(text.data(), text.data() + text.size(), "index",
                        [&](const std::string& msg) { fail("index '{}': {}", index_path, msg); });
  if (!root.is_object()) fail("index '{}': not a JSON object", index_path);
  auto meta = root.find("metadata");
  if (meta != root.end() && !meta->is_object() && !meta->is_null()) {
    fail("index '{}': \"metadata\" is not an object", index_path);
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object()) {
    fail("index '{}': missing \"weight_map\" object (tensor name -> shard file)", index_path);
  }
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, int> shard_index;  // shard file name -> files[]
  for (const auto& [tensor, shard_json] : weight_map->items()) {
    if (!shard_json.is_string()) {
      fail("index '{}': tensor '{}' maps to {}, not a file name", index_path, tensor,
           shard_json.dump());
    }
    const std::string shard = shard_json.get<std::string>();
    check_shard_name(index_path, tensor, shard);
    auto it = shard_index.find(shard);
    if (it == shard_index.end()) {
      const fs::path shard_path = dir / shard;
      if (!path_exists(shard_path)) {
        fail("index '{}': tensor '{}' maps to shard '{}', but '{}' does not exist", index_path,
             tensor, shard, shard_path.string());
      }
      it = shard_index.emplace(shard, add_file(shard_path.string())).first;
    }
    const SafetensorsFile& file = *files[it->second];
    auto found = file.tensors().find(tensor);
    if (found == file.tensors().end()) {
      fail("index '{}' maps tensor '{}' to shard '{}', but '{}' does not contain it", index_path,
           tensor, shard, file.path());
    }
    TensorInfo ti = found->second;
    ti.file_index = it->second;
    tensors.emplace(tensor, std::move(ti));
  }
}

TensorStore::TensorStore() : impl_(std::make_unique<Impl>()) {}
TensorStore::~TensorStore() = default;
TensorStore::TensorStore(TensorStore&&) noexcept = default;
TensorStore& TensorStore::operator=(TensorStore&&) noexcept = default;

TensorStore TensorStore::open(const std::string& path) { return open_checkpoint(path).tensors(); }

TensorStore TensorStore::open_gguf(const std::string& path) {
  TensorStore store;
  store.impl_->origin = path;
  store.impl_->load_gguf(path);
  return store;
}

TensorStore TensorStore::open_safetensors(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    fail("cannot open checkpoint '{}': no such file or directory", path);
  }
  TensorStore store;
  Impl& impl = *store.impl_;
  impl.origin = path;
  if (fs::is_directory(st)) {
    const fs::path index = fs::path(path) / kIndexName;
    const fs::path single = fs::path(path) / kSingleName;
    if (path_exists(index)) {
      impl.load_index(index.string());
    } else if (path_exists(single)) {
      impl.load_single(single.string());
    } else {
      fail("checkpoint directory '{}' has neither {} nor {}; expected a safetensors checkpoint",
           path, kIndexName, kSingleName);
    }
  } else if (ends_with(path, ".index.json")) {
    impl.load_index(path);
  } else {
    impl.load_single(path);
  }
  return store;
}

bool TensorStore::has(const std::string& name) const { return impl_->tensors.count(name) > 0; }

const TensorInfo& TensorStore::info(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end()) {
    fail("tensor '{}' not found in checkpoint '{}'", name, impl_->origin);
  }
  return it->second;
}

Tensor TensorStore::tensor(const std::string& name) const {
  const TensorInfo& ti = info(name);
  const std::string& path = impl_->path_of(ti.file_index);
  if (!ti.dtype_supported) {
    if (impl_->gguf)
      fail("GGUF file '{}': tensor '{}' has type {}, which mmx does not run (supported: F32, F16, "
           "BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K); requantize it, e.g. mmx convert --type q4_k_m",
           path, name, ti.dtype_str);
    tensor_error(path, name,
                 "dtype {} is not supported by mmx (supported: "
                 "F32, F16, BF16, F8_E4M3, I32, I64, U8)",
                 ti.dtype_str);
  }
  if (ti.shape.size() > size_t(kMaxDims)) {
    tensor_error(path, name, "shape {} has {} dims; mmx tensors have at most {}",
                 shape_string(ti.shape), ti.shape.size(), kMaxDims);
  }
  Tensor t;
  // Read-only mapping: writing through this pointer faults.
  t.data = const_cast<uint8_t*>(impl_->bytes_of(ti.file_index) + ti.offset);
  t.dtype = ti.dtype;
  t.ndim = int(ti.shape.size());
  for (int i = 0; i < t.ndim; ++i) t.shape[size_t(i)] = ti.shape[size_t(i)];
  return t;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->tensors.size());
  for (const auto& [name, ti] : impl_->tensors) out.push_back(name);
  return out;
}

const std::string& TensorStore::file_of(const std::string& name) const {
  return impl_->path_of(info(name).file_index);
}

const gguf::File* TensorStore::gguf() const { return impl_->gguf.get(); }

uint64_t TensorStore::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, ti] : impl_->tensors) total += ti.size_bytes;
  return total;
}

const std::map<std::string, std::string>& TensorStore::metadata() const { return impl_->metadata; }

std::span<const uint8_t> TensorStore::mapped_file(int file_index) const {
  if (impl_->gguf) {
    MMX_CHECK(file_index == 0, "mapped_file({}) of a GGUF file", file_index);
    return {impl_->gguf->bytes(), size_t(impl_->gguf->size())};
  }
  MMX_CHECK(file_index >= 0 && size_t(file_index) < impl_->files.size(),
            "mapped_file({}) of {} files", file_index, impl_->files.size());
  const SafetensorsFile& f = *impl_->files[size_t(file_index)];
  return {f.bytes(), size_t(f.size())};
}

}  // namespace mmx
