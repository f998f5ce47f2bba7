// Test helpers shared by the model and engine tests: fresh seeded tiny checkpoints (made once per
// process and removed when the test program ends), random prompts, and a forward over a range of
// a prompt. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/model.h"
#include "tiny/tiny.h"

namespace mmx::testing {

// Directory prefix of every checkpoint these helpers write: mmx_tiny_<pid>_...
inline std::string tiny_prefix() { return fmt::format("mmx_tiny_{}_", ::getpid()); }

// A fresh tiny checkpoint of `arch` (tiny_defaults) in `dtype` with `seed`; `tweak` may change the
// options (same tag -> same directory, so give distinct tweaks distinct tags).
inline std::string tiny_dir(const std::string& arch, const std::string& dtype, uint64_t seed,
                            const std::string& tag = "", void (*tweak)(TinyOptions&) = nullptr) {
  static std::set<std::string> made;
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  fmt::format("{}{}_{}_{}{}", tiny_prefix(), arch, dtype, seed, tag);
  if (made.insert(d.string()).second) {
    TinyOptions o = tiny_defaults(arch);
    o.out_dir = d.string();
    o.dtype = dtype;
    o.seed = seed;
    if (tweak) tweak(o);
    write_tiny_checkpoint(o);
  }
  return d.string();
}

// Removes this process's tiny checkpoints when the test program ends.
class TinyCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
      if (e.path().filename().string().rfind(tiny_prefix(), 0) == 0) std::filesystem::remove_all(e.path());
  }
};
[[maybe_unused]] inline ::testing::Environment* const kTinyCleanup =
    ::testing::AddGlobalTestEnvironment(new TinyCleanup);

inline std::vector<int32_t> random_ids(int n, int vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = int32_t(rng() % uint32_t(vocab));
  return ids;
}

// Feeds ids[b, e) at positions b.. into kv; returns the logits of every fed token [e-b, vocab].
inline Buffer feed(Model& m, KvCache& kv, const std::vector<int32_t>& ids, int64_t b, int64_t e) {
  std::vector<int32_t> tok(ids.begin() + b, ids.begin() + e), pos(static_cast<size_t>(e - b));
  for (int64_t i = b; i < e; ++i) pos[size_t(i - b)] = int32_t(i);
  ForwardBatch fb;
  fb.tokens = Tensor(tok.data(), DType::kI32, {e - b});
  fb.positions = Tensor(pos.data(), DType::kI32, {e - b});
  fb.pos0 = b;
  fb.all_logits = true;
  Buffer logits(DType::kF32, {e - b, m.config().vocab_size});
  m.forward(fb, kv, logits.t());
  return logits;
}

}  // namespace mmx::testing
