// Training kernels of MiniMax-Text-01 / M1 (spec §3.5, §3.6) beside kernels.h's: lightning
// attention, SiLU, the sigmoid output gate and the softmax top-k router. Same conventions
// (float / double, backward accumulates +=, thread-count invariant); naive fp64 twins in
// ref_lightning.h and (SiLU, output gate, softmax router forwards) ops/ref/f64.h.
//
// Lightning attention is evaluated in its one-block (quadratic) form over a training sequence:
//   o_i = Σ_j vis_ij · λ_h^(p_i − p_j) · (q_i·k_j) · v_j,     λ_h = exp(−slope_h),  p_i ≥ p_j
// which for the causal mask and positions 0..t−1 is exactly the recurrence S ← λS + kᵀ⊗v,
// o = q·S of the inference path (spec §3.5.4: any block length, the whole sequence included,
// gives the same math; tests compare with the fp64 recurrence). It costs O(t²·hd) per head like
// softmax attention, and it takes a visibility mask (tree packing).
//
// lightning_block_fwd/bwd are the same math blockwise through the decayed state (spec §3.5 step 4,
// the inference prefill's form), for causal sequences at consecutive positions (no mask): O(t·B·hd
// + t·hd²) per head instead of O(t²·hd), and they keep one [hd, hd] state per block instead of the
// [t, t] scores. The backward runs the blocks in reverse with dS_b = λ^B dS_{b+1} + (diag(λ^r)Q_b)ᵀ dO_b.
// The training graph uses them whenever a batch has no visibility mask and default positions.
#pragma once

#include <cstdint>

#include "train/visibility.h"

namespace mmx::train {

// qkv: [t, n_heads, 3, hd] (after SiLU; per head q | k | v, the checkpoint's interleaving);
// slopes: [n_heads]; pos: [t]; vis: train/visibility.h (causal, dense [t, t] or tree); out: [t, n_heads, hd];
// a: [n_heads, t, t] saved (q_i·k_j)·decay_ij (0 where invisible).
template <class T>
void lightning_fwd(const T* qkv, const double* slopes, const int32_t* pos, SeqVis vis, int64_t t,
                   int n_heads, int hd, T* out, T* a);
// dqkv += d out / d qkv (same layout as qkv).
template <class T>
void lightning_bwd(const T* dout, const T* qkv, const double* slopes, const int32_t* pos, SeqVis vis,
                   const T* a, int64_t t, int n_heads, int hd, T* dqkv);

// Blocks of a t-token sequence: ceil(t / block).
inline int64_t lightning_n_blocks(int64_t t, int block) { return (t + block - 1) / block; }
// qkv, slopes, out as lightning_fwd, causal over positions 0..t−1; block >= 1;
// states: [n_heads, n_blocks, hd, hd] saved S_b (the state entering block b; S_0 = 0).
template <class T>
void lightning_block_fwd(const T* qkv, const double* slopes, int64_t t, int n_heads, int hd, int block, T* out,
                         T* states);
// dqkv += d out / d qkv, from the saved states.
template <class T>
void lightning_block_bwd(const T* dout, const T* qkv, const double* slopes, const T* states, int64_t t, int n_heads,
                         int hd, int block, T* dqkv);

// y = x·σ(x); dx += dy·σ(x)(1 + x(1 − σ(x))).  [n]
template <class T>
void silu_fwd(const T* x, int64_t n, T* y);
template <class T>
void silu_bwd(const T* dy, const T* x, int64_t n, T* dx);

// y = a·σ(g); da += dy·σ(g); dg += dy·a·σ(g)(1 − σ(g)).  [n]
template <class T>
void mul_sigmoid_fwd(const T* a, const T* g, int64_t n, T* y);
template <class T>
void mul_sigmoid_bwd(const T* dy, const T* a, const T* g, int64_t n, T* da, T* dg);

// Softmax router (Text-01 / M1, ops.h moe_route_softmax): p = softmax(logits) over all experts;
// ids = top-k of p (ties: lower id), in descending p order; w = p_sel / Σ p_sel.
//   logits, p: [n, E]; ids, w: [n, k].
template <class T>
void router_softmax_fwd(const T* logits, int64_t n, int n_experts, int k, int32_t* ids, T* w, T* p);
// dlogits += (dw through w = p_sel/Σp_sel, then through the softmax over all experts).
template <class T>
void router_softmax_bwd(const T* dw, const int32_t* ids, const T* w, const T* p, int64_t n, int n_experts, int k,
                        T* dlogits);

}  // namespace mmx::train
