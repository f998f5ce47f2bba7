// MiniMax-Text-01 and MiniMax-M1 (spec §3): lightning + softmax hybrid, post-norm α/β residual,
// softmax top-2 MoE. Per layer, with n1/n2 the normed sub-layer inputs:
//   a = Attn_L(n1)          lightning (state per sequence) or softmax GQA (KV cache)
//   x = α·n1 + β·a          (postnorm: the normed value is carried; else α·x + β·a)
//   x = α·n2 + β·MoE(n2)
//   logits = lm_head(RMSNorm_final(x))
// Lightning attention runs per sequence over its own state; everything else row-wise over the
// fused batch. Forwards are split at lightning-state checkpoints by RowwiseModel
// (families/rowwise_model.h). This file composes layers and ops only.
#include "model/families/registry.h"
#include "model/families/rowwise_model.h"
#include "model/layers/lm_head.h"
#include "model/layers/attention_lightning.h"
#include "model/layers/attention_softmax.h"
#include "model/layers/moe.h"
#include "model/trace.h"
#include "ops/ops.h"

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
  void set_phase_times(PhaseTimes* t) override { phases_ = moe_.phases = t; }

 private:
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
    layers::lm_head(x, rows.seqs, all_logits, w_.final_norm, cfg_.norm_eps, w_.lm_head, s_, *logits);
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
