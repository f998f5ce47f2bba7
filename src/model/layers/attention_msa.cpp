#include "model/layers/attention_msa.h"

#include <cmath>
#include <cstring>

#include "base/clock.h"
#include "model/msa_stats.h"
#include "model/trace.h"
#include "ops/ops.h"
#include "ops/ops.h"

namespace mmx::layers {

namespace {
enum Slot { kQ = 140, kK, kV, kAttn, kIq, kIk, kSel, kRecall, kCoverage };

// Per-head RMSNorm: x [n, width] viewed as [n * width / dim, dim], one gain [dim] for all heads.
void norm_heads(Tensor& x, const Buffer& gain, int dim, float eps) {
  Tensor r = x.reshape({x.numel() / dim, dim});
  ops::rms_norm(r, gain, eps, r);
}
}  // namespace

MsaAttentionParams msa_attention_params(const ModelConfig& c) {
  MsaAttentionParams p;
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.rope_theta = c.rope_theta;
  p.norm_eps = c.norm_eps;
  p.qk_norm = c.use_qk_norm;
  p.page = int(c.kv_page());
  p.index_dim = c.msa.index_dim;
  p.topk = c.msa.topk;
  return p;
}

void attention_msa(const Tensor& h, const AttentionWeights& w, const MsaAttentionParams& p, bool sparse,
                   const SeqRows& rows, int il, Scratch& s, Tensor& out) {
  const int64_t n = h.dim(0), D = p.head_dim;
  const int64_t qd = int64_t(p.n_heads) * D, kvd = int64_t(p.n_kv_heads) * D;
  const int64_t B = p.page;
  for (const SeqChunk& c : rows.seqs)  // before any cache is written
    MMX_CHECK(c.kv->n_past() + c.n <= c.kv->capacity() && c.kv->page() == B,
              "KV cache {} rows, page {} (want {}), {} keys", c.kv->capacity(), c.kv->page(), B,
              c.kv->n_past() + c.n);
  MsaStats* const stats = p.stats;
  const double t0 = stats ? now_s() : 0.0;

  Tensor q = s.f32(kQ, {n, qd});   // [n, n_heads * head_dim]
  Tensor k = s.f32(kK, {n, kvd});  // [n, n_kv_heads * head_dim]
  Tensor v = s.f32(kV, {n, kvd});
  ops::matmul(h, w.q, q);
  ops::matmul(h, w.k, k);
  ops::matmul(h, w.v, v);
  if (p.qk_norm) {  // spec §5.5 step 2: each head's vector normalised on its own
    norm_heads(q, w.q_norm, int(D), p.norm_eps);
    norm_heads(k, w.k_norm, int(D), p.norm_eps);
  }
  Tensor qh = q.reshape({n, p.n_heads, D});
  Tensor kh = k.reshape({n, p.n_kv_heads, D});
  ops::rope_neox(qh, rows.positions, p.rotary_dim, p.rope_theta);  // row-wise: each row its own position
  ops::rope_neox(kh, rows.positions, p.rotary_dim, p.rope_theta);
  trace(q, "q", il);
  trace(k, "k", il);
  trace(v, "v", il);

  // Index branch projections (sparse layers), all rows at once.
  const int G = p.n_kv_heads;
  const int64_t di = p.index_dim;
  Tensor iqh, ik;  // [n, G, index_dim], [n, index_dim]
  if (sparse) {
    Tensor iq = s.f32(kIq, {n, G * di});  // [n, index_heads * index_dim]
    ik = s.f32(kIk, {n, di});             // [n, index_dim], one key per token
    ops::matmul(h, w.iq, iq);
    ops::matmul(h, w.ik, ik);
    norm_heads(iq, w.iq_norm, int(di), p.norm_eps);
    norm_heads(ik, w.ik_norm, int(di), p.norm_eps);
    iqh = iq.reshape({n, G, di});
    Tensor ikh = ik.reshape({n, 1, di});
    ops::rope_neox(iqh, rows.positions, p.rotary_dim, p.rope_theta);
    ops::rope_neox(ikh, rows.positions, p.rotary_dim, p.rope_theta);
    trace(iq, "index_q", il);
    trace(ik, "index_k", il);
  }
  double index_s = stats ? now_s() - t0 : 0.0, attention_s = 0.0;

  // Per sequence: cache writes, then attention through its cache's block table.
  const float scale = float(1.0 / std::sqrt(double(D)));
  Tensor attn = s.f32(kAttn, {n, p.n_heads, D});  // [n, n_heads, head_dim]
  for (const SeqChunk& c : rows.seqs) {
    KvCache& kv = *c.kv;
    const int64_t b = c.begin, e = c.begin + c.n, m = c.n, pos0 = kv.n_past();
    const int64_t n_keys = pos0 + m, n_blocks = (n_keys + B - 1) / B;
    kv.write_kv(il, pos0, k.rows_range(b, e), v.rows_range(b, e));
    const Tensor kp = kv.k_pages(il), vp = kv.v_pages(il);  // [n_pages, B, n_kv_heads, head_dim]
    const Tensor table = kv.block_table().rows_range(0, n_blocks);  // [n_blocks] I32
    const Tensor pos = rows.positions.rows_range(b, e);             // [m] I32
    const Tensor qc = qh.rows_range(b, e);                          // [m, n_heads, head_dim]
    Tensor attn_c = attn.rows_range(b, e);
    if (!sparse) {
      ops::attention_dense_paged(qc, kp, vp, table, pos, n_keys, scale, attn_c);
      continue;
    }
    const double ta = stats ? now_s() : 0.0;
    kv.write_ik(il, pos0, ik.rows_range(b, e));
    const Tensor ikp = kv.ik_pages(il);  // [n_pages, B, index_dim]
    Tensor sel = s.i32(kSel, {G, m, p.topk});  // [groups, m, topk] block ids, -1 padded
    ops::msa_index_select(iqh.rows_range(b, e), ikp, table, pos, n_keys, sel);
    trace(sel, "msa_selected", il);  // one sequence's selection (the last one's wins in a dump)
    const double tb = stats ? now_s() : 0.0;
    ops::attention_block_sparse(qc, kp, vp, table, pos, n_keys, sel, scale, attn_c);
    if (stats) {
      const double tc = now_s();
      index_s += tb - ta;
      attention_s += tc - tb;
      Tensor rec = s.f32(kRecall, {G, m}), cov = s.f32(kCoverage, {G, m});
      ops::msa_selection_stats(qc, kp, table, pos, n_keys, sel, scale, p.topk, rec, cov);
      stats->add_selection(il, G, m, rec.f32(), cov.f32());
    }
  }
  if (stats && sparse) stats->add_timing(il, index_s, attention_s);
  trace(attn, "attn_heads", il);
  ops::matmul(attn.reshape({n, qd}), w.o, out);
}

}  // namespace mmx::layers
