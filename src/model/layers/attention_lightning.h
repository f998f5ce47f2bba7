// Lightning attention layer (MiniMax-Text-01 / M1, spec §3.5): fused qkv projection + SiLU,
// decayed linear attention over the layer's fp32 state, inner RMSNorm over all heads jointly,
// sigmoid output gate computed from the layer input, out_proj. No kernels here — ops:: only.
#pragma once

#include <vector>

#include "model/forward_batch.h"
#include "model/weights.h"
#include "tensor/scratch.h"

namespace mmx::layers {

struct LightningParams {
  int n_heads = 0, head_dim = 0;
  int block = 256;         // chunk length of the blockwise prefill
  float norm_eps = 1e-6f;  // inner norm (spec §8: the reference uses 1e-6, not rms_norm_eps)
};

// Decay slopes of global layer `il` of `n_layers` (spec §3.5 step 2):
//   s_h = 2^(-8(h+1)/H) · (1 - il/(n_layers-1) + 1e-5)   (factor 1 + 1e-5 when n_layers == 1)
// H must be a power of two (config refuses others). Returns [n_heads] F32.
// Slope s_h of head h in layer il, in double (the training graph's fp64 path uses it unrounded).
double lightning_slope(int n_heads, int h, int il, int n_layers);
Buffer lightning_slopes(int n_heads, int il, int n_layers);

// h:      [n_tokens, d_model] normed layer input (n1), the rows of every chunk of `rows`
// slopes: [n_heads] F32 from lightning_slopes
// rows:   the sequences; chunk c's rows run the recurrence over c.kv->state(il) (updated)
// out:    [n_tokens, d_model]
void attention_lightning(const Tensor& h, const LightningWeights& w, const Tensor& slopes,
                         const LightningParams& p, const SeqRows& rows, int il, Scratch& scratch,
                         Tensor& out);

}  // namespace mmx::layers
