// Softmax GQA attention layer: projections, optional whole-projection QK-norm, partial NeoX
// RoPE, KV-cache write, causal attention, output projection. No kernels here — ops:: only.
// Projections, norms and RoPE run over all rows of the forward (every sequence at once); the KV
// write and the attention run per sequence, against that sequence's cache.
#pragma once

#include "memory/kv_cache.h"
#include "model/forward_batch.h"
#include "model/weights.h"
#include "tensor/scratch.h"

namespace mmx::layers {

struct AttentionParams {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double rope_theta = 0;
  float norm_eps = 0;
  bool use_qk_norm = false;  // RMSNorm over the whole q [q_dim] and k [kv_dim] projections
};

// The GQA parameters a config implies.
AttentionParams attention_params(const ModelConfig& c);

// h:    [n_rows, d_model] normed layer input (all sequences' rows)
// rows: which rows belong to which sequence, and their positions
// out:  [n_rows, d_model]
// Writes K/V of chunk c's rows into c.kv at positions [c.kv->n_past(), + c.n).
void attention_softmax(const Tensor& h, const AttentionWeights& w, const AttentionParams& p,
                       const SeqRows& rows, int il, Scratch& scratch, Tensor& out);

}  // namespace mmx::layers
