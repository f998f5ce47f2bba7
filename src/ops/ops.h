// The op interface: one declaration per op, grouped by family prefix.
//
// Model code calls mmx::ops::<op>; the backend is chosen in here, never by the model.
// mmx::ops::ref::<op> has the same signature: a naive implementation with fp64 accumulation,
// written for obviousness. It is THE test oracle (tests/ops/*) and is never called by models.
//
// Conventions for every op:
//   * activations are F32, contiguous, row-major, shapes outermost first;
//   * outputs are preallocated by the caller with the documented shape (ops never allocate
//     tensors the caller sees) and may not alias inputs unless the op says "in place";
//   * shape/dtype mismatches are programming errors -> MMX_CHECK.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mmx::ops {

// A linear layer's weight, y = x · Wᵀ, as stored in the checkpoint.
//   w:     [n_out, n_in] in F32, F16, BF16, F8E4M3, or a GGUF block type (Q8_0, Q4_0, Q4_K,
//          Q5_K, Q6_K; base/qblocks.h; n_in a multiple of the block).
//   scale: F8E4M3 only — [ceil(n_out/block_out), ceil(n_in/block_in)] F32, the checkpoint's
//          `weight_scale_inv`, which MULTIPLIES: W[o,i] = fp8(w[o,i]) · scale[o/block_out, i/block_in]
//          (spec §4.2). Empty for other dtypes.
struct Linear {
  Tensor w;      // [n_out, n_in]
  Tensor scale;  // [ceil(n_out/block_out), ceil(n_in/block_in)] F32, or empty
  int block_out = 128;
  int block_in = 128;

  int64_t n_out() const { return w.dim(0); }
  int64_t n_in() const { return w.dim(1); }
};

// Threads used by the fast CPU ops (OpenMP). 0 = all cores.
void set_n_threads(int n);
int n_threads();

// Which implementation the ops below run. kRef routes every call to ops::ref — the naive fp64
// oracle — so `mmx bench` can report the fast path against it side by side. The default is kCpu,
// or kRef when the environment variable MMX_OPS=ref is set at startup.
enum class Backend { kCpu, kRef };
void set_backend(Backend b);
Backend backend();

// ---- matmul ----
// y = x · Wᵀ.  x: [n, n_in] F32; y: [n, n_out] F32. n == 1 is the decode GEMV.
// Fast path (cpu/gemv.cpp, cpu/gemm.cpp): n < 32 streams W once with on-the-fly conversion, and
// a token's row of y has the same bits whatever else is in the batch; n >= 32 is a packed GEMM.
// GGUF block-quantized W: cpu/qgemv.cpp (n < 32) and cpu/qgemm.cpp (n >= 32) in int8, with the
// same bits for a token's row at any n (prefill and decode agree exactly).
// Output is bitwise independent of n_threads(). F8E4M3 weights must not contain the NaN codes
// 0x7f/0xff (they decode as finite numbers here), and the GEMV reads subnormal fp8 codes as
// 0 if the caller has turned on DAZ (denormals-are-zero, e.g. a -ffast-math main).
void matmul(const Tensor& x, const Linear& w, Tensor& y);

// Dequantize rows [row0, row0 + out.dim(0)) of w into out: [n_rows, n_in] F32.
void linear_dequant_rows(const Linear& w, int64_t row0, Tensor& out);

// ---- elementwise / norms ----
// y[t,:] = x[t,:] / sqrt(mean(x[t,:]^2) + eps) * weight.  x, y: [n, d] F32; weight: [d] F32.
// Statistics in fp32 (fast) / fp64 (ref). y may alias x.
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y);

// x += y, elementwise. x, y: same shape, F32.
void add(Tensor& x, const Tensor& y);

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).  gate, up, out: [n, f] F32.
void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out);

// SwiGLU-OAI, non-interleaved (MiniMax-M3, spec §5.7):
//   g = min(gate, limit); u = clamp(up, -limit, limit); out = (u + 1) · g · sigmoid(alpha · g)
// gate, up, out: [n, f] F32.
void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out);

// x = silu(x) in place. x: any shape, F32.
void silu(Tensor& x);

// x *= sigmoid(gate), elementwise, in place. x, gate: same shape, F32.
void mul_sigmoid(Tensor& x, const Tensor& gate);

// x = a·x + b·y, elementwise, in place (post-norm residual α·n + β·branch). Same shape, F32.
void scale_add(Tensor& x, float a, const Tensor& y, float b);

// ---- rope ----
// Partial NeoX ("rotate_half") RoPE, in place on the first rotary_dim channels of every head;
// channels rotary_dim..head_dim-1 pass through (spec §2).
//   x: [n, n_heads, head_dim] F32; positions: [n] I32 absolute positions.
//   For i < rotary_dim/2, f_i = theta^(-2i/rotary_dim), a = p·f_i:
//     y[i] = x[i]cos a - x[i+r/2] sin a;  y[i+r/2] = x[i+r/2] cos a + x[i] sin a.
//   Angles are computed in double precision (see docs/numerics.md).
void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta);

// ---- attention ----
// Causal GQA softmax attention of n_q queries against a contiguous KV cache.
//   q:   [n_q, n_heads, head_dim] F32
//   k,v: [n_kv, n_kv_heads, head_dim] F32 — cache rows 0..n_kv-1 = absolute positions
//   out: [n_q, n_heads, head_dim] F32
// Query i is at absolute position pos0 + i and sees keys j <= pos0 + i (needs pos0 + n_q <= n_kv).
// Query head h reads KV head h / (n_heads / n_kv_heads). Softmax in fp32 (fp64 in ref).
// Prefill is n_q = n_kv, pos0 = 0; decode is n_q = 1, pos0 = n_kv - 1; chunked prefill in between.
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out);

// ---- attention over a block-major paged KV cache (dense, block-sparse MSA, spec §5.6) ----
// Block-major paged KV layout (seed 003 §2.1, spec §5.6 "KV layout hints"): a page holds one
// block of B consecutive tokens of one sequence, all KV heads, so one selected block is one
// contiguous piece of memory:
//   k_pages, v_pages: [n_pages, B, n_kv_heads, head_dim] F32 or BF16 (both the same dtype)
//   ik_pages:         [n_pages, B, index_dim] F32, BF16 or F8 E4M3 — the indexer's key (one per
//                     token, shared by all index heads; post-norm, post-RoPE). E4M3 is the
//                     release's compact form (vLLM's fp8 index cache: 128 B per token, no scale)
// Pages may be F32 or BF16 (the KV cache's storage dtype, memory/page_store.h); a BF16 value is
// widened to fp32 exactly on load (fp64 in ref), so BF16 pages give the result of F32 pages
// holding the same (rounded) values; the same holds for E4M3 index-key pages. Everything else
// stays F32.
//   block_table:      [n_blocks] I32 — logical block b (tokens bB .. bB+B-1 of the sequence)
//                     lives in page block_table[b]; n_blocks >= ceil(n_keys / B), entries of
//                     blocks b < ceil(n_keys / B) must be in [0, n_pages) (entries past that are
//                     not read)
//   n_keys:           T_k, the number of keys of the sequence (cache + new tokens); keys
//                     n_keys.. of the last page are never read
//   positions:        [n_q] I32 — absolute position p_i of query i, 0 <= p_i < n_keys, any order
//                     (prefill / chunked prefill: consecutive; multi-query decode and
//                     speculative verification: n_keys - n_q .. n_keys - 1). Query i sees keys
//                     j <= p_i only (causal), whatever n_keys is.
// B is k_pages.dim(1) (== ik_pages.dim(1)). The M3 shapes: B 128, n_kv_heads 4, head_dim 128,
// n_heads 64, index heads G = n_kv_heads = 4, index_dim 128, K (top-k blocks) 16.


// ---- msa: the lightning indexer's block selection (spec §5.6, exact) ----
// For index head g and query i at position p = positions[i]:
//   z_g(p, j) = iq[i, g, :] · ik(j)                      for keys j <= p   (no 1/√index_dim: a
//                                                         positive scale never changes the ranking)
//   S_g(p, b) = max_{j in block b, j <= p} z_g(p, j)      (the local block ⌊p/B⌋ is partial)
//   nvis = ⌊p/B⌋ + 1;
//   nvis <= K: selected = blocks 0 .. nvis-1 in ascending order (local block last);
//   else:      the K-1 best non-local blocks 0 .. nvis-2 by (S desc, block id asc), in that order,
//              then the local block ⌊p/B⌋.
// Each index head selects on its own (no reduction over heads).
//   iq:        [n_q, G, index_dim] F32 — index queries, already normed and RoPE'd by the caller
//   ik_pages:  [n_pages, B, index_dim] F32, BF16 or F8 E4M3
//   block_table, positions, n_keys: as in the header
//   selected:  [G, n_q, K] I32 out — K = selected.dim(2) >= 1; per (g, i) min(nvis, K) valid
//              block ids as a prefix (the local block in the LAST valid slot), then -1 padding.
// Scores are fp32 dots with FMA in the fast path (fp64 in ref): blocks whose scores differ by
// less than ~1e-6 relative may rank differently from the reference (docs/numerics.md, "MSA").
// Exactly equal fp32 scores resolve deterministically (lower block id first). Inputs must be
// finite. The result is bitwise independent of n_threads().
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);

// Block-sparse causal GQA softmax attention (spec §5.6 "Sparse attention"). Query head h reads KV
// head g = h / (n_heads / n_kv_heads) and attends over the keys
//   { j : ⌊j/B⌋ in selected[g, i, :] and j <= p_i }
// with softmax(scale · q·kᵀ) in fp32 (fp64 in ref).
//   q:           [n_q, n_heads, head_dim] F32 (normed + RoPE'd)
//   k_pages, v_pages: [n_pages, B, n_kv_heads, head_dim] F32 or BF16 (the same dtype)
//   block_table, positions, n_keys: as in the header
//   selected:    [n_kv_heads, n_q, K] I32 — as produced by msa_index_select (index heads == KV
//                heads): a prefix of >= 1 distinct block ids in [0, ⌊p_i/B⌋], then -1 padding;
//                the slot order does not matter (the result is the same bits for any order)
//   out:         [n_q, n_heads, head_dim] F32
// Each selected page is read as whole contiguous rows. Bitwise independent of n_threads().
void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out);

// Dense causal GQA softmax attention over the same paged layout (the dense layers 0-2 of M3, and
// the baseline MSA is measured against): every block 0..⌊p_i/B⌋ is visible. Same shapes as
// attention_block_sparse without `selected`. Gives the same bits as attention_block_sparse with
// all visible blocks selected.
void attention_dense_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     float scale, Tensor& out);

// ---- msa instrumentation (fp64; for logging / benchmarks, not a hot path) ----
// For query i and group g, with the FULL causal attention of the group's query heads
// (softmax(scale · q·kᵀ) over all keys j <= p_i, in fp64):
//   mass_g(b)     = mean over the group's query heads of the probability of block b's keys
//   true top set  = the min(top_n, nvis) blocks with the largest mass_g (ties: lower id first);
//                   the local block competes like any other
//   recall[g, i]   = |true top set ∩ selected[g, i]| / |true top set|
//   coverage[g, i] = sum of mass_g(b) over the selected blocks (0..1)
//   q, k_pages, block_table, positions, n_keys, selected, scale: as in attention_block_sparse
//   top_n:    >= 1 (the metric uses 16)
//   recall, coverage: [n_kv_heads, n_q] F32 out
// The fast entry point splits (query, group) pairs over threads; each is computed in fp64.
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         float scale, int top_n, Tensor& recall, Tensor& coverage);

// ---- moe ----
// Sigmoid router with a selection-only bias (MiniMax-M2 / M3, spec §4.4):
//   p = sigmoid(logits); sel = top-k of (p + bias), ties -> lower expert id first;
//   weights[e] = p[e] / sum_{sel} p  (unbiased, renormalised), in descending biased-score order.
//   logits: [n, n_experts] F32; bias: [n_experts] F32 or empty;
//   ids: [n, k] I32; weights: [n, k] F32.
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights);

// Softmax router (MiniMax-Text-01 / M1, spec §3.6):
//   p = softmax(logits) over all experts (fp32 fast / fp64 ref); sel = top-k of p, ties -> lower
//   expert id first; weights[e] = p[e] / sum_{sel} p, in descending p order.
//   logits: [n, n_experts] F32; ids: [n, k] I32; weights: [n, k] F32.
void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights);

// ---- lightning attention (linear attention with per-head exponential decay, spec §3.5) ----
// Per head h, with decay λ_h = exp(-slopes[h]) and an fp32 state S_h: [head_dim(k), head_dim(v)]:
//   S_h(t) = λ_h · S_h(t-1) + k_h(t)ᵀ ⊗ v_h(t);     o_h(t) = q_h(t) · S_h(t)
// (the current token is included; no scale, no RoPE — the caller has applied SiLU).
//   qkv:    [n, n_heads, 3, head_dim] F32 — the checkpoint's per-head interleaved fused
//           projection: for head h, q = qkv[t,h,0,:], k = qkv[t,h,1,:], v = qkv[t,h,2,:]
//   slopes: [n_heads] F32 — s_h, already multiplied by the layer factor
//   state:  [n_heads, head_dim, head_dim] F32, in/out: the state before token 0 on entry, after
//           token n-1 on return (all zeros for a fresh sequence; chunked prefill and prefix
//           resume pass the previous call's state)
//   out:    [n, n_heads, head_dim] F32
//   block:  chunk length of the blockwise evaluation (seed 001 §3.1.2, spec §3.5 step 4):
//           intra-block [(Q Kᵀ) ⊙ decay mask] V, inter-block (Q ⊙ λ^(i+1)) S, then
//           S ← λ^m S + (K ⊙ λ^(m-1-j))ᵀ V. block <= 1 runs the token-by-token recurrence
//           (the decode path: O(head_dim²) per token and head, independent of context).
// Any block gives the same result up to fp32 rounding. ref ignores `block` and runs the
// recurrence in fp64 (the definition).
void attention_lightning(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
                         Tensor& out);

// ---- rows ----
// dst[i,:] = src[row_ids[i], :].  src: [n, d] F32; row_ids: [m] I32; dst: [m, d] F32.
void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst);
// dst[row_ids[i], :] += scale[i] * src[i, :], for i in order (deterministic).
//   src: [m, d] F32; row_ids: [m] I32; scale: [m] F32; dst: [n, d] F32.
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst);

// ---- row (one F32 row, e.g. a vocabulary of logits: the sampler's and the trainer's passes) ----
// Raw-pointer passes over x[0, n), n >= 0, so code above ops never needs the backend's vector
// types. Each vector pass has a scalar tail that computes what a lane would: a value never
// depends on where it fell. Always the fast path (Backend does not route these: the sampler's
// oracle is engine/sampler_ref, the trainer's its double path); ops::ref has fp64 twins for the
// shape-grid test (tests/ops/row_test.cpp).
float row_max(const float* x, int64_t n);               // max x[i]; -inf when n == 0
int32_t row_find(const float* x, int64_t n, float v);   // first i with x[i] == v; 0 when none
// w[i] = exp((z[i] - mx) · inv_t) (~2 ulp, see row_exp); returns Σ w in double (per 8-lane block,
// then the tail). w: [n], may not alias z.
double row_exp_sum(const float* z, int64_t n, float mx, float inv_t, float* w);
// Σ over w[i] >= t of w[i], accumulated in float lanes: a sufficiency test, not a result.
double row_sum_at_least(const float* w, int64_t n, float t);
// The min(k, n) largest (z[i], i), ties -> lower i, in one pass (k >= 1). out holds them in heap
// order (its front is the worst kept), not sorted.
void row_top_k(const float* z, int64_t n, int k, std::vector<std::pair<float, int32_t>>& out);
// x[i] = exp(x[i]) in place: a degree-6 polynomial, max rel. error ~2 ulp on [-87, 88]; inputs
// are clamped to [-87.3, 88] (below it gives ~0, above it exp(88) instead of inf).
void row_exp(float* x, int64_t n);

// ---- embedding ----
// out[t,:] = table[ids[t], :] converted to F32. table: [vocab, d] F32/F16/BF16 or a GGUF block
// type (rows decoded as by linear_dequant_rows); ids: [n] I32
// (caller validates range); out: [n, d] F32.
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);

// ---- conversion ----
// out = float(x) elementwise. x: any float dtype (F8E4M3 without scales; NaN codes stay NaN);
// out: same numel, F32. out may alias x only when x is F32 (then nothing happens).
void to_f32(const Tensor& x, Tensor& out);

// out = x encoded in out.dtype, row by row. x: [rows, n] F32 (any ndim >= 1); out: same shape,
// dtype F16 or BF16 (round to nearest even, as f32_to_f16 / f32_to_bf16) or a GGUF block type
// (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; n a multiple of dtype_block). The algorithms are in
// cpu/quantize.cpp; Q8_0 and Q4_0 are bit-identical to llama.cpp's reference quantizer. out may
// not alias x. x is not scanned: non-finite values give unspecified (but memory-safe) output.
// No ref twin: the decoder (ref::linear_at) is the oracle. Bitwise independent of n_threads().
void quantize(const Tensor& x, Tensor& out);

}  // namespace mmx::ops

namespace mmx::ops::ref {
// Same contracts as above; fp64 accumulation; obviously correct, slow.
void matmul(const Tensor& x, const Linear& w, Tensor& y);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y);
void add(Tensor& x, const Tensor& y);
void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out);
void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out);
void silu(Tensor& x);
void mul_sigmoid(Tensor& x, const Tensor& gate);
void scale_add(Tensor& x, float a, const Tensor& y, float b);
void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta);
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out);
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights);
void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights);
void attention_lightning(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
                         Tensor& out);
void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst);
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst);
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
// The row family in fp64 (same contracts; row_top_k returns its k sorted best first).
float row_max(const float* x, int64_t n);
int32_t row_find(const float* x, int64_t n, float v);
double row_exp_sum(const float* z, int64_t n, float mx, float inv_t, float* w);
double row_sum_at_least(const float* w, int64_t n, float t);
void row_top_k(const float* z, int64_t n, int k, std::vector<std::pair<float, int32_t>>& out);
void row_exp(float* x, int64_t n);
// Element (o, i) of W as fp64 (dequantized with the block scale for F8E4M3).
double linear_at(const Linear& w, int64_t o, int64_t i);
// MSA family (same contracts as above; the selection is a full stable sort).
// Same contracts as above; fp64 throughout; obviously correct, slow. The selection is a full
// stable sort of the non-local blocks by (score desc, id asc).
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);
void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out);
void attention_dense_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     float scale, Tensor& out);
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         float scale, int top_n, Tensor& recall, Tensor& coverage);
// The per-block index scores S_g(p_i, b) of msa_index_select, in fp64 (for tests and
// instrumentation): scores[(g * n_q + i) * n_blocks + b] for b < n_blocks, a caller buffer of
// G · n_q · n_blocks doubles; blocks with no visible key (b > ⌊p_i/B⌋) are -inf.
void msa_block_scores(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, int64_t n_blocks, double* scores);
}  // namespace mmx::ops::ref
