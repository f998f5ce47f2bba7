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
enum Slot { kQ = 140, kK, kV, kAttn, kIq, kIk, kSel, kRecall, kCoverage };

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
  MMX_CHECK(n_keys <= kv.capacity() && kv.page() == B, "KV cache {} rows, page {} (want {}), {} keys",
            kv.capacity(), kv.page(), B, n_keys);
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
  kv.write_kv(il, batch.pos0, k, v);

  // Read through the cache's block table (identity for the single-sequence cache).
  const int64_t n_blocks = (n_keys + B - 1) / B;
  const Tensor kp = kv.k_pages(il), vp = kv.v_pages(il);  // [n_pages, B, n_kv_heads, head_dim]
  const Tensor table = kv.block_table().rows_range(0, n_blocks);  // [n_blocks] I32

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
    kv.write_ik(il, batch.pos0, ik);
    const Tensor ikp = kv.ik_pages(il);  // [n_pages, B, index_dim]
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
