// MiniMax-M3 consistency tests on fresh seeded tiny checkpoints (MSA block 4, top-3, so an
// 80-token context has 20 blocks and sparsity matters):
//   prefill == token-by-token decode == chunked prefill; multi-query decode (1 + 7 drafts)
//   == sequential decode; fast ops == fp64 ops; context <= K·B: MSA == dense attention, and
//   beyond it the two differ (sparsity is real); config and MXFP8 errors are clear.
// The numerics against the independent float64 reference live in m3_reference_check.py.
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
#include "model/msa_stats.h"
#include "tiny/tiny.h"
#include "ops/ops.h"
#include "testing/allclose.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

// Same weights, fp32 on both sides; paths differ in summation order only. Logits are O(1..10);
// measured differences ~1e-6, so 1e-4 leaves ~100x headroom. (A different block selection moves
// logits by >1e-2: see SparseDiffersFromDenseBeyondKB.)
constexpr testing::Tol kPathTol{1e-4, 1e-4, 1e-10};

using testing::feed;
using testing::random_ids;

std::string tiny_dir(const std::string& dtype, uint64_t seed) { return testing::tiny_dir("minimax_m3", dtype, seed); }

// A copy of `src` whose config.json is edited by `edit` (tensors are hard-linked).
std::string edited_copy(const std::string& src, const std::string& tag,
                        const std::function<void(nlohmann::json&)>& edit) {
  const fs::path d = fs::temp_directory_path() / (testing::tiny_prefix() + "edit_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "config.json") fs::create_hard_link(e.path(), d / e.path().filename());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(src) / "config.json"));
  edit(j);
  std::ofstream(d / "config.json") << j.dump(2);
  return d.string();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::abs(a.f32()[i] - b.f32()[i])));
  return m;
}

class M3Consistency : public ::testing::TestWithParam<std::string> {};

TEST_P(M3Consistency, PrefillEqualsDecodeAndChunked) {
  auto model = load_model(tiny_dir(GetParam(), 11));
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.count_layers(LayerKind::kSparse), 3);
  const auto ids = random_ids(70, int(c.vocab_size), 3);
  const Buffer full = prefill_logits(*model, ids, 0);
  for (int chunk : {1, 5, 16}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EXPECT_ALLCLOSE(prefill_logits(*model, ids, chunk).t(), full.t(), kPathTol);
  }
}

// Speculative verification shape: 1 main + 7 draft tokens in one forward, each query with its
// own position and its own block selection == the same 8 tokens decoded one at a time.
TEST_P(M3Consistency, MultiQueryDecodeEqualsSequentialDecode) {
  auto model = load_model(tiny_dir(GetParam(), 12));
  const auto ids = random_ids(56, 512, 4);
  KvCache a = model->make_cache(56), b = model->make_cache(56);
  feed(*model, a, ids, 0, 48);
  feed(*model, b, ids, 0, 48);
  const Buffer multi = feed(*model, a, ids, 48, 56);
  for (int64_t t = 48; t < 56; ++t) {
    const Buffer one = feed(*model, b, ids, t, t + 1);
    EXPECT_ALLCLOSE(one.t(), multi.t().rows_range(t - 48, t - 47), kPathTol) << "token " << t;
  }
}

TEST_P(M3Consistency, FastOpsMatchReferenceOps) {
  auto model = load_model(tiny_dir(GetParam(), 11));
  const auto ids = random_ids(40, 512, 9);
  const Buffer fast = prefill_logits(*model, ids, 0);
  ops::set_backend(ops::Backend::kRef);
  const Buffer ref = prefill_logits(*model, ids, 0);
  ops::set_backend(ops::Backend::kCpu);
  EXPECT_ALLCLOSE(fast.t(), ref.t(), kPathTol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, M3Consistency, ::testing::Values("f32", "bf16", "mxfp8"));

std::string dense_copy(const std::string& src) {
  return edited_copy(src, "dense", [](nlohmann::json& j) {
    for (auto& f : j["text_config"]["sparse_attention_config"]["sparse_attention_freq"]) f = 0;
  });
}

// With context <= K·B (= 12 tokens here) every visible block is selected: exactly dense.
TEST(M3Msa, ShortContextEqualsDenseAttention) {
  const std::string dir = tiny_dir("f32", 21);
  auto sparse = load_model(dir);
  auto dense = load_model(dense_copy(dir));
  ASSERT_EQ(dense->config().count_layers(LayerKind::kSparse), 0);
  const int kb = sparse->config().msa.topk * sparse->config().msa.block;
  const auto ids = random_ids(kb, 512, 5);
  EXPECT_ALLCLOSE(prefill_logits(*sparse, ids, 0).t(), prefill_logits(*dense, ids, 0).t(), kPathTol);
}

// Beyond K·B the selection drops blocks, and the logits move: sparsity is real in these tests.
TEST(M3Msa, SparseDiffersFromDenseBeyondKB) {
  const std::string dir = tiny_dir("f32", 21);
  const auto ids = random_ids(80, 512, 5);
  const Buffer s = prefill_logits(*load_model(dir), ids, 0);
  const Buffer d = prefill_logits(*load_model(dense_copy(dir)), ids, 0);
  EXPECT_LT(max_abs_diff(s.t().rows_range(0, 12), d.t().rows_range(0, 12)), 1e-4);
  EXPECT_GT(max_abs_diff(s.t().rows_range(40, 80), d.t().rows_range(40, 80)), 1e-2);
}

// transformers' flattened spelling (index_* keys, layer_types, mlp_layer_types) is the same model.
TEST(M3Config, FlattenedKeysGiveTheSameLogits) {
  const std::string dir = tiny_dir("f32", 23);
  const std::string flat = edited_copy(dir, "flat", [](nlohmann::json& j) {
    nlohmann::json& t = j["text_config"];
    const nlohmann::json sac = t["sparse_attention_config"];
    t.erase("sparse_attention_config");
    t["index_n_heads"] = sac["sparse_num_index_heads"];
    t["index_head_dim"] = sac["sparse_index_dim"];
    t["index_block_size"] = sac["sparse_block_size"];
    t["index_topk_blocks"] = sac["sparse_topk_blocks"];
    t["index_local_blocks"] = 1;
    t["layer_types"] = nlohmann::json::array();
    for (const auto& f : sac["sparse_attention_freq"]) t["layer_types"].push_back(f == 1 ? "minimax_m3_sparse" : "full_attention");
    t["mlp_layer_types"] = nlohmann::json::array();
    for (const auto& f : t["moe_layer_freq"]) t["mlp_layer_types"].push_back(f == 1 ? "sparse" : "dense");
    t.erase("moe_layer_freq");
  });
  auto a = load_model(dir), b = load_model(flat);
  EXPECT_EQ(a->config().layer_kinds, b->config().layer_kinds);
  EXPECT_EQ(a->config().moe_layers, b->config().moe_layers);
  EXPECT_EQ(b->config().msa.topk, a->config().msa.topk);
  EXPECT_EQ(b->config().warnings.size(), a->config().warnings.size());  // only the vision-tensor note
  const auto ids = random_ids(40, 512, 8);
  EXPECT_ALLCLOSE(prefill_logits(*b, ids, 0).t(), prefill_logits(*a, ids, 0).t(), testing::tol::kF32);
}

TEST(M3Msa, StatsAreCollectedOnlyWhenEnabled) {
  auto model = load_model(tiny_dir("f32", 11));
  const auto ids = random_ids(40, 512, 7);
  MsaStats stats;
  prefill_logits(*model, ids, 0);
  EXPECT_TRUE(stats.layers().empty());
  model->set_msa_stats(&stats);
  prefill_logits(*model, ids, 0);
  model->set_msa_stats(nullptr);
  prefill_logits(*model, ids, 0);  // no longer collected
  ASSERT_EQ(stats.layers().size(), 3u);
  for (const auto& [il, l] : stats.layers()) {
    EXPECT_EQ(l.n_queries, 40);
    for (size_t g = 0; g < l.recall_sum.size(); ++g) {
      EXPECT_GT(l.recall_sum[g] / 40, 0.2);
      EXPECT_LE(l.recall_sum[g] / 40, 1.0);
      EXPECT_LE(l.coverage_sum[g] / 40, 1.0 + 1e-6);
    }
  }
}

std::string load_error(const std::string& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(M3Errors, ConfigRefusalsNameTheKey) {
  const std::string dir = tiny_dir("f32", 11);
  EXPECT_NE(load_error(edited_copy(dir, "e1", [](nlohmann::json& j) {
              j["text_config"]["sparse_attention_config"]["sparse_num_index_heads"] = 1;
            })).find("sparse_num_index_heads"), std::string::npos);
  EXPECT_NE(load_error(edited_copy(dir, "e2", [](nlohmann::json& j) {
              j["text_config"]["sparse_attention_config"]["sparse_local_block"] = 0;
            })).find("sparse_local_block"), std::string::npos);
  EXPECT_NE(load_error(edited_copy(dir, "e3", [](nlohmann::json& j) {
              j["text_config"]["qk_norm_type"] = "per_layer";
            })).find("per_head"), std::string::npos);
  EXPECT_NE(load_error(edited_copy(dir, "e4", [](nlohmann::json& j) { j.erase("text_config"); }))
                .find("text_config"), std::string::npos);
  EXPECT_NE(load_error(edited_copy(dir, "e5", [](nlohmann::json& j) {
              j["text_config"]["sparse_attention_config"]["sparse_disable_index_value"][2] = 0;
            })).find("index-value"), std::string::npos);
}

}  // namespace
}  // namespace mmx
