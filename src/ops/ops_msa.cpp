// mmx::ops::* entry points of the paged-attention / MSA family (ops.h): validate arguments
// (check.h), pick the implementation (ref when use_ref()), call it.
//
// Not here: any arithmetic.
#include <fmt/format.h>

#include <initializer_list>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/msa.h"
#include "ops/ops.h"

namespace mmx::ops {


void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected) {
  check::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
  if (selected.numel() == 0) return;
  if (use_ref())
    return ref::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
  cpu::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
}

void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out) {
  MMX_CHECK(selected.ndim == 3, "attention_block_sparse: selected {}", selected.shape_str());
  check::paged_attention(q, k_pages, v_pages, block_table, positions, n_keys, selected, out,
                         "attention_block_sparse");
  if (out.numel() == 0) return;
  if (use_ref())
    return ref::attention_block_sparse(q, k_pages, v_pages, block_table, positions, n_keys,
                                       selected, scale, out);
  cpu::paged_attention(q, k_pages, v_pages, block_table, positions, selected, scale, out);
}

void attention_dense_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     float scale, Tensor& out) {
  check::paged_attention(q, k_pages, v_pages, block_table, positions, n_keys, Tensor(), out,
                         "attention_dense_paged");
  if (out.numel() == 0) return;
  if (use_ref())
    return ref::attention_dense_paged(q, k_pages, v_pages, block_table, positions, n_keys, scale, out);
  cpu::paged_attention(q, k_pages, v_pages, block_table, positions, Tensor(), scale, out);
}

void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         float scale, int top_n, Tensor& recall, Tensor& coverage) {
  check::msa_selection_stats(q, k_pages, block_table, positions, n_keys, selected, top_n, recall,
                             coverage);
  if (recall.numel() == 0) return;
  if (use_ref())
    return ref::msa_selection_stats(q, k_pages, block_table, positions, n_keys, selected, scale,
                                    top_n, recall, coverage);
  cpu::msa_selection_stats(q, k_pages, block_table, positions, selected, scale, top_n, recall,
                           coverage);
}

}  // namespace mmx::ops
