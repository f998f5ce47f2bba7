// The checkpoint schema (model/schema.h) against what is really written and loaded: for each
// family's tiny checkpoint, the schema lists exactly the tensors `make-tiny` writes (plus FP8 /
// MXFP8 scales and the VL wrapper's foreign parts), with the same shapes, and the loader loads
// them; tensor_name() agrees with the list; the M2 GGUF name map is a bijection in llama.cpp's
// file order.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "model/config.h"
#include "formats/safetensors.h"
#include "model/schema.h"
#include "model/weights.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

struct Case {
  const char* arch;
  const char* dtype;
};

class SchemaTest : public ::testing::TestWithParam<Case> {};

TEST_P(SchemaTest, ListsExactlyTheTinyCheckpointsTensors) {
  const Case c = GetParam();
  const std::string dir = testing::tiny_dir(c.arch, c.dtype, 3);
  const ModelConfig cfg = load_config(dir);
  const std::vector<TensorSpec> schema = checkpoint_schema(cfg);
  const TensorStore st = TensorStore::open(dir);

  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& s : schema) {
    EXPECT_TRUE(by_name.emplace(s.name, &s).second) << "twice in the schema: " << s.name;
    ASSERT_TRUE(st.has(s.name)) << c.arch << ": the schema lists " << s.name << ", not in the checkpoint";
    EXPECT_EQ(st.info(s.name).shape, s.shape) << s.name;
    EXPECT_EQ(tensor_name(cfg, s.role, s.layer, s.expert), s.name);
    EXPECT_EQ(s.decay, s.shape.size() == 2) << s.name;
  }
  for (const std::string& n : st.names()) {
    if (by_name.count(n) || is_foreign_tensor(cfg, n)) continue;
    const std::string suffix = "_scale_inv";
    const bool scale = n.size() > suffix.size() && n.ends_with(suffix);
    const std::string base = scale ? n.substr(0, n.size() - suffix.size()) : "";
    EXPECT_TRUE(scale && by_name.count(base) && by_name[base]->kind == TensorKind::kLinear)
        << c.arch << ": the checkpoint holds " << n << ", which the schema does not list";
  }
  // The loader reads the same list (it throws on any missing or misshapen tensor).
  EXPECT_NO_THROW((void)load_weights(dir, cfg));
}

INSTANTIATE_TEST_SUITE_P(Families, SchemaTest,
                         ::testing::Values(Case{"minimax_m2", "f32"}, Case{"minimax_m2", "fp8"},
                                           Case{"minimax_text01", "f32"}, Case{"minimax_m1", "bf16"},
                                           Case{"minimax_m3", "f32"}, Case{"minimax_m3", "mxfp8"}),
                         [](const auto& info) { return std::string(info.param.arch) + "_" + info.param.dtype; });

TEST(SchemaGguf, M2NameMapIsABijectionInLlamaCppOrder) {
  const ModelConfig cfg = load_config(testing::tiny_dir("minimax_m2", "f32", 3));
  const std::vector<TensorSpec> schema = checkpoint_schema(cfg);
  std::set<std::pair<std::string, int>> gguf;
  for (const TensorSpec& s : schema) {
    ASSERT_FALSE(s.gguf_name.empty()) << s.name << " has no GGUF name";
    EXPECT_TRUE(gguf.emplace(s.gguf_name, s.gguf_expert).second) << s.gguf_name << " / " << s.gguf_expert;
    EXPECT_EQ(s.gguf_expert, s.expert) << s.name;
  }
  // The plan covers every HF tensor exactly once, each GGUF tensor once.
  std::set<std::string> hf, names;
  size_t n_hf = 0;
  for (const GgufTensorPlan& p : gguf_tensor_plan(cfg)) {
    EXPECT_TRUE(names.insert(p.gguf).second) << p.gguf;
    EXPECT_EQ(p.stacked, p.hf.size() == size_t(cfg.n_experts) && p.layer >= 0) << p.gguf;
    for (const std::string& h : p.hf) hf.insert(h), ++n_hf;
  }
  EXPECT_EQ(n_hf, schema.size());
  EXPECT_EQ(hf.size(), schema.size());
  // llama.cpp's minimax-m2 file order: token_embd, per block attn_* / ffn_norm / router / bias /
  // stacked experts (gate, up, down), output_norm, output.
  const std::vector<std::string> blk0 = {
      "blk.0.attn_norm.weight",   "blk.0.attn_q.weight",      "blk.0.attn_k.weight",
      "blk.0.attn_v.weight",      "blk.0.attn_output.weight", "blk.0.attn_q_norm.weight",
      "blk.0.attn_k_norm.weight", "blk.0.ffn_norm.weight",    "blk.0.ffn_gate_inp.weight",
      "blk.0.exp_probs_b.bias",   "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
      "blk.0.ffn_down_exps.weight"};
  const std::vector<GgufTensorPlan> plan = gguf_tensor_plan(cfg);
  ASSERT_EQ(plan.size(), 3 + blk0.size() * size_t(cfg.n_layers));
  EXPECT_EQ(plan.front().gguf, "token_embd.weight");
  EXPECT_EQ(plan.front().hf, std::vector<std::string>{"model.embed_tokens.weight"});
  for (size_t i = 0; i < blk0.size(); ++i) EXPECT_EQ(plan[1 + i].gguf, blk0[i]);
  EXPECT_EQ(plan[1 + blk0.size() - 1].hf.back(), "model.layers.0.block_sparse_moe.experts.7.w2.weight");
  EXPECT_EQ(plan[plan.size() - 2].gguf, "output_norm.weight");
  EXPECT_EQ(plan.back().gguf, "output.weight");
  EXPECT_EQ(plan.back().hf, std::vector<std::string>{"lm_head.weight"});
  EXPECT_EQ(gguf_tensor_name(Family::kMiniMaxM2, TensorRole::kEmbed), "token_embd.weight");
}

TEST(SchemaNames, HfSpellingAndPrefix) {
  EXPECT_EQ(tensor_name(Family::kMiniMaxM2, TensorRole::kFfnNorm, 3), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(tensor_name(Family::kMiniMaxM3, TensorRole::kExpertUp, 1, 5),
            "language_model.model.layers.1.block_sparse_moe.experts.5.w3.weight");
  EXPECT_EQ(tensor_name(Family::kMiniMaxM3, TensorRole::kLmHead), "language_model.lm_head.weight");
  EXPECT_THROW((void)tensor_name(Family::kMiniMaxM2, TensorRole::kLinQkv, 0), Error);
  EXPECT_THROW((void)tensor_name(Family::kMiniMaxText01, TensorRole::kIndexQ, 0), Error);
}

}  // namespace
}  // namespace mmx
