#include "model/layers/attention_lightning.h"

#include <cmath>

#include "memory/kv_cache.h"
#include "model/trace.h"
#include "ops/ops.h"

namespace mmx::layers {

namespace {
enum Slot { kQkv = 120, kAttn, kGate };
}

double lightning_slope(int n_heads, int h, int il, int n_layers) {
  const double factor = n_layers > 1 ? 1.0 - double(il) / double(n_layers - 1) + 1e-5 : 1.0 + 1e-5;
  return std::exp2(-8.0 * double(h + 1) / double(n_heads)) * factor;
}

Buffer lightning_slopes(int n_heads, int il, int n_layers) {
  Buffer b(DType::kF32, {n_heads});
  for (int h = 0; h < n_heads; ++h) b.f32()[h] = float(lightning_slope(n_heads, h, il, n_layers));
  return b;
}

void attention_lightning(const Tensor& h, const LightningWeights& w, const Tensor& slopes,
                         const LightningParams& p, const SeqRows& rows, int il, Scratch& s, Tensor& out) {
  const int64_t n = h.dim(0), qd = int64_t(p.n_heads) * p.head_dim;
  Tensor qkv = s.f32(kQkv, {n, 3 * qd});  // [n, n_heads * 3 * head_dim], per head [q | k | v]
  ops::matmul(h, w.qkv, qkv);
  ops::silu(qkv);  // spec §3.5 step 1: SiLU on the whole fused projection
  trace(qkv, "lin_qkv", il);

  Tensor attn = s.f32(kAttn, {n, p.n_heads, p.head_dim});  // [n, n_heads, head_dim]
  for (const SeqChunk& c : rows.seqs) {  // the recurrence: per sequence, over its own state
    Tensor state = c.kv->state(il);
    Tensor out_c = attn.rows_range(c.begin, c.begin + c.n);
    ops::attention_lightning(qkv.rows_range(c.begin, c.begin + c.n).reshape({c.n, p.n_heads, 3, p.head_dim}),
                             slopes, p.block, state, out_c);
  }
  Tensor a = attn.reshape({n, qd});  // [n, q_dim], heads concatenated
  trace(a, "lin_attn", il);
  ops::rms_norm(a, w.norm, p.norm_eps, a);  // one statistic over all heads jointly

  Tensor gate = s.f32(kGate, {n, qd});  // [n, q_dim] from the same normed input
  ops::matmul(h, w.gate, gate);
  ops::mul_sigmoid(a, gate);
  trace(a, "lin_gated", il);
  ops::matmul(a, w.out, out);
}

}  // namespace mmx::layers
