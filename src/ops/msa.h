// The MSA op family (MiniMax Sparse Attention, spec §5.6): the lightning indexer's block
// selection, block-sparse attention and dense attention over a block-major paged KV cache, and an
// fp64 instrumentation helper (selection recall / attention-mass coverage).
//
// Same conventions as ops.h (F32 activations, contiguous row-major, outputs preallocated by the
// caller, no aliasing, shape/dtype/range errors -> MMX_CHECK). mmx::ops::ref::<op> is the naive
// fp64 oracle with the same signature.
//
// Block-major paged KV layout (seed 003 §2.1, spec §5.6 "KV layout hints"): a page holds one
// block of B consecutive tokens of one sequence, all KV heads, so one selected block is one
// contiguous piece of memory:
//   k_pages, v_pages: [n_pages, B, n_kv_heads, head_dim] F32 or BF16 (both the same dtype)
//   ik_pages:         [n_pages, B, index_dim] F32 or BF16 — the indexer's key (one per token,
//                     shared by all index heads; post-norm, post-RoPE)
// Pages may be F32 or BF16 (the KV cache's storage dtype, memory/page_store.h); a BF16 value is
// widened to fp32 exactly on load (fp64 in ref), so BF16 pages give the result of F32 pages
// holding the same (rounded) values. Everything else stays F32.
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
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace mmx::ops {

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
//   ik_pages:  [n_pages, B, index_dim] F32 or BF16
//   block_table, positions, n_keys: as in the header
//   selected:  [G, n_q, K] I32 out — K = selected.dim(2) >= 1; per (g, i) min(nvis, K) valid
//              block ids as a prefix (the local block in the LAST valid slot), then -1 padding.
// Scores are fp32 dots with FMA in the fast path (fp64 in ref): blocks whose scores differ by
// less than ~1e-6 relative may rank differently from the reference (docs/numerics.md, "MSA").
// Exactly equal fp32 scores resolve deterministically (lower block id first). Inputs must be
// finite. The result is bitwise independent of n_threads().
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);

// ---- attention over paged KV ----
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
void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
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

}  // namespace mmx::ops

namespace mmx::ops::ref {
// Same contracts as above; fp64 throughout; obviously correct, slow. The selection is a full
// stable sort of the non-local blocks by (score desc, id asc).
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);
void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out);
void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
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
