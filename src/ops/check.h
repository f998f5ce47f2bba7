// Private: argument validation shared by the fast entry points (ops.cpp) and the reference
// (ref/*.cpp). Every function MMX_CHECKs the op's documented shapes/dtypes and aborts with the
// offending shapes on a mismatch. Pure bookkeeping: no numerics live here.
#pragma once

#include <cstdint>

#include "ops/ops.h"

namespace mmx::ops::check {

void matmul(const Tensor& x, const Linear& w, const Tensor& y);
void linear(const Linear& w);
void linear_dequant_rows(const Linear& w, int64_t row0, const Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y);
void same_f32(const Tensor& a, const Tensor& b, const char* op);
void rope_neox(const Tensor& x, const Tensor& positions, int rotary_dim);
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       const Tensor& out);
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, const Tensor& ids,
                       const Tensor& weights);
void moe_route_softmax(const Tensor& logits, int k, const Tensor& ids, const Tensor& weights);
void attention_lightning(const Tensor& qkv, const Tensor& slopes, const Tensor& state,
                         const Tensor& out);
void rows_gather(const Tensor& src, const Tensor& row_ids, const Tensor& dst);
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale,
                      const Tensor& dst);
void embedding(const Tensor& table, const Tensor& ids, const Tensor& out);
void to_f32(const Tensor& x, const Tensor& out);
void quantize(const Tensor& x, const Tensor& out);

// The paged layout (k_pages/v_pages or ik_pages, block_table, positions, n_keys); `pages` is
// [n_pages, B, ...]. Range-checks positions and the block table entries that can be read.
void msa_paged(const Tensor& pages, const Tensor& block_table, const Tensor& positions,
               int64_t n_keys, const char* op);
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, const Tensor& selected);
// attention_block_sparse and attention_dense_paged; `selected` may be a default Tensor (ndim 0:
// dense, every block visible).
void paged_attention(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     const Tensor& selected, const Tensor& out, const char* op);
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         int top_n, const Tensor& recall, const Tensor& coverage);

}  // namespace mmx::ops::check
