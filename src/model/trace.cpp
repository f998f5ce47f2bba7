#include "model/trace.h"

#include <filesystem>

#include <fmt/format.h>

#include <cstdio>

#include "base/error.h"

namespace mmx {

namespace {
std::string g_dir;
}

void trace_set_dir(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create the dump directory {}: {}", dir, ec.message());
  g_dir = dir;
}
bool trace_enabled() { return !g_dir.empty(); }

// Writes a little-endian float32 or int32 .npy (format version 1.0).
void trace_write(const Tensor& x, const char* name, int il) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kI32) return;
  const std::string path =
      il < 0 ? fmt::format("{}/{}.npy", g_dir, name) : fmt::format("{}/{}.{}.npy", g_dir, name, il);
  std::string shape;
  for (int i = 0; i < x.ndim; ++i) shape += fmt::format("{},", x.shape[i]);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                  x.dtype == DType::kF32 ? "<f4" : "<i4", shape);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write trace file {}", path);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = uint16_t(header.size());
  std::fwrite(magic, 1, 8, f);
  std::fwrite(&hlen, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(x.data, 1, x.size_bytes(), f);
  std::fclose(f);
}

}  // namespace mmx
