// MiniMax-M3 text backbone (spec §5.4): pre-norm decoder with Gemma (1 + w) norms (folded at load),
//   x  = embed(tokens)
//   per layer: h = x + Attn_L(GRMS_in(x));  x = h + FFN_L(GRMS_post(h))
//   logits = lm_head(GRMS_final(x))
// Attn_L is dense GQA or MSA (layers/attention_msa) over the block-major paged KV; FFN_L is the
// dense SwiGLU-OAI MLP or the sigmoid-routed MoE ×routed_scaling_factor plus the shared expert.
// MTP modules are not loaded here (spec §5.8). This file composes layers and ops only.
//
// The file holds the family's two halves: its config.json keys (normalized into ModelConfig once)
// and its forward. Config keys:
// MiniMax-M3 text_config keys past the common ones (spec §5.1): Gemma norms, per-head QK-norm,
// the sparse-attention pattern and MSA shape, dense-MLP-then-MoE pattern, SwiGLU-OAI, shared
// expert, sigmoid router ×routed_scaling_factor, MXFP8 (spec §5.2). transformers' flattened
// spellings (index_n_heads, index_head_dim, index_block_size, index_topk_blocks, layer_types,
// mlp_layer_types) are accepted too.
#include <fmt/format.h>

#include "model/config_parse.h"
#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/attention_msa.h"
#include "model/layers/lm_head.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

// ---- config.json ----
namespace mmx::config_parse {

namespace {

const std::set<std::string> kIgnoredKeys = {
    "model_type", "torch_dtype", "dtype", "transformers_version", "use_cache", "initializer_range",
    "router_aux_loss_coef", "router_jitter_noise", "output_router_logits", "attention_dropout",
    "pad_token_id", "_name_or_path", "name_or_path", "num_mtp_modules", "num_nextn_predict_layers",
    "mtp_transformer_layers", "use_mtp", "auto_map", "swiglu_beta", "architectures",
};

// A per-layer 0/1 pattern (`key` in `obj`), or all `def` when absent.
std::vector<bool> layer_flags(const json& obj, const char* key, int n_layers, bool def,
                              const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return std::vector<bool>(size_t(n_layers), def);
  const json& a = obj[key];
  if (!a.is_array() || int(a.size()) != n_layers)
    fail("{}: \"{}\" must list {} entries (one per layer)", where, key, n_layers);
  std::vector<bool> v;
  for (int il = 0; il < n_layers; ++il) {
    if (a[il] != 0 && a[il] != 1) fail("{}: {}[{}] = {}; expected 0 or 1", where, key, il, a[il].dump());
    v.push_back(a[il] == 1);
  }
  return v;
}

// transformers' string spelling of the same pattern: entries equal to `yes` -> true.
std::vector<bool> layer_strings(const json& a, const char* key, const char* yes, const char* no,
                                int n_layers, const std::string& where) {
  if (!a.is_array() || int(a.size()) != n_layers)
    fail("{}: \"{}\" must list {} entries (one per layer)", where, key, n_layers);
  std::vector<bool> v;
  for (int il = 0; il < n_layers; ++il) {
    if (a[il] != yes && a[il] != no)
      fail("{}: {}[{}] = {}; expected \"{}\" or \"{}\"", where, key, il, a[il].dump(), yes, no);
    v.push_back(a[il] == yes);
  }
  return v;
}

void parse_mxfp8(const json& q, const std::string& where, ModelConfig& c) {
  if (!q.is_object()) fail("{}: \"quantization_config\" must be an object", where);
  const std::string method = q.value("quant_method", std::string("none"));
  if (method == "none") return;
  if (method != "mxfp8")
    fail("{}: quantization_config.quant_method \"{}\" is not supported for MiniMax-M3 (supported: "
         "mxfp8, E4M3 with one E8M0 scale per 1x32 inputs)", where, method);
  if (q.contains("weight_block_size") && q["weight_block_size"] != json::array({1, 32}))
    fail("{}: quantization_config.weight_block_size {} is not supported for mxfp8 (expected [1, 32])",
         where, q["weight_block_size"].dump());
  if (q.contains("activation_scheme") && q["activation_scheme"] != "dynamic")
    fail("{}: quantization_config.activation_scheme {} is not supported (only \"dynamic\")", where,
         q["activation_scheme"].dump());
  c.fp8.enabled = true;
  c.fp8.mx = true;
  c.fp8.block_out = 1;
  c.fp8.block_in = 32;
}

}  // namespace

void parse_m3(const json& j, const json& top, const Reader& r, ModelConfig& c, std::set<std::string>& used) {
  const std::string& where = r.where();
  used.insert({"use_gemma_norm", "use_qk_norm", "qk_norm_type", "attention_output_gate",
               "swiglu_alpha", "swiglu_limit", "dense_intermediate_size", "shared_intermediate_size",
               "n_shared_experts", "scoring_func", "use_routing_bias", "routed_scaling_factor",
               "moe_layer_freq", "mlp_layer_types", "layer_types", "sparse_attention_config",
               "index_n_heads", "index_head_dim", "index_block_size", "index_topk_blocks",
               "index_local_blocks", "quantization_config", "num_expert_group", "topk_group"});
  c.gemma_norm = r.boolean_or("use_gemma_norm", false);
  c.use_qk_norm = r.boolean_or("use_qk_norm", true);
  const std::string qk = r.string_or("qk_norm_type", "per_head");
  if (c.use_qk_norm && qk != "per_head")
    fail("{}: qk_norm_type \"{}\" is not supported for MiniMax-M3 (expected per_head, spec §5.5)", where, qk);
  c.qk_norm_per_head = c.use_qk_norm;
  if (r.boolean_or("attention_output_gate", false))
    fail("{}: attention_output_gate = true is not supported (the released M3 has none)", where);

  c.ffn_act = FfnAct::kSwigluOai;
  c.swiglu_alpha = float(r.number_or("swiglu_alpha", 1.702));
  c.swiglu_limit = float(r.number_or("swiglu_limit", 7.0));
  if (!(c.swiglu_limit > 0) || !(c.swiglu_alpha > 0))
    fail("{}: swiglu_alpha and swiglu_limit must be > 0", where);

  // Sparse attention: nested sparse_attention_config, or transformers' flattened keys.
  c.layer_kinds.assign(c.n_layers, LayerKind::kSoftmax);
  const json sac = j.contains("sparse_attention_config") && j["sparse_attention_config"].is_object()
                       ? j["sparse_attention_config"] : json::object();
  const Reader sr(sac, where + " sparse_attention_config");
  std::vector<bool> sparse;
  if (sr.has("sparse_attention_freq")) {
    sparse = layer_flags(sac, "sparse_attention_freq", c.n_layers, false, where);
  } else if (r.has("layer_types")) {
    sparse = layer_strings(j["layer_types"], "layer_types", "minimax_m3_sparse", "full_attention",
                           c.n_layers, where);
  } else {
    sparse.assign(size_t(c.n_layers), false);
  }
  const bool use_sparse = sr.boolean_or("use_sparse_attention", true);
  for (int il = 0; il < c.n_layers; ++il)
    if (sparse[il] && use_sparse) c.layer_kinds[il] = LayerKind::kSparse;
  if (c.count_layers(LayerKind::kSparse) > 0) {
    c.msa.index_heads = int(sr.has("sparse_num_index_heads") ? sr.integer("sparse_num_index_heads", 1, 4096)
                                                             : r.integer("index_n_heads", 1, 4096));
    c.msa.index_dim = int(sr.has("sparse_index_dim") ? sr.integer("sparse_index_dim", 2, 4096)
                                                     : r.integer("index_head_dim", 2, 4096));
    c.msa.topk = int(sr.has("sparse_topk_blocks") ? sr.integer("sparse_topk_blocks", 1, 65536)
                                                  : r.integer("index_topk_blocks", 1, 65536));
    c.msa.block = int(sr.has("sparse_block_size") ? sr.integer("sparse_block_size", 1, 65536)
                                                  : r.integer("index_block_size", 1, 65536));
    if (c.msa.index_heads != c.n_kv_heads)
      fail("{}: sparse_num_index_heads ({}) must equal num_key_value_heads ({}): MSA selects blocks "
           "per GQA group (spec §5.6)", where, c.msa.index_heads, c.n_kv_heads);
    if (c.msa.index_dim < c.rotary_dim)
      fail("{}: sparse_index_dim {} is smaller than rotary_dim {}", where, c.msa.index_dim, c.rotary_dim);
    if (sr.string_or("sparse_score_type", "max") != "max")
      fail("{}: sparse_score_type \"{}\" is not supported (only \"max\")", where,
           sr.string_or("sparse_score_type", ""));
    if (sr.integer_or("sparse_init_block", 0, 0, 65536) != 0)
      fail("{}: sparse_init_block > 0 (forced sink blocks) is not supported (the release has 0)", where);
    const int64_t local = sr.has("sparse_local_block") ? sr.integer("sparse_local_block", 0, 65536)
                                                       : r.integer_or("index_local_blocks", 1, 0, 65536);
    if (local != 1)
      fail("{}: sparse_local_block = {} is not supported (the release forces exactly the query's own "
           "block: 1)", where, local);
    const std::vector<bool> no_value = layer_flags(sac, "sparse_disable_index_value", c.n_layers, true, where);
    for (int il = 0; il < c.n_layers; ++il)
      if (c.layer_kinds[il] == LayerKind::kSparse && !no_value[il])
        fail("{}: sparse_disable_index_value[{}] = 0 (an index-value branch) is not supported; the "
             "release disables it on every sparse layer (spec §8)", where, il);
    static const std::set<std::string> kSacKeys = {
        "use_sparse_attention", "sparse_index_dim", "sparse_num_index_heads", "sparse_topk_blocks",
        "sparse_block_size", "sparse_score_type", "sparse_init_block", "sparse_local_block",
        "sparse_attention_freq", "sparse_disable_index_value"};
    for (const auto& [key, _] : sac.items())
      if (!kSacKeys.count(key)) c.warnings.push_back(fmt::format("{}: unknown key sparse_attention_config.{} ignored", where, key));
  }

  // FFN pattern: dense MLP where moe_layer_freq is 0.
  if (r.has("moe_layer_freq")) c.moe_layers = layer_flags(j, "moe_layer_freq", c.n_layers, true, where);
  else if (r.has("mlp_layer_types"))
    c.moe_layers = layer_strings(j["mlp_layer_types"], "mlp_layer_types", "sparse", "dense", c.n_layers, where);
  else c.moe_layers.assign(size_t(c.n_layers), true);
  parse_moe_shape(r, c, used);
  bool any_dense = false;
  for (bool m : c.moe_layers) any_dense |= !m;
  if (any_dense) c.dense_ffn_dim = r.integer("dense_intermediate_size", 1, 1 << 20);
  const int64_t n_shared = r.integer_or("n_shared_experts", 0, 0, 16);
  if (n_shared > 1) fail("{}: n_shared_experts = {} is not supported (the release has 1)", where, n_shared);
  c.shared_ffn_dim = n_shared == 1 ? r.integer_or("shared_intermediate_size", c.ffn_dim, 1, 1 << 20) : 0;
  c.router = RouterKind::kSigmoidBias;
  if (r.string_or("scoring_func", "sigmoid") != "sigmoid")
    fail("{}: scoring_func \"{}\" is not supported for MiniMax-M3 (expected sigmoid)", where,
         r.string_or("scoring_func", ""));
  c.use_routing_bias = r.boolean_or("use_routing_bias", true);
  c.routed_scaling_factor = float(r.number_or("routed_scaling_factor", 1.0));
  if (r.integer_or("num_expert_group", 1, 1, 65536) > 1 || r.integer_or("topk_group", 1, 1, 65536) > 1)
    fail("{}: group-limited routing (num_expert_group/topk_group > 1) is not supported", where);

  c.n_mtp_modules = int(r.integer_or("num_mtp_modules", 0, 0, 64));
  for (const json* q : {&top, &j})
    if (q->contains("quantization_config") && !(*q)["quantization_config"].is_null())
      parse_mxfp8((*q)["quantization_config"], where, c);
  warn_unknown_keys(j, used, kIgnoredKeys, c, where);
}

// The family's config.json entry (registry.cpp's table): everything past "architectures".
// The VL wrapper: the LLM's keys live in text_config; vision keys are not ours.
void parse_config_m3(const json& j, const std::string& where, ModelConfig& c) {
  std::set<std::string> used = {"architectures"};
  if (!j.contains("text_config") || !j["text_config"].is_object())
    fail("{}: MiniMaxM3SparseForConditionalGeneration needs a \"text_config\" object", where);
  const json& t = j["text_config"];
  const Reader tr(t, where + " (text_config)");
  std::set<std::string> tused;
  parse_common(t, tr, c, tused);
  parse_m3(t, j, tr, c, tused);
  static const std::set<std::string> kTopLevel = {
      "text_config", "vision_config", "quantization_config", "model_type", "torch_dtype", "dtype",
      "transformers_version", "image_token_index", "video_token_index", "projector_hidden_size",
      "projector_hidden_act", "vision_feature_layer", "vision_feature_select_strategy",
      "multimodal_projector_bias", "auto_map", "tie_word_embeddings", "bos_token_id",
      "eos_token_id", "pad_token_id", "_name_or_path", "image_seq_length", "use_cache"};
  warn_unknown_keys(j, used, kTopLevel, c, where);
}

}  // namespace mmx::config_parse

// ---- forward ----
namespace mmx {

namespace {

enum Slot { kX = 0, kH, kBranch, kMlp = 300 };

class MiniMaxM3 final : public RowwiseModel {
 public:
  MiniMaxM3(ModelConfig cfg, ModelWeights w) : cfg_(std::move(cfg)), w_(std::move(w)) {
    attn_ = layers::msa_attention_params(cfg_);
    moe_ = layers::moe_params(cfg_);
    act_ = moe_.act;  // the dense MLP layers use the experts' activation
  }
  void set_msa_stats(MsaStats* stats) override { attn_.stats = stats; }

  const ModelConfig& config() const override { return cfg_; }
  void update_weights(std::span<const TensorValues> u) override { mmx::update_weights(w_, cfg_, u); }
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
  // The one forward path: a single sequence is the one-chunk case. Row-wise ops over all rows;
  // attention (incl. the MSA index selection) per chunk against its own cache. logits: every row
  // (all_logits, one chunk only) or the last row of each chunk.
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
      {
        PhaseScope t(phases_, Phase::kAttention);
        layers::attention_msa(h, lw.attn, attn_, cfg_.layer_kinds[il] == LayerKind::kSparse, rows, il, s_, br);
      }
      trace(br, "attn_out", il);
      ops::add(x, br);
      ops::rms_norm(x, lw.ffn_norm, cfg_.norm_eps, h);
      trace(h, "ffn_norm", il);
      if (cfg_.is_moe_layer(il)) layers::moe(h, lw.moe, moe_, il, s_, br);
      else {
        PhaseScope t(phases_, Phase::kExperts);
        layers::mlp(h, lw.mlp, act_, kMlp, s_, br);
      }
      trace(br, "ffn_out", il);
      ops::add(x, br);
      trace(x, "layer_out", il);
    }
    if (logits == nullptr) return;

    PhaseScope t(phases_, Phase::kLmHead);
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits, hidden);
  }

  ModelConfig cfg_;
  ModelWeights w_;
  layers::MsaAttentionParams attn_;
  layers::FfnActParams act_;
  layers::MoeParams moe_;
  Scratch s_;
  PhaseTimes* phases_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_minimax_m3(ModelConfig cfg, ModelWeights weights) {
  return std::make_unique<MiniMaxM3>(std::move(cfg), std::move(weights));
}

}  // namespace mmx
