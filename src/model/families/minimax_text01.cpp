// MiniMax-Text-01 and MiniMax-M1 (spec §3): lightning + softmax hybrid, post-norm α/β residual,
// softmax top-2 MoE. Per layer, with n1/n2 the normed sub-layer inputs:
//   a = Attn_L(n1)          lightning (state per sequence) or softmax GQA (KV cache)
//   x = α·n1 + β·a          (postnorm: the normed value is carried; else α·x + β·a)
//   x = α·n2 + β·MoE(n2)
//   logits = lm_head(RMSNorm_final(x))
// Lightning attention runs per sequence over its own state; everything else row-wise over the
// fused batch. Forwards are split at lightning-state checkpoints by RowwiseModel
// (families/rowwise_model.h). This file composes layers and ops only.
//
// The file holds the family's two halves: its config.json keys (normalized into ModelConfig once)
// and its forward. Config keys:
// MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM keys past the common ones (spec §3.1): the
// lightning/softmax layer pattern, post-norm α/β residual scales, softmax top-k router, lightning
// block size. Both spellings are accepted and normalized to the same ModelConfig:
//   original:      attn_type_list [0|1 ...], layernorm_{full_attention,linear_attention,mlp}_{alpha,beta}
//   transformers:  layer_types ["linear_attention"|"full_attention" ...],
//                  {full_attn,linear_attn,mlp}_{alpha,beta}_factor  (MiniMaxAI/MiniMax-Text-01-hf)
#include "model/config_parse.h"
#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/attention_lightning.h"
#include "model/layers/attention_softmax.h"
#include "model/layers/lm_head.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

// ---- config.json ----
namespace mmx::config_parse {

namespace {

const std::set<std::string> kIgnoredKeys = {
    "model_type", "auto_map", "torch_dtype", "dtype", "transformers_version", "use_cache",
    "router_aux_loss_coef", "router_jitter_noise", "output_router_logits", "initializer_range",
    "attention_dropout", "pad_token_id", "shared_moe_mode", "_name_or_path", "name_or_path",
    "full_attention_interval",
};

void parse_layer_kinds(const json& j, const Reader& r, ModelConfig& c) {
  const std::string& where = r.where();
  c.layer_kinds.assign(c.n_layers, LayerKind::kSoftmax);
  const bool has_list = r.has("attn_type_list"), has_types = r.has("layer_types");
  if (!has_list && !has_types)
    fail("{}: neither \"attn_type_list\" nor \"layer_types\" is set: the lightning/softmax layer "
         "pattern of MiniMax-Text-01/M1 must be given (e.g. attn_type_list with 1 at every 8th layer)",
         where);
  if (has_list) {
    const json& a = j["attn_type_list"];
    if (!a.is_array() || int(a.size()) != c.n_layers)
      fail("{}: attn_type_list must list {} entries (one per layer), got {}", where, c.n_layers,
           a.is_array() ? std::to_string(a.size()) : a.dump());
    for (int il = 0; il < c.n_layers; ++il) {
      if (a[il] == 0) c.layer_kinds[il] = LayerKind::kLightning;
      else if (a[il] != 1)
        fail("{}: attn_type_list[{}] = {}; expected 0 (lightning) or 1 (softmax)", where, il, a[il].dump());
    }
  }
  if (has_types) {
    const json& a = j["layer_types"];
    if (!a.is_array() || int(a.size()) != c.n_layers)
      fail("{}: layer_types must list {} entries (one per layer)", where, c.n_layers);
    for (int il = 0; il < c.n_layers; ++il) {
      LayerKind k;
      if (a[il] == "linear_attention") k = LayerKind::kLightning;
      else if (a[il] == "full_attention") k = LayerKind::kSoftmax;
      else
        fail("{}: layer_types[{}] = {}; expected \"linear_attention\" or \"full_attention\"", where, il,
             a[il].dump());
      if (has_list && k != c.layer_kinds[il])
        fail("{}: attn_type_list and layer_types disagree at layer {}", where, il);
      c.layer_kinds[il] = k;
    }
  }
}

// One α/β pair: the original key, or the -hf key, or 1.0 (the transformers default).
ResidualScale parse_scale(const Reader& r, const char* orig, const char* hf, std::set<std::string>& used) {
  ResidualScale s;
  const std::string oa = std::string(orig) + "_alpha", ob = std::string(orig) + "_beta";
  const std::string ha = std::string(hf) + "_alpha_factor", hb = std::string(hf) + "_beta_factor";
  used.insert({oa, ob, ha, hb});
  const double a_orig = r.number_or(oa.c_str(), NAN), a_hf = r.number_or(ha.c_str(), NAN);
  const double b_orig = r.number_or(ob.c_str(), NAN), b_hf = r.number_or(hb.c_str(), NAN);
  if ((!std::isnan(a_orig) && !std::isnan(a_hf) && a_orig != a_hf) ||
      (!std::isnan(b_orig) && !std::isnan(b_hf) && b_orig != b_hf))
    fail("{}: \"{}\"/\"{}\" and \"{}\"/\"{}\" are both set and disagree", r.where(), oa, ob, ha, hb);
  s.alpha = float(!std::isnan(a_orig) ? a_orig : !std::isnan(a_hf) ? a_hf : 1.0);
  s.beta = float(!std::isnan(b_orig) ? b_orig : !std::isnan(b_hf) ? b_hf : 1.0);
  if (!std::isfinite(s.alpha) || !std::isfinite(s.beta))
    fail("{}: residual scale {} must be finite", r.where(), orig);
  return s;
}

}  // namespace

void parse_text01(const json& j, const Reader& r, ModelConfig& c, std::set<std::string>& used) {
  const std::string& where = r.where();
  used.insert({"attn_type_list", "layer_types", "postnorm", "block", "block_size",
               "shared_intermediate_size", "quantization_config", "qk_norm_type", "use_qk_norm"});
  if (r.has("quantization_config"))
    fail("{}: quantization_config is set; quantized MiniMax-Text-01/M1 checkpoints are not supported "
         "(the released weights are bf16)", where);
  if (r.boolean_or("use_qk_norm", false))
    fail("{}: use_qk_norm = true, but MiniMax-Text-01/M1 attention has no QK-norm (spec §3.4)", where);
  c.use_qk_norm = false;
  parse_layer_kinds(j, r, c);
  if (c.count_layers(LayerKind::kLightning) > 0 && (c.n_heads & (c.n_heads - 1)) != 0)
    fail("{}: num_attention_heads = {} is not a power of two; the lightning decay slopes of such "
         "models differ between public implementations (spec §8) and are not supported", where,
         c.n_heads);

  // transformers' MiniMax (the -hf spelling) is always post-norm and has no key for it; the
  // original remote code reads `postnorm` (class default false; every release sets true).
  const bool hf = r.has("layer_types") || c.architecture == "MiniMaxForCausalLM";
  c.postnorm = r.boolean_or("postnorm", hf);
  c.res_softmax = parse_scale(r, "layernorm_full_attention", "full_attn", used);
  c.res_lightning = parse_scale(r, "layernorm_linear_attention", "linear_attn", used);
  c.res_mlp = parse_scale(r, "layernorm_mlp", "mlp", used);
  c.lightning_block = int(r.has("block") ? r.integer("block", 1, 1 << 16)
                                         : r.integer_or("block_size", 256, 1, 1 << 16));

  parse_moe_shape(r, c, used);
  c.router = RouterKind::kSoftmax;
  c.use_routing_bias = false;
  c.routed_scaling_factor = 1.0f;
  // shared_intermediate_size: int 0 (M1) or [0] (a Text-01 copy); a shared expert is not part of
  // the released models.
  if (r.has("shared_intermediate_size")) {
    json s = j["shared_intermediate_size"];
    if (s.is_array() && s.size() == 1) s = s[0];
    if (!s.is_number_integer() || s.get<int64_t>() != 0)
      fail("{}: shared_intermediate_size = {}; a shared expert is not supported for "
           "MiniMax-Text-01/M1 (the released models have 0)", where, j["shared_intermediate_size"].dump());
  }
  // spec §3.1: the released config has eos null; generation stops at 200020 ("[e~[").
  if (c.eos_token_ids.empty() && c.vocab_size > 200020) c.eos_token_ids.push_back(200020);
  warn_unknown_keys(j, used, kIgnoredKeys, c, where);
}

// The family's config.json entry (registry.cpp's table): everything past "architectures".
void parse_config_text01(const json& j, const std::string& where, ModelConfig& c) {
  const Reader r(j, where);
  std::set<std::string> used = {"architectures"};
  parse_common(j, r, c, used);
  parse_text01(j, r, c, used);
}

}  // namespace mmx::config_parse

// ---- forward ----
namespace mmx {

namespace {

enum Slot { kX = 0, kH, kBranch };

class MiniMaxText01 final : public RowwiseModel {
 public:
  MiniMaxText01(ModelConfig cfg, ModelWeights w) : cfg_(std::move(cfg)), w_(std::move(w)) {
    attn_ = layers::attention_params(cfg_);  // no QK-norm: the config refuses it for Text-01
    lin_.n_heads = cfg_.n_heads;
    lin_.head_dim = cfg_.head_dim;
    lin_.block = cfg_.lightning_block;
    lin_.norm_eps = cfg_.lightning_norm_eps;
    moe_ = layers::moe_params(cfg_);  // softmax router
    for (int il = 0; il < cfg_.n_layers; ++il)
      slopes_.push_back(cfg_.layer_kinds[il] == LayerKind::kLightning
                            ? layers::lightning_slopes(cfg_.n_heads, il, cfg_.n_layers)
                            : Buffer());
  }

  const ModelConfig& config() const override { return cfg_; }
  void update_weights(std::span<const TensorValues> u) override { mmx::update_weights(w_, cfg_, u); }
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
  void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits, Tensor* hidden) override {
    const int64_t n = tokens.dim(0), d = cfg_.d_model;
    Tensor x = s_.f32(kX, {n, d});        // [n, d_model] residual stream
    Tensor h = s_.f32(kH, {n, d});        // [n, d_model] normed sub-layer input
    Tensor br = s_.f32(kBranch, {n, d});  // [n, d_model] branch output
    ops::embedding(w_.embed, tokens, x);
    trace(x, "embed");
    for (int il = 0; il < cfg_.n_layers; ++il) {
      const LayerWeights& lw = w_.layers[il];
      ops::rms_norm(x, lw.attn_norm, cfg_.norm_eps, h);
      trace(h, "attn_norm", il);
      const bool lightning = cfg_.layer_kinds[il] == LayerKind::kLightning;
      {
        PhaseScope t(phases_, Phase::kAttention);
        if (lightning) layers::attention_lightning(h, lw.lin, slopes_[il], lin_, rows, il, s_, br);
        else layers::attention_softmax(h, lw.attn, attn_, rows, il, s_, br);
      }
      trace(br, "attn_out", il);
      residual(x, h, br, lightning ? cfg_.res_lightning : cfg_.res_softmax);
      ops::rms_norm(x, lw.ffn_norm, cfg_.norm_eps, h);
      trace(h, "ffn_norm", il);
      layers::moe(h, lw.moe, moe_, il, s_, br);
      trace(br, "moe_out", il);
      residual(x, h, br, cfg_.res_mlp);
      trace(x, "layer_out", il);
    }
    if (logits == nullptr) return;

    PhaseScope t(phases_, Phase::kLmHead);
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits, hidden);
  }

  // x <- α·(postnorm ? normed : x) + β·branch. With postnorm the result is built in `normed`'s
  // buffer and the two views swap, so no copy is made.
  void residual(Tensor& x, Tensor& normed, const Tensor& branch, ResidualScale r) {
    if (cfg_.postnorm) {
      ops::scale_add(normed, r.alpha, branch, r.beta);
      std::swap(x, normed);
    } else {
      ops::scale_add(x, r.alpha, branch, r.beta);
    }
  }

  ModelConfig cfg_;
  ModelWeights w_;
  layers::AttentionParams attn_;
  layers::LightningParams lin_;
  layers::MoeParams moe_;
  std::vector<Buffer> slopes_;  // [n_layers] of [n_heads] F32 (empty for softmax layers)
  Scratch s_;
  PhaseTimes* phases_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_minimax_text01(ModelConfig cfg, ModelWeights weights) {
  return std::make_unique<MiniMaxText01>(std::move(cfg), std::move(weights));
}

}  // namespace mmx
