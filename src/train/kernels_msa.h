// Training kernels of MiniMax-M3 (spec §5) that train/kernels.h lacks: per-head QK RMSNorm,
// SwiGLU-OAI, and MiniMax Sparse Attention (MSA, §5.6) for one sequence: the lightning-indexer
// scores, the block selection, the block-sparse attention given that selection, and the indexer
// KL loss exactly as reference/torch_models.py defines it (module doc "MSA indexer auxiliary
// loss"). Every kernel has a naive fp64 twin in train/ref_msa.h or ops/ref/f64.h (the per-head
// norm and SwiGLU-OAI forwards); tests/train/kernels_msa_test.cpp
// compares both instantiations with it and the ref backward passes with finite differences.
//
// Conventions: those of kernels.h (row-major, backward ACCUMULATES, thread-count invariant).
// MSA shapes, one sequence of t rows (the packed row index is the key index):
//   pos: [t] the rows' positions, or null = 0..t−1. A key's block is pos[j] / B — its block in
//        its own sequence — so a prefix tree packed in DFS order (positions = depth) selects,
//        for each token, exactly the blocks its sequence run alone would (rl/tree.h).
//   G = number of index heads = KV heads (one selection per GQA group); B = block size;
//   K = top-k blocks per query INCLUDING the local block; di = index head dim.
//   vis: the base visibility (train/visibility.h: causal, a dense [t, t] uint8 mask with
//        vis[i*t + j] = 1 when query i may see key j, j <= i, diagonal set; or tree parents).
//   sel: [G, t, K] int32 selected block ids of each (group, query): the non-local blocks in
//        (score desc, id asc) order, then the local block pos[i] / B, then -1 padding.
//   allowed(g, i) = { j : vis(i, j) and pos[j] / B is in sel[g, i, :] } — the keys of the attention.
#pragma once

#include <cstdint>

#include "train/visibility.h"

namespace mmx::train {

// ---- per-head RMSNorm (qk_norm_type "per_head") ----
// Each [d] vector of x [n, n_heads, d] is normalised on its own, one gain w [d] for all heads:
// y = x · r · w, rstd [n, n_heads] (saved r). (Gemma gains: the caller passes 1 + w.)
template <class T>
void rms_norm_heads_fwd(const T* x, const T* w, int64_t n, int n_heads, int64_t d, double eps, T* y, T* rstd);
// dx += ...; dw += Σ over rows and heads (dw may be null).
template <class T>
void rms_norm_heads_bwd(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int n_heads, int64_t d, T* dx,
                        T* dw);

// ---- SwiGLU-OAI (spec §5.7, non-interleaved) ----
// a = (u' + 1) · g' · σ(alpha · g'),  g' = min(g, limit),  u' = clamp(u, −limit, limit).
// g, u, a: [n].
template <class T>
void swiglu_oai_fwd(const T* g, const T* u, int64_t n, double alpha, double limit, T* a);
// dg, du += the gradients; 0 where clamped, passed at the limit itself (g == limit, |u| == limit),
// as torch's autograd of clamp (the mask is `x <= max`, `x >= min`).
template <class T>
void swiglu_oai_bwd(const T* da, const T* g, const T* u, int64_t n, double alpha, double limit, T* dg, T* du);

// ---- MSA: indexer scores ----
// z[g, i, j] = iq[i, g, :] · ik[j, :] for every (i, j) (no scale, no mask; the selection masks).
//   iq: [t, G, di]; ik: [t, di]; z: [G, t, t].
template <class T>
void msa_index_scores(const T* iq, const T* ik, int64_t t, int G, int di, T* z);
// diq[i, g, :] += Σ_j dz[g, i, j] ik[j, :];  dik[j, :] += Σ_{g,i} dz[g, i, j] iq[i, g, :].
template <class T>
void msa_index_scores_bwd(const T* dz, const T* iq, const T* ik, int64_t t, int G, int di, T* diq, T* dik);

// ---- MSA: block selection (not differentiated) ----
// Blocks the positions span: max(pos) / B + 1 (pos null: ceil(t / B)).
int64_t msa_n_blocks(const int32_t* pos, int64_t t, int block);
// Per (g, i): block max S(b) = max over visible keys j of block b of z[g, i, j] (no visible key:
// −inf); candidates = blocks b < pos[i] / B with a finite S(b); if at most K − 1 candidates all of
// them, else the K − 1 best by (S desc, block id asc); then the local block. sel: [G, t, K].
template <class T>
void msa_select(const T* z, SeqVis vis, const int32_t* pos, int64_t t, int G, int block, int K, int32_t* sel);

// allowed: [G, t, t] = 1 where key j is in allowed(g, i) (the mask the attention and the KL use).
void msa_allowed(SeqVis vis, const int32_t* pos, const int32_t* sel, int64_t t, int G, int block, int K,
                 uint8_t* allowed);

// ---- MSA: block-sparse attention given the selection ----
// Softmax attention of query head h (group g = h / (n_heads / G)) over allowed(g, i), scale
// `scale`. q: [t, n_heads, hd]; k, v: [t, G, hd]; out: [t, n_heads, hd]; p: [n_heads, t, t]
// saved probabilities, exactly 0 outside allowed(g, i).
template <class T>
void msa_attention_fwd(const T* q, const T* k, const T* v, SeqVis vis, const int32_t* pos, const int32_t* sel,
                       int64_t t, int n_heads, int G, int hd, int block, int K, double scale, T* out, T* p);
// dq, dk, dv += the gradients of out (the selection is a constant; p carries the sparsity).
template <class T>
void msa_attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* p, int64_t t, int n_heads,
                       int G, int hd, double scale, T* dq, T* dk, T* dv);

// ---- MSA: indexer KL loss (teacher detached) ----
// For each group g and query row i with rows[i] != 0 (rows null = every row):
//   teacher_j = mean over the n_heads / G query heads of group g of p[h, i, j] (p from
//               msa_attention_fwd, a constant here);
//   student   = softmax over allowed(g, i) of zscale · z[g, i, j];
//   KL_gi     = Σ_{j allowed} teacher_j (log teacher_j − log student_j)   (0 · log 0 = 0).
// Returns Σ_{g,i} KL_gi (accumulated in double). When dz is non-null it ACCUMULATES
// dz[g, i, j] += grad_scale · zscale · (student_j − teacher_j) over allowed j of counted rows.
template <class T>
double msa_index_kl(const T* z, const T* p, SeqVis vis, const int32_t* pos, const int32_t* sel, const uint8_t* rows,
                    int64_t t, int n_heads, int G, int block, int K, double zscale, double grad_scale, T* dz);

}  // namespace mmx::train
