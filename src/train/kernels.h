// Training kernels: the forward ops of the three families again, with what the backward needs
// saved, and their backward passes. T is float (training) or double (the fp64 gradient path that
// is compared with PyTorch to 1e-8 and with finite differences).
//
// Why not ops::? The inference ops take F32 Tensors and write F32: a double model gradient is
// impossible through them. These kernels work on raw row-major spans, templated on T; every one
// has a naive double twin: the forward in ops/ref/f64.h (the one fp64 forward oracle, shared with
// ops::ref), the backward in train/ref.h. tests/train/kernels_test.cpp compares both
// instantiations with them over a shape grid, and the ref backward with central finite
// differences of the f64 forward. These kernels never call the oracle.
// tests/train/graph_test.cpp checks that a whole training forward gives the same logits as the
// inference Model::forward.
//
// Conventions (all kernels):
//   * row-major, contiguous, shapes outermost first; n = rows (tokens);
//   * backward kernels ACCUMULATE (+=) into every gradient they write (dx, dw): the caller zeroes;
//   * results do not depend on the thread count (no reductions split across threads).
#pragma once

#include <cstdint>

#include "train/visibility.h"

namespace mmx::train {

// Threads of the training kernels (OpenMP) and of OpenBLAS; 0 = all cores. Also sets the
// inference ops' count (ops::set_n_threads).
void set_n_threads(int n);

// x = exp(x) elementwise: float through the SIMD polynomial (~2 ulp), double through libm.
void vexp(float* x, int64_t n);
void vexp(double* x, int64_t n);

// FLOPs (2 per multiply-add) of every GEMM since the last reset — for `mmx bench train`.
double gemm_flops();
void reset_gemm_flops();

// ---- gemm (OpenBLAS) ----
// C[M,N] = alpha · op(A) · op(B) + beta · C, op(A) = A [M,K] or Aᵀ with A [K,M] (ta);
// op(B) = B [K,N] or Bᵀ with B [N,K] (tb).
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B, T beta, T* C);

// y[n,out] = x[n,in] · Wᵀ, W: [out,in].
template <class T>
void linear_fwd(const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* y);
// dx[n,in] += dy[n,out] · W;  dw[out,in] += dyᵀ · x. dx may be null (input needs no gradient).
template <class T>
void linear_bwd(const T* dy, const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* dx, T* dw);

// ---- embedding ----
// out[t,:] = table[ids[t],:]. table: [vocab, d]; ids: [n] (validated by the caller).
template <class T>
void embedding_fwd(const T* table, const int32_t* ids, int64_t n, int64_t d, T* out);
// dtable[ids[t],:] += dout[t,:], in token order.
template <class T>
void embedding_bwd(const T* dout, const int32_t* ids, int64_t n, int64_t d, T* dtable);

// ---- RMSNorm ----
// y = x · r · w, r = 1/sqrt(mean(x²) + eps) per row. x, y: [n, d]; w: [d]; rstd: [n] (saved r).
template <class T>
void rms_norm_fwd(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y, T* rstd);
// dx += r·(dy⊙w) − x·r³/d·Σ(dy⊙w⊙x);  dw += Σ_t dy⊙x·r. dw may be null.
template <class T>
void rms_norm_bwd(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int64_t d, T* dx, T* dw);

// ---- RoPE ----
// Partial NeoX rotation of the first `rotary` channels of each head, in place (the ops.h
// rope_neox math, angles in double). inverse: rotate by −angle — the backward of the forward.
//   x: [n, n_heads, head_dim]; pos: [n].
template <class T>
void rope(T* x, const int32_t* pos, int64_t n, int n_heads, int head_dim, int rotary, double theta, bool inverse);

// ---- softmax attention with a visibility predicate, one sequence ----
//   q: [t, n_heads, hd]; k, v: [t, n_kv, hd]; out: [t, n_heads, hd];
//   vis: which keys each query sees (train/visibility.h: causal, a dense [t, t] mask with
//        vis[i*t + j] = 1 when query i may see key j and i sees itself, or tree parents). p: [n_heads, t, t] saved probabilities (0 where invisible), or
//        null: not saved (activation recomputation: the backward is attention_bwd_recompute).
// Query head h reads KV head h / (n_heads / n_kv).
template <class T>
void attention_fwd(const T* q, const T* k, const T* v, SeqVis vis, int64_t t, int n_heads, int n_kv,
                   int hd, double scale, T* out, T* p);
// dq, dk, dv += the gradients of out w.r.t. q, k, v (same shapes as q, k, v).
template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* p, int64_t t, int n_heads,
                   int n_kv, int hd, double scale, T* dq, T* dk, T* dv);
// The same from q, k and vis alone: each head's probabilities are recomputed (bit for bit the
// forward's) into [t, t] scratch per thread, so a layer keeps O(t) instead of [n_heads, t, t].
template <class T>
void attention_bwd_recompute(const T* dout, const T* q, const T* k, const T* v, SeqVis vis, int64_t t,
                             int n_heads, int n_kv, int hd, double scale, T* dq, T* dk, T* dv);

// ---- the same attention over visibility intervals (masked batches: prefix trees, dense masks) ----
// kernels_attention_iv.cpp: tiles of 32 query rows, each over the union of its rows' visible key
// intervals (SeqVis::intervals) only, so the work is ≈ the visible pairs and no [t, t] array
// exists: memory O(32 · t) per thread. lse: [n_heads, t] saved log Σ_j exp(s_ij) of each row; the
// backward recomputes P from it. Same math as attention_fwd/bwd (tests compare both with the fp64
// oracle); the training graph uses it for every batch with a mask.
template <class T>
void attention_iv_fwd(const T* q, const T* k, const T* v, SeqVis vis, int64_t t, int n_heads, int n_kv, int hd,
                      double scale, T* out, T* lse);
// dq, dk, dv += the gradients (as attention_bwd), from q, k, v, vis and the forward's lse.
template <class T>
void attention_iv_bwd(const T* dout, const T* q, const T* k, const T* v, SeqVis vis, const T* lse, int64_t t,
                      int n_heads, int n_kv, int hd, double scale, T* dq, T* dk, T* dv);

// ---- gated activations ----
// a = silu(g)·u.  g, u, a: [n]
template <class T>
void glu_silu_fwd(const T* g, const T* u, int64_t n, T* a);
template <class T>
void glu_silu_bwd(const T* da, const T* g, const T* u, int64_t n, T* dg, T* du);

// ---- routers ----
// Sigmoid router with a selection-only bias (M2/M3, ops.h moe_route_sigmoid): p = sigmoid(logits);
// ids = top-k of p + bias (ties: lower id), in descending biased order; w = p_sel / Σ p_sel.
//   logits: [n, E]; bias: [E] or null; ids, w: [n, k]; p: [n, E] saved sigmoid.
template <class T>
void router_sigmoid_fwd(const T* logits, const T* bias, int64_t n, int n_experts, int k, int32_t* ids, T* w, T* p);
// dlogits += d(w)/d(logits)ᵀ dw; the selection is not differentiated (and the bias gets none).
template <class T>
void router_sigmoid_bwd(const T* dw, const int32_t* ids, const T* w, const T* p, int64_t n, int n_experts, int k,
                        T* dlogits);

// The loss (cross-entropy, the weighted log-likelihood) is the separate loss step: train/loss.h.

}  // namespace mmx::train
