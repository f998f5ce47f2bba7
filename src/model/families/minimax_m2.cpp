// MiniMax-M2 family (M2, M2.1, M2.5, M2.7): pre-norm decoder, GQA softmax attention with
// whole-projection QK-norm and partial NeoX RoPE, sigmoid-routed MoE (spec §4.4):
//   x  = embed(tokens)
//   per layer: h = x + Attn(RMSNorm_in(x));  x = h + MoE(RMSNorm_post(h))
//   logits = lm_head(RMSNorm_final(x))
// This file composes layers and ops; it holds no kernels and no per-device branches.
//
// The file holds the family's two halves: its config.json keys (normalized into ModelConfig once)
// and its forward. Config keys:
// MiniMaxM2ForCausalLM keys past the common ones (spec §4.1): whole-projection QK-norm, all
// layers softmax, sigmoid router with selection bias, fp8 block quantization, MTP declarations.
#include <cstring>

#include "model/config_parse.h"
#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/attention_softmax.h"
#include "model/layers/lm_head.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

// ---- config.json ----
namespace mmx::config_parse {

namespace {
// Keys with no effect on inference math (training knobs, bookkeeping, vestigial Text-01 keys).
const std::set<std::string> kIgnoredKeys = {
    "model_type", "auto_map", "torch_dtype", "dtype", "transformers_version", "use_cache",
    "router_aux_loss_coef", "router_jitter_noise", "output_router_logits", "initializer_range",
    "attention_dropout", "pad_token_id", "max_model_len", "layernorm_full_attention_beta",
    "layernorm_linear_attention_beta", "layernorm_mlp_beta", "shared_moe_mode", "swa_rope_theta",
    "use_mtp", "mtp_transformer_layers", "num_mtp_modules", "mlp_intermediate_size",
    "_name_or_path", "name_or_path", "use_grouped_topk",
};
}  // namespace

void parse_m2(const json& j, const Reader& r, ModelConfig& c, std::set<std::string>& used) {
  const std::string& where = r.where();
  used.insert({"use_qk_norm", "qk_norm_type", "attn_type_list", "scoring_func", "use_routing_bias",
               "routed_scaling_factor", "shared_intermediate_size", "num_expert_group",
               "topk_group", "quantization_config"});
  c.use_qk_norm = r.boolean_or("use_qk_norm", true);
  const std::string qk = r.string_or("qk_norm_type", "per_layer");
  if (c.use_qk_norm && qk != "per_layer")
    fail("{}: qk_norm_type \"{}\" is not supported for MiniMaxM2ForCausalLM (expected per_layer: one "
         "RMS statistic over the whole q/k projection, spec §4.4)", where, qk);

  c.layer_kinds.assign(c.n_layers, LayerKind::kSoftmax);
  if (r.has("attn_type_list")) {
    const json& a = j["attn_type_list"];
    if (!a.is_array() || int(a.size()) != c.n_layers)
      fail("{}: attn_type_list must list {} entries (one per layer)", where, c.n_layers);
    for (int il = 0; il < c.n_layers; ++il)
      if (a[il] != 1)
        fail("{}: attn_type_list[{}] = {}; MiniMax-M2 layers are all softmax attention (1). Lightning "
             "layers (0) belong to MiniMax-Text-01/M1", where, il, a[il].dump());
  }

  parse_moe_shape(r, c, used);
  c.router = RouterKind::kSigmoidBias;
  const std::string scoring = r.string_or("scoring_func", "sigmoid");
  if (scoring != "sigmoid")
    fail("{}: scoring_func \"{}\" is not supported for MiniMax-M2 (expected sigmoid)", where, scoring);
  c.use_routing_bias = r.boolean_or("use_routing_bias", true);
  c.routed_scaling_factor = float(r.number_or("routed_scaling_factor", 1.0));
  if (r.integer_or("shared_intermediate_size", 0, 0, 1 << 20) != 0)
    fail("{}: shared_intermediate_size != 0 (a shared expert) is not supported for MiniMax-M2", where);
  if (r.integer_or("num_expert_group", 1, 1, 65536) > 1 || r.integer_or("topk_group", 1, 1, 65536) > 1)
    fail("{}: group-limited routing (num_expert_group/topk_group > 1) is not supported", where);

  if (j.contains("quantization_config") && !j["quantization_config"].is_null())
    parse_fp8(j["quantization_config"], where, c);
  c.n_mtp_modules = r.boolean_or("use_mtp", false) ? int(r.integer_or("num_mtp_modules", 0, 0, 64)) : 0;
  warn_unknown_keys(j, used, kIgnoredKeys, c, where);
}

// The family's config.json entry (registry.cpp's table): everything past "architectures".
void parse_config_m2(const json& j, const std::string& where, ModelConfig& c) {
  const Reader r(j, where);
  std::set<std::string> used = {"architectures"};
  parse_common(j, r, c, used);
  parse_m2(j, r, c, used);
}

}  // namespace mmx::config_parse

// ---- forward ----
namespace mmx {

namespace {

enum Slot { kX = 0, kH, kBranch };

class MiniMaxM2 final : public RowwiseModel {
 public:
  MiniMaxM2(ModelConfig cfg, ModelWeights w) : cfg_(std::move(cfg)), w_(std::move(w)) {
    attn_ = layers::attention_params(cfg_);
    moe_ = layers::moe_params(cfg_);
  }

  const ModelConfig& config() const override { return cfg_; }
  void update_weights(std::span<const TensorValues> u) override { mmx::update_weights(w_, cfg_, u); }
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
  // The one forward path: a single sequence is the one-chunk case. Row-wise ops over all rows;
  // attention per chunk against its own cache. logits: every row (all_logits, one chunk only)
  // or the last row of each chunk.
  void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits, Tensor* hidden) override {
    const int64_t n = tokens.dim(0), d = cfg_.d_model;
    Tensor x = s_.f32(kX, {n, d});       // [n, d_model] residual stream
    Tensor h = s_.f32(kH, {n, d});       // [n, d_model] normed branch input
    Tensor br = s_.f32(kBranch, {n, d}); // [n, d_model] branch output
    ops::embedding(w_.embed, tokens, x);
    trace(x, "embed");
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& lw = w_.layers[il];
      ops::rms_norm(x, lw.attn_norm, cfg_.norm_eps, h);
      trace(h, "attn_norm", il);
      {
        PhaseScope t(phases_, Phase::kAttention);
        layers::attention_softmax(h, lw.attn, attn_, rows, il, s_, br);
      }
      trace(br, "attn_out", il);
      ops::add(x, br);
      ops::rms_norm(x, lw.ffn_norm, cfg_.norm_eps, h);
      trace(h, "ffn_norm", il);
      layers::moe(h, lw.moe, moe_, il, s_, br);
      trace(br, "moe_out", il);
      ops::add(x, br);
      trace(x, "layer_out", il);
    }
    if (logits == nullptr) return;

    PhaseScope t(phases_, Phase::kLmHead);
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits, hidden);
  }

  ModelConfig cfg_;
  ModelWeights w_;
  layers::AttentionParams attn_;
  layers::MoeParams moe_;
  Scratch s_;
  PhaseTimes* phases_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_minimax_m2(ModelConfig cfg, ModelWeights weights) {
  return std::make_unique<MiniMaxM2>(std::move(cfg), std::move(weights));
}

}  // namespace mmx
