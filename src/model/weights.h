// ModelWeights: the checkpoint's tensors (model/schema.h), checked against the config, by role.
//
// Large weights (projections, experts, embedding, lm_head) are views into the mmapped
// safetensors files in their storage dtype; small ones (norm gains, router, routing bias) are
// converted to F32 once at load. Every expected tensor is checked for presence, dtype and shape;
// a mismatch throws mmx::Error naming the tensor, the expected and the found shape.
#pragma once

#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/config.h"
#include "model/tensor_values.h"
#include "formats/safetensors.h"
#include "ops/ops.h"

namespace mmx {

struct AttentionWeights {
  ops::Linear q;  // [q_dim, d_model]
  ops::Linear k;  // [kv_dim, d_model]
  ops::Linear v;  // [kv_dim, d_model]
  ops::Linear o;  // [d_model, q_dim]
  Buffer q_norm;  // [q_dim] F32, or [head_dim] when per-head (M3); empty if !use_qk_norm
  Buffer k_norm;  // [kv_dim] F32, or [head_dim] when per-head
  // MSA index branch (M3 sparse layers only)
  ops::Linear iq;   // [index_heads * index_dim, d_model]
  ops::Linear ik;   // [index_dim, d_model] (one key shared by the index heads)
  Buffer iq_norm;   // [index_dim] F32 (Gemma offset folded)
  Buffer ik_norm;   // [index_dim] F32
};

// A dense gated MLP: M3's first layers and its shared expert.
struct MlpWeights {
  ops::Linear gate;  // [ffn, d_model]
  ops::Linear up;    // [ffn, d_model]
  ops::Linear down;  // [d_model, ffn]
};

// Lightning attention (Text-01 / M1, spec §3.2): fused per-head interleaved q|k|v projection.
struct LightningWeights {
  ops::Linear qkv;   // [3 * q_dim, d_model], rows of head h: [q (head_dim) | k | v]
  ops::Linear gate;  // [q_dim, d_model] output gate
  ops::Linear out;   // [d_model, q_dim]
  Buffer norm;       // [q_dim] F32 inner RMSNorm over all heads jointly
};

struct ExpertWeights {
  ops::Linear w1;  // gate [ffn_dim, d_model]
  ops::Linear w3;  // up   [ffn_dim, d_model]
  ops::Linear w2;  // down [d_model, ffn_dim]
};

struct MoeWeights {
  Buffer gate_f32;    // [n_experts, d_model] F32 router weight
  ops::Linear gate;   // view of gate_f32
  Buffer bias;        // [n_experts] F32 routing bias (empty if unused)
  std::vector<ExpertWeights> experts;  // [n_experts]
  MlpWeights shared;  // shared expert (M3; empty Linear weights when absent)
};

struct LayerWeights {
  Buffer attn_norm;  // [d_model] F32 gain before attention
  Buffer ffn_norm;   // [d_model] F32 gain before the MoE / MLP
  AttentionWeights attn;  // softmax layers
  LightningWeights lin;   // lightning layers
  MoeWeights moe;         // MoE layers
  MlpWeights mlp;         // dense-MLP layers (M3 layers with moe_layer_freq 0)
};

struct ModelWeights {
  TensorStore store;  // owns the mappings every view below points into
  std::vector<Buffer> copies;  // aligned copies of misaligned tensors; MXFP8 scales as F32
  // Data of the storage-dtype tensors that live in `copies` (a re-encoded lm_head, pushed
  // weights): a weight push writes these in place, and copies a tensor still in `store` first.
  std::unordered_set<const void*> owned;
  Tensor embed;       // [vocab_size, d_model] F32/F16/BF16
  std::vector<LayerWeights> layers;
  Buffer final_norm;  // [d_model] F32
  ops::Linear lm_head;  // [vocab_size, d_model]

  ModelWeights(TensorStore s) : store(std::move(s)) {}
};

// Loads and checks every tensor the config implies. `progress` (may be null) is called with
// (done, total) as layers load.
// huge_pages: TensorStore::to_huge_pages() before any view is taken.
ModelWeights load_weights(const std::string& dir, const ModelConfig& cfg,
                          void (*progress)(int done, int total) = nullptr, bool huge_pages = false);

// Model::update_weights for the family models: `updates` written into `w` (model/model.h has the
// contract; weight_update.cpp). Throws mmx::Error before writing anything.
void update_weights(ModelWeights& w, const ModelConfig& cfg, std::span<const TensorValues> updates);

// Parameter counts implied by the config (no weights needed).
struct ParamCounts {
  int64_t embedding = 0;   // token embedding
  int64_t lm_head = 0;     // 0 when tied
  int64_t attention = 0;   // all layers: q/k/v/o + q/k norms; lightning qkv/gate/out/norm
  int64_t norms = 0;       // input/post-attention layernorms + final norm
  int64_t router = 0;      // gate + bias, all layers
  int64_t experts = 0;     // all routed experts, all layers
  int64_t experts_active = 0;  // the top-k experts of each layer
  int64_t dense_mlp = 0;       // dense MLPs and shared experts (always active)
  int64_t total() const { return embedding + lm_head + attention + norms + router + experts + dense_mlp; }
  // Per token: everything but the inactive experts; the embedding is a row lookup, so it is
  // reported separately (active_no_embed excludes embedding and lm_head).
  int64_t active_no_embed() const { return attention + norms + router + experts_active + dense_mlp; }
};
ParamCounts count_params(const ModelConfig& cfg);

}  // namespace mmx
