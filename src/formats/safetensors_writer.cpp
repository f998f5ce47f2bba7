#include "formats/safetensors_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "formats/safetensors.h"

namespace mmx {

namespace {

constexpr const char* kMetadataKey = kSafetensorsMetadataKey;
std::string shape_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }
std::string errno_text() { return std::strerror(errno); }

}  // namespace

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t size_bytes) {
  if (name == kMetadataKey) fail("safetensors writer: '{}' is a reserved name", name);
  for (const Entry& e : entries_)
    if (e.name == name) fail("safetensors writer: duplicate tensor name '{}'", name);
  uint64_t want = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(want, uint64_t(d), &want)) {
      fail("safetensors writer: tensor '{}': bad shape {}", name, shape_string(shape));
    }
  }
  if (want != size_bytes) {
    fail("safetensors writer: tensor '{}': {} {} needs {} bytes, got {}", name, dtype_name(dtype),
         shape_string(shape), want, size_bytes);
  }
  Entry e{name, dtype, std::move(shape), {}};
  if (size_bytes > 0) {
    const auto* p = static_cast<const uint8_t*>(data);
    e.bytes.assign(p, p + size_bytes);
  }
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

namespace {

// Closes the FILE and removes the temp file unless released.
struct TempFile {
  std::string path;
  std::FILE* f = nullptr;
  bool keep = false;
  ~TempFile() {
    if (f) std::fclose(f);
    if (!keep) std::remove(path.c_str());
  }
};

void write_bytes(TempFile& t, const void* p, size_t n) {
  if (n > 0 && std::fwrite(p, 1, n, t.f) != n) {
    fail("safetensors writer: writing '{}' failed: {}", t.path, errno_text());
  }
}

}  // namespace

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  // Largest elements first (stable): every size is a power of two and every tensor a whole
  // number of its elements, so each offset is a multiple of its element size.
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });
  uint64_t offset = 0;
  for (const Entry* e : order) {
    header[e->name] = {{"dtype", std::string(dtype_name(e->dtype))},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + e->bytes.size()}}};
    offset += e->bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& ex) {  // e.g. a name that is not UTF-8
    fail("safetensors writer: cannot encode header for '{}': {}", path, ex.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-aligned

  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  TempFile tmp{path + ".tmp"};
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (!tmp.f) fail("safetensors writer: cannot create '{}': {}", tmp.path, errno_text());
  write_bytes(tmp, len, sizeof len);
  write_bytes(tmp, text.data(), text.size());
  for (const Entry* e : order) write_bytes(tmp, e->bytes.data(), e->bytes.size());
  // Durable before the rename: a kill or power loss after it never finds a short file at `path`.
  if (std::fflush(tmp.f) != 0 || ::fsync(::fileno(tmp.f)) != 0)
    fail("safetensors writer: syncing '{}' failed: {}", tmp.path, errno_text());
  const int rc = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (rc != 0) fail("safetensors writer: closing '{}' failed: {}", tmp.path, errno_text());
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0) {
    fail("safetensors writer: renaming '{}' to '{}' failed: {}", tmp.path, path, errno_text());
  }
  tmp.keep = true;
  const size_t slash = path.find_last_of('/');
  fsync_path(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));  // the rename itself
}

}  // namespace mmx
