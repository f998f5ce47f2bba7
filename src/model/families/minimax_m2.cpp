// MiniMax-M2 family (M2, M2.1, M2.5, M2.7): pre-norm decoder, GQA softmax attention with
// whole-projection QK-norm and partial NeoX RoPE, sigmoid-routed MoE (spec §4.4):
//   x  = embed(tokens)
//   per layer: h = x + Attn(RMSNorm_in(x));  x = h + MoE(RMSNorm_post(h))
//   logits = lm_head(RMSNorm_final(x))
// This file composes layers and ops; it holds no kernels and no per-device branches.
#include <cstring>

#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/lm_head.h"
#include "model/layers/attention_softmax.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

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
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
  // The one forward path: a single sequence is the one-chunk case. Row-wise ops over all rows;
  // attention per chunk against its own cache. logits: every row (all_logits, one chunk only)
  // or the last row of each chunk.
  void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits) override {
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
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits);
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
