// MiniMax-Text-01 / M1 consistency tests on fresh seeded tiny checkpoints (no oracle needed):
//   prefill == token-by-token decode == chunked prefill; lightning block 1 == 5 == 16 == 256;
//   fast ops == fp64 ops; state checkpoints: rollback / prefix resume land on exact states;
//   both config spellings (original and transformers -hf) give the same model.
// The numerics against the independent float64 reference live in text01_reference_check.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "base/error.h"
#include "engine/generate.h"
#include "model/config.h"
#include "model/model.h"
#include "tiny/tiny.h"
#include "model/weights.h"
#include "ops/ops.h"
#include "testing/allclose.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

// Same weights, fp32 on both sides; paths differ in summation order only (GEMV vs GEMM,
// blockwise vs token-by-token lightning). Logits are O(1..10); measured differences are ~1e-6,
// so 1e-4 leaves ~100x headroom while a wrong decay or a lost state moves logits by >1e-2.
constexpr testing::Tol kPathTol{1e-4, 1e-4, 1e-10};

using testing::feed;
using testing::random_ids;

std::string tiny_dir(const std::string& arch, const std::string& dtype, uint64_t seed, bool hf_keys = false) {
  if (!hf_keys) return testing::tiny_dir(arch, dtype, seed);
  return testing::tiny_dir(arch, dtype, seed, "_hf", [](TinyOptions& o) { o.hf_keys = true; });
}

class Text01Consistency : public ::testing::TestWithParam<std::string> {};

TEST_P(Text01Consistency, PrefillEqualsDecodeAndChunked) {
  auto model = load_model(tiny_dir("minimax_text01", GetParam(), 11));
  ASSERT_EQ(model->config().count_layers(LayerKind::kLightning), 6);
  const auto ids = random_ids(70, int(model->config().vocab_size), 3);
  const Buffer full = prefill_logits(*model, ids, 0);
  for (int chunk : {1, 7, 16, 33}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EXPECT_ALLCLOSE(prefill_logits(*model, ids, chunk).t(), full.t(), kPathTol);
  }
}

// The blockwise lightning prefill at any block length == the token-by-token recurrence.
TEST_P(Text01Consistency, LightningBlockOnlyChangesRounding) {
  const std::string dir = tiny_dir("minimax_text01", GetParam(), 12);
  const auto ids = random_ids(70, 512, 4);
  LoadOptions lo;
  lo.lightning_block = 1;
  const Buffer ref = prefill_logits(*load_model(dir, nullptr, lo), ids, 0);
  for (int block : {5, 16, 64, 256}) {
    SCOPED_TRACE("block " + std::to_string(block));
    lo.lightning_block = block;
    EXPECT_ALLCLOSE(prefill_logits(*load_model(dir, nullptr, lo), ids, 0).t(), ref.t(), kPathTol);
  }
}

TEST_P(Text01Consistency, FastOpsMatchReferenceOps) {
  LoadOptions lo;
  lo.lightning_block = 8;
  auto model = load_model(tiny_dir("minimax_text01", GetParam(), 11), nullptr, lo);
  const auto ids = random_ids(40, int(model->config().vocab_size), 9);
  const Buffer fast = prefill_logits(*model, ids, 0);
  ops::set_backend(ops::Backend::kRef);
  const Buffer ref = prefill_logits(*model, ids, 0);
  ops::set_backend(ops::Backend::kCpu);
  EXPECT_ALLCLOSE(fast.t(), ref.t(), kPathTol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Text01Consistency, ::testing::Values("f32", "bf16"));

// Checkpoints every 16 tokens: a forward crossing a boundary is split there, the state is
// saved, and rollback(p) restores the newest checkpoint <= p exactly.
TEST(Text01Memory, RollbackResumesFromCheckpointExactly) {
  auto model = load_model(tiny_dir("minimax_text01", "f32", 13));
  const auto ids = random_ids(60, 512, 21);
  KvCache cold = model->make_cache(60, 16, 8);
  const Buffer want = feed(*model, cold, ids, 0, 60);
  EXPECT_EQ(cold.checkpoint_positions(), (std::vector<int64_t>{16, 32, 48}));
  EXPECT_EQ(cold.checkpoint_bytes(), 3 * cold.state_bytes());

  KvCache kv = model->make_cache(60, 16, 8);
  feed(*model, kv, ids, 0, 45);
  EXPECT_EQ(kv.rollback(40), 32);  // newest checkpoint <= 40
  EXPECT_EQ(kv.n_past(), 32);
  const Buffer got = feed(*model, kv, ids, 32, 60);
  EXPECT_ALLCLOSE(got.t(), want.t().rows_range(32, 60), kPathTol);

  EXPECT_EQ(kv.rollback(10), 0);  // before the first checkpoint: back to the empty state
  EXPECT_ALLCLOSE(feed(*model, kv, ids, 0, 60).t(), want.t(), kPathTol);
}

// A prefix hit: sequence B shares A's first 32 tokens; resuming B from A's checkpoint at 32
// equals running B cold.
TEST(Text01Memory, PrefixResumeEqualsCold) {
  auto model = load_model(tiny_dir("minimax_text01", "f32", 14));
  auto a = random_ids(50, 512, 31);
  auto b = a;
  for (size_t i = 32; i < b.size(); ++i) b[i] = int32_t((b[i] + 7) % 512);
  KvCache kv = model->make_cache(50, 16, 8);
  feed(*model, kv, a, 0, 50);
  ASSERT_EQ(kv.rollback(32), 32);
  const Buffer resumed = feed(*model, kv, b, 32, 50);
  KvCache cold = model->make_cache(50, 16, 8);
  const Buffer want = feed(*model, cold, b, 0, 50);
  EXPECT_ALLCLOSE(resumed.t(), want.t().rows_range(32, 50), kPathTol);
}

TEST(Text01Memory, StateMovesOnlyForwardWithoutRollback) {
  auto model = load_model(tiny_dir("minimax_text01", "f32", 13));
  KvCache kv = model->make_cache(20, 16, 8);
  feed(*model, kv, random_ids(10, 512, 1), 0, 10);
  EXPECT_DEATH_IF_SUPPORTED(kv.set_n_past(5), "rollback");
}

TEST(Text01Memory, StateSizeIsIndependentOfContext) {
  auto model = load_model(tiny_dir("minimax_text01", "f32", 13));
  const ModelConfig& c = model->config();
  KvCache small = model->make_cache(64), big = model->make_cache(4096);
  EXPECT_EQ(small.state_bytes(), big.state_bytes());
  EXPECT_EQ(small.state_bytes(), size_t(c.count_layers(LayerKind::kLightning)) * c.n_heads *
                                     c.head_dim * c.head_dim * 4);
  EXPECT_EQ(big.kv_bytes(), size_t(c.count_layers(LayerKind::kSoftmax)) * 2 * 4096 * c.n_kv_heads *
                                c.head_dim * 4);
}

TEST(Text01Models, M1AndHfSpellingGiveTheSameLogits) {
  const auto ids = random_ids(30, 512, 5);
  const Buffer orig = prefill_logits(*load_model(tiny_dir("minimax_text01", "f32", 15)), ids, 0);
  const Buffer hf = prefill_logits(*load_model(tiny_dir("minimax_text01", "f32", 15, true)), ids, 0);
  const Buffer m1 = prefill_logits(*load_model(tiny_dir("minimax_m1", "f32", 15)), ids, 0);
  EXPECT_ALLCLOSE(hf.t(), orig.t(), testing::tol::kF32);
  EXPECT_ALLCLOSE(m1.t(), orig.t(), testing::tol::kF32);
}

// ---- config.json parsing ----

nlohmann::json real_config() {
  std::ifstream f(std::string(MMX_SOURCE_DIR) + "/tests/data/minimax_text01_config/config.json");
  return nlohmann::json::parse(f);
}

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_config(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Text01Config, RealConfigLayersAndParameters) {
  const ModelConfig c = parse_config(real_config().dump(), "config.json");
  EXPECT_EQ(c.family, Family::kMiniMaxText01);
  EXPECT_EQ(c.count_layers(LayerKind::kLightning), 70);
  EXPECT_EQ(c.count_layers(LayerKind::kSoftmax), 10);
  for (int il = 0; il < 80; ++il)
    EXPECT_EQ(c.layer_kinds[il] == LayerKind::kSoftmax, (il + 1) % 8 == 0) << il;
  EXPECT_TRUE(c.postnorm);
  EXPECT_FLOAT_EQ(c.res_lightning.alpha, 3.5565588f);
  EXPECT_EQ(c.router, RouterKind::kSoftmax);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
  // Published: ~456 B total, 45.9 B activated per token (MiniMax-01 report).
  const ParamCounts p = count_params(c);
  EXPECT_NEAR(double(p.total()) / 1e9, 456.0, 1.0);
  EXPECT_NEAR(double(p.active_no_embed()) / 1e9, 45.9, 0.1);
}

TEST(Text01Config, HfSpellingNormalizesToTheSameConfig) {
  nlohmann::json j = real_config(), h = real_config();
  h["architectures"] = {"MiniMaxForCausalLM"};
  h.erase("attn_type_list");
  h.erase("postnorm");
  h["layer_types"] = nlohmann::json::array();
  for (int il = 0; il < 80; ++il) h["layer_types"].push_back((il + 1) % 8 ? "linear_attention" : "full_attention");
  for (const char* k : {"full_attention", "linear_attention", "mlp"}) {
    const std::string hk = k == std::string("full_attention") ? "full_attn" : k == std::string("mlp") ? "mlp" : "linear_attn";
    h[hk + "_alpha_factor"] = h["layernorm_" + std::string(k) + "_alpha"];
    h[hk + "_beta_factor"] = h["layernorm_" + std::string(k) + "_beta"];
    h.erase("layernorm_" + std::string(k) + "_alpha");
    h.erase("layernorm_" + std::string(k) + "_beta");
  }
  const ModelConfig a = parse_config(j.dump(), "a"), b = parse_config(h.dump(), "b");
  EXPECT_EQ(a.layer_kinds, b.layer_kinds);
  EXPECT_EQ(a.postnorm, b.postnorm);
  EXPECT_EQ(a.res_softmax.alpha, b.res_softmax.alpha);
  EXPECT_EQ(a.res_lightning.alpha, b.res_lightning.alpha);
  EXPECT_EQ(a.res_mlp.beta, b.res_mlp.beta);
}

TEST(Text01Config, BadValuesAreRefusedWithClearErrors) {
  auto j = real_config();
  j["attn_type_list"][3] = 2;
  EXPECT_NE(parse_error(j).find("attn_type_list[3]"), std::string::npos);
  j = real_config();
  j["attn_type_list"].erase(0);
  EXPECT_NE(parse_error(j).find("one per layer"), std::string::npos);
  j = real_config();
  j.erase("attn_type_list");
  EXPECT_NE(parse_error(j).find("layer pattern"), std::string::npos);
  j = real_config();
  j["mlp_alpha_factor"] = 2.0;
  EXPECT_NE(parse_error(j).find("disagree"), std::string::npos);
  j = real_config();
  j["shared_intermediate_size"] = 1024;
  EXPECT_NE(parse_error(j).find("shared expert"), std::string::npos);
  j = real_config();
  j["shared_intermediate_size"] = {0};  // a Text-01 copy spells it as a list
  EXPECT_EQ(parse_error(j), "");
  j = real_config();
  j["num_attention_heads"] = 48;
  EXPECT_NE(parse_error(j).find("power of two"), std::string::npos);
  j = real_config();
  j["quantization_config"] = {{"quant_method", "fp8"}};
  EXPECT_NE(parse_error(j).find("quantization_config"), std::string::npos);
}

}  // namespace
}  // namespace mmx
