// MiniMax-M3 text backbone (spec §5.4): pre-norm decoder with Gemma (1 + w) norms (folded at load),
//   x  = embed(tokens)
//   per layer: h = x + Attn_L(GRMS_in(x));  x = h + FFN_L(GRMS_post(h))
//   logits = lm_head(GRMS_final(x))
// Attn_L is dense GQA or MSA (layers/attention_msa) over the block-major paged KV; FFN_L is the
// dense SwiGLU-OAI MLP or the sigmoid-routed MoE ×routed_scaling_factor plus the shared expert.
// MTP modules are not loaded here (spec §5.8). This file composes layers and ops only.
#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/lm_head.h"
#include "model/layers/attention_msa.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

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
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
  // The one forward path: a single sequence is the one-chunk case. Row-wise ops over all rows;
  // attention (incl. the MSA index selection) per chunk against its own cache. logits: every row
  // (all_logits, one chunk only) or the last row of each chunk.
  void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits) override {
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
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits);
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
