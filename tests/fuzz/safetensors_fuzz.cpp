// libFuzzer target: the input bytes are a safetensors file. Opening must either throw mmx::Error
// or succeed, and on success every tensor() view must lie inside the file's mapping (every byte
// of it is read, so ASan sees any escape). Any other exception, crash or sanitizer report is a
// finding. See README.md for how to run it.
//
// The input goes through the real path (TensorStore::open on a file name, mmap and all): it is
// written to a memfd and opened as /proc/self/fd/N, so no disk I/O per run.
//
// MMX_FUZZ_SEED_DIR=dir: on start-up, also write a few valid seed files into dir.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "memfd_input.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace {

MemfdInput g_input;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what, detail.c_str());
  std::abort();
}

void write_seeds(const std::string& dir) {
  using mmx::DType;
  const std::vector<uint8_t> bytes(64, 0x3c);
  mmx::SafetensorsWriter a;
  a.add("model.embed_tokens.weight", DType::kBF16, {4, 2}, bytes.data(), 16);
  a.add("model.norm.weight", DType::kF32, {2}, bytes.data(), 8);
  a.add("ids", DType::kI64, {1}, bytes.data(), 8);
  a.add("zero", DType::kF8E4M3, {0, 3}, nullptr, 0);
  a.add("s", DType::kI32, {}, bytes.data(), 4);
  a.set_metadata("format", "pt");
  a.write(dir + "/seed_a.safetensors");
  mmx::SafetensorsWriter b;
  b.add("w", DType::kU8, {1, 2, 2, 1}, bytes.data(), 4);
  b.add("h", DType::kF16, {3}, bytes.data(), 6);
  b.write(dir + "/seed_b.safetensors");
  mmx::SafetensorsWriter().write(dir + "/seed_empty.safetensors");
}

// Reads every byte of every view and checks it against the mapping's bounds.
void check_store(const mmx::TensorStore& st) {
  for (const std::string& name : st.names()) {
    const mmx::TensorInfo& ti = st.info(name);
    const std::span<const uint8_t> map = st.mapped_file(ti.file_index);
    if (ti.offset > map.size() || ti.size_bytes > map.size() - ti.offset) {
      finding("info outside the mapping", name);
    }
    mmx::Tensor t;
    try {
      t = st.tensor(name);
    } catch (const mmx::Error&) {
      if (ti.dtype_supported && ti.shape.size() <= size_t(mmx::kMaxDims)) {
        finding("tensor() threw for a servable tensor", name);
      }
      continue;
    }
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < map.data() || t.size_bytes() != ti.size_bytes ||
        t.size_bytes() > size_t(map.data() + map.size() - p)) {
      finding("view outside the mapping", name);
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < t.size_bytes(); ++i) sink = sink ^ p[i];
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  g_input.open("safetensors_fuzz");
  if (const char* dir = std::getenv("MMX_FUZZ_SEED_DIR")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_input.write(data, size);
  try {
    const mmx::TensorStore st = mmx::TensorStore::open(g_input.path());
    check_store(st);
  } catch (const mmx::Error&) {
    // rejected cleanly: fine
  } catch (const std::exception& e) {
    finding("non-mmx exception", e.what());
  }
  return 0;
}
