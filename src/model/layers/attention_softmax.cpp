#include "model/layers/attention_softmax.h"

#include <cmath>
#include <cstring>

#include "model/trace.h"
#include "ops/ops.h"
#include "ops/ops.h"

namespace mmx::layers {

namespace {
enum Slot { kQ = 100, kK, kV, kAttn };
}

AttentionParams attention_params(const ModelConfig& c) {
  AttentionParams p;
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.rope_theta = c.rope_theta;
  p.norm_eps = c.norm_eps;
  p.use_qk_norm = c.use_qk_norm;
  return p;
}

void attention_softmax(const Tensor& h, const AttentionWeights& w, const AttentionParams& p,
                       const SeqRows& rows, int il, Scratch& s, Tensor& out) {
  const int64_t n = h.dim(0);
  const int64_t qd = int64_t(p.n_heads) * p.head_dim, kvd = int64_t(p.n_kv_heads) * p.head_dim;
  for (const SeqChunk& c : rows.seqs)  // before any cache is written
    MMX_CHECK(c.kv->n_past() + c.n <= c.kv->capacity(), "KV cache full: {} + {} > {}", c.kv->n_past(), c.n,
              c.kv->capacity());

  Tensor q = s.f32(kQ, {n, qd});   // [n, n_heads * head_dim]
  Tensor k = s.f32(kK, {n, kvd});  // [n, n_kv_heads * head_dim]
  Tensor v = s.f32(kV, {n, kvd});
  ops::matmul(h, w.q, q);
  ops::matmul(h, w.k, k);
  ops::matmul(h, w.v, v);
  if (p.use_qk_norm) {  // spec §4.4: one statistic per token across all heads
    ops::rms_norm(q, w.q_norm, p.norm_eps, q);
    ops::rms_norm(k, w.k_norm, p.norm_eps, k);
  }
  Tensor qh = q.reshape({n, p.n_heads, p.head_dim});
  Tensor kh = k.reshape({n, p.n_kv_heads, p.head_dim});
  ops::rope_neox(qh, rows.positions, p.rotary_dim, p.rope_theta);  // row-wise: each row its own position
  ops::rope_neox(kh, rows.positions, p.rotary_dim, p.rope_theta);
  trace(q, "q", il);
  trace(k, "k", il);
  trace(v, "v", il);

  // Per sequence: append its new K/V rows at positions n_past.., then attend over its block-major
  // pages through its cache's block table.
  Tensor attn = s.f32(kAttn, {n, p.n_heads, p.head_dim});  // [n, n_heads, head_dim]
  const float scale = float(1.0 / std::sqrt(double(p.head_dim)));
  for (const SeqChunk& c : rows.seqs) {
    KvCache& kv = *c.kv;
    const int64_t b = c.begin, e = c.begin + c.n, pos0 = kv.n_past();
    kv.write_kv(il, pos0, k.rows_range(b, e), v.rows_range(b, e));
    const int64_t n_kv = pos0 + c.n, n_blocks = (n_kv + kv.page() - 1) / kv.page();
    Tensor attn_c = attn.rows_range(b, e);
    ops::attention_dense_paged(qh.rows_range(b, e), kv.k_pages(il), kv.v_pages(il),
                         kv.block_table().rows_range(0, n_blocks), rows.positions.rows_range(b, e), n_kv,
                         scale, attn_c);
  }
  trace(attn, "attn_heads", il);
  ops::matmul(attn.reshape({n, qd}), w.o, out);
}

}  // namespace mmx::layers
