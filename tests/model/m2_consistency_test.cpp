// MiniMax-M2 consistency tests on fresh seeded tiny checkpoints (no oracle needed):
//   prefill of N tokens == N single-token decodes; chunked prefill == unchunked;
//   bad ids are refused without touching the cache; missing / mis-shaped tensors are named.
// The numerics against the independent float64 reference live in m2_reference_check.py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "base/error.h"
#include "engine/generate.h"
#include "model/model.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "tiny/tiny.h"
#include "ops/ops.h"
#include "testing/allclose.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

// Both sides are fp32 with the same weights; they differ only in summation order (GEMV vs
// blocked GEMM, attention over 1 vs many queries). Logits are O(1..10); measured max diff on
// these models is ~1e-6, so 1e-4 leaves two orders of magnitude of headroom.
constexpr testing::Tol kPathTol{1e-4, 1e-4, 1e-10};

using testing::random_ids;

// Fresh per process (never a stale checkpoint from an older build).
std::string tiny_dir(const std::string& dtype, uint64_t seed) {
  return testing::tiny_dir("minimax_m2", dtype, seed, "_b48",
                           [](TinyOptions& o) { o.fp8_block = 48; });  // ragged blocks over hidden 64
}

// Removes this process's broken copies when the test program ends.
class TempCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string tag = fmt::format("_{}_", ::getpid());
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
      if (e.path().filename().string().rfind("mmx_m2_", 0) == 0 &&
          e.path().filename().string().find(tag) != std::string::npos)
        fs::remove_all(e.path());
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new TempCleanup);

Buffer run_chunked(Model& m, const std::vector<int32_t>& ids, int chunk) {
  return prefill_logits(m, ids, chunk);
}

class M2Consistency : public ::testing::TestWithParam<std::string> {};

TEST_P(M2Consistency, PrefillEqualsDecodeAndChunked) {
  auto model = load_model(tiny_dir(GetParam(), 11));
  const auto ids = random_ids(40, int(model->config().vocab_size), 3);
  const Buffer full = run_chunked(*model, ids, int(ids.size()));
  for (int chunk : {1, 7, 16}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const Buffer got = run_chunked(*model, ids, chunk);
    EXPECT_ALLCLOSE(got.t(), full.t(), kPathTol);
  }
}

TEST_P(M2Consistency, LastRowLogitsEqualAllRows) {
  auto model = load_model(tiny_dir(GetParam(), 11));
  const int64_t V = model->config().vocab_size;
  const auto ids = random_ids(9, int(V), 5);
  const Buffer full = run_chunked(*model, ids, 9);
  KvCache kv = model->make_cache(9);
  std::vector<int32_t> tok(ids), pos(9);
  for (int i = 0; i < 9; ++i) pos[i] = i;
  ForwardBatch fb;
  fb.tokens = Tensor(tok.data(), DType::kI32, {9});
  fb.positions = Tensor(pos.data(), DType::kI32, {9});
  Buffer last(DType::kF32, {1, V});
  model->forward(fb, kv, last.t());
  EXPECT_ALLCLOSE(last.t(), full.t().rows_range(8, 9), testing::tol::kF32);
}

// The whole model on the fast CPU ops vs the same model on the fp64 reference ops.
TEST_P(M2Consistency, FastOpsMatchReferenceOps) {
  auto model = load_model(tiny_dir(GetParam(), 11));
  const auto ids = random_ids(12, int(model->config().vocab_size), 9);
  const Buffer fast = run_chunked(*model, ids, 12);
  ops::set_backend(ops::Backend::kRef);
  const Buffer ref = run_chunked(*model, ids, 12);
  ops::set_backend(ops::Backend::kCpu);
  EXPECT_ALLCLOSE(fast.t(), ref.t(), kPathTol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, M2Consistency, ::testing::Values("f32", "f16", "bf16", "fp8"));

TEST(M2Errors, InvalidTokenIdIsRefusedAndCacheUntouched) {
  auto model = load_model(tiny_dir("f32", 11));
  const int64_t V = model->config().vocab_size;
  KvCache kv = model->make_cache(4);
  std::vector<int32_t> tok = {1, int32_t(V)}, pos = {0, 1};
  ForwardBatch fb;
  fb.tokens = Tensor(tok.data(), DType::kI32, {2});
  fb.positions = Tensor(pos.data(), DType::kI32, {2});
  Buffer logits(DType::kF32, {1, V});
  try {
    model->forward(fb, kv, logits.t());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.n_past(), 0);
  tok[1] = -5;
  EXPECT_THROW(model->forward(fb, kv, logits.t()), Error);
}

TEST(M2Errors, ContextOverflowIsAnError) {
  auto model = load_model(tiny_dir("f32", 11));
  KvCache kv = model->make_cache(2);
  std::vector<int32_t> tok = {1, 2, 3}, pos = {0, 1, 2};
  ForwardBatch fb;
  fb.tokens = Tensor(tok.data(), DType::kI32, {3});
  fb.positions = Tensor(pos.data(), DType::kI32, {3});
  Buffer logits(DType::kF32, {1, model->config().vocab_size});
  EXPECT_THROW(model->forward(fb, kv, logits.t()), Error);
}

// Rewrites the tiny checkpoint with one tensor dropped or reshaped; loading must name it.
std::string broken_copy(const std::string& src, const std::string& victim, bool drop) {
  const fs::path d = fs::temp_directory_path() / fmt::format("mmx_m2_broken_{}_{}", ::getpid(), int(drop));
  fs::create_directories(d);
  fs::copy_file(fs::path(src) / "config.json", d / "config.json", fs::copy_options::overwrite_existing);
  const TensorStore st = TensorStore::open(src);
  SafetensorsWriter w;
  for (const auto& name : st.names()) {
    const Tensor t = st.tensor(name);
    if (name == victim && drop) continue;
    std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
    if (name == victim) shape = {shape[0] / 2, shape[1] * 2};
    w.add(name, t.dtype, shape, t.data, t.size_bytes());
  }
  w.write((d / "model.safetensors").string());
  return d.string();
}

// The same checkpoint split over two shards + model.safetensors.index.json gives the same logits.
TEST(M2Sharded, ShardedEqualsSingleFile) {
  const std::string src = tiny_dir("bf16", 11);
  const fs::path d = fs::temp_directory_path() / fmt::format("mmx_m2_sharded_{}_", ::getpid());
  fs::create_directories(d);
  fs::copy_file(fs::path(src) / "config.json", d / "config.json", fs::copy_options::overwrite_existing);
  const TensorStore st = TensorStore::open(src);
  SafetensorsWriter w[2];
  nlohmann::json index = {{"metadata", {{"total_size", st.total_bytes()}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const auto& name : st.names()) {
    const Tensor t = st.tensor(name);
    const int shard = (i++ % 2);
    w[shard].add(name, t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim), t.data,
                 t.size_bytes());
    index["weight_map"][name] = fmt::format("model-0000{}-of-00002.safetensors", shard + 1);
  }
  for (int s = 0; s < 2; ++s) w[s].write((d / fmt::format("model-0000{}-of-00002.safetensors", s + 1)).string());
  std::ofstream(d / "model.safetensors.index.json") << index.dump();

  auto single = load_model(src);
  auto sharded = load_model(d.string());
  const auto ids = random_ids(10, int(single->config().vocab_size), 4);
  const Buffer a = run_chunked(*single, ids, 10), b = run_chunked(*sharded, ids, 10);
  EXPECT_EQ(0, std::memcmp(a.t().data, b.t().data, a.t().size_bytes()));
  fs::remove_all(d);
}

TEST(M2Errors, MissingAndMisshapedTensorsAreNamed) {
  const std::string src = tiny_dir("f32", 11);
  const std::string victim = "model.layers.2.self_attn.k_proj.weight";
  for (bool drop : {true, false}) {
    SCOPED_TRACE(drop ? "missing" : "mis-shaped");
    try {
      load_model(broken_copy(src, victim, drop));
      FAIL() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(victim), std::string::npos) << msg;
      EXPECT_NE(msg.find(drop ? "missing" : "shape"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace mmx
