#include "model/layers/attention_msa.h"

#include <cmath>
#include <cstring>

#include "base/clock.h"
#include "model/msa_stats.h"
#include "model/trace.h"
#include "ops/msa.h"
#include "ops/ops.h"

namespace mmx::layers {

namespace {
enum Slot { kQ = 140, kK, kV, kAttn, kIq, kIk, kTable, kSel, kRecall, kCoverage };

// Per-head RMSNorm: x [n, width] viewed as [n * width / dim, dim], one gain [dim] for all heads.
void norm_heads(Tensor& x, const Buffer& gain, int dim, float eps) {
  Tensor r = x.reshape({x.numel() / dim, dim});
  ops::rms_norm(r, gain, eps, r);
}
}  // namespace

void attention_msa(const Tensor& h, const AttentionWeights& w, const MsaAttentionParams& p, bool sparse,
                   const ForwardBatch& batch, KvCache& kv, int il, Scratch& s, Tensor& out) {
  const int64_t n = h.dim(0), D = p.head_dim;
  const int64_t qd = int64_t(p.n_heads) * D, kvd = int64_t(p.n_kv_heads) * D;
  const int64_t n_keys = batch.pos0 + n, B = p.page;
  MMX_CHECK(n_keys <= kv.capacity() && kv.capacity() % B == 0, "KV cache {} rows, page {}, {} keys",
            kv.capacity(), B, n_keys);
  const double t0 = MsaStats::get().enabled() ? now_s() : 0.0;

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
  ops::rope_neox(qh, batch.positions, p.rotary_dim, p.rope_theta);
  ops::rope_neox(kh, batch.positions, p.rotary_dim, p.rope_theta);
  trace(q, "q", il);
  trace(k, "k", il);
  trace(v, "v", il);
  std::memcpy(kv.k(il).f32() + batch.pos0 * kvd, k.data, size_t(n * kvd) * sizeof(float));
  std::memcpy(kv.v(il).f32() + batch.pos0 * kvd, v.data, size_t(n * kvd) * sizeof(float));

  // The single-sequence cache is paged with the identity block table: page b = block b.
  const int64_t n_pages = kv.capacity() / B, n_blocks = (n_keys + B - 1) / B;
  const Tensor kp = kv.k(il).reshape({n_pages, B, p.n_kv_heads, D});
  const Tensor vp = kv.v(il).reshape({n_pages, B, p.n_kv_heads, D});
  Tensor table = s.i32(kTable, {n_blocks});  // [n_blocks] I32
  for (int64_t b = 0; b < n_blocks; ++b) table.ptr<int32_t>()[b] = int32_t(b);

  const float scale = float(1.0 / std::sqrt(double(D)));
  Tensor attn = s.f32(kAttn, {n, p.n_heads, D});  // [n, n_heads, head_dim]
  if (!sparse) {
    ops::attention_paged(qh, kp, vp, table, batch.positions, n_keys, scale, attn);
  } else {
    const int G = p.n_kv_heads;
    const int64_t di = p.index_dim;
    Tensor iq = s.f32(kIq, {n, G * di});  // [n, index_heads * index_dim]
    Tensor ik = s.f32(kIk, {n, di});      // [n, index_dim], one key per token
    ops::matmul(h, w.iq, iq);
    ops::matmul(h, w.ik, ik);
    norm_heads(iq, w.iq_norm, int(di), p.norm_eps);
    norm_heads(ik, w.ik_norm, int(di), p.norm_eps);
    Tensor iqh = iq.reshape({n, G, di}), ikh = ik.reshape({n, 1, di});
    ops::rope_neox(iqh, batch.positions, p.rotary_dim, p.rope_theta);
    ops::rope_neox(ikh, batch.positions, p.rotary_dim, p.rope_theta);
    trace(iq, "index_q", il);
    trace(ik, "index_k", il);
    std::memcpy(kv.ik(il).f32() + batch.pos0 * di, ik.data, size_t(n * di) * sizeof(float));
    const Tensor ikp = kv.ik(il).reshape({n_pages, B, di});
    Tensor sel = s.i32(kSel, {G, n, p.topk});  // [groups, n, topk] block ids, -1 padded
    ops::msa_index_select(iqh, ikp, table, batch.positions, n_keys, sel);
    trace(sel, "msa_selected", il);
    const double t1 = MsaStats::get().enabled() ? now_s() : 0.0;
    ops::attention_block_sparse(qh, kp, vp, table, batch.positions, n_keys, sel, scale, attn);
    if (MsaStats::get().enabled()) {
      const double t2 = now_s();
      Tensor rec = s.f32(kRecall, {G, n}), cov = s.f32(kCoverage, {G, n});
      ops::msa_selection_stats(qh, kp, table, batch.positions, n_keys, sel, scale, p.topk, rec, cov);
      MsaStats::get().add_timing(il, t1 - t0, t2 - t1);
      MsaStats::get().add_selection(il, G, n, rec.f32(), cov.f32());
    }
  }
  trace(attn, "attn_heads", il);
  ops::matmul(attn.reshape({n, qd}), w.o, out);
}

}  // namespace mmx::layers
