// Private declarations of the MSA op family (public contracts: ops/msa.h).
//   * mmx::ops::check::msa_* — argument validation, defined in ops/ops_msa.cpp, shared by the
//     dispatch and by ref/msa.cpp (check.h belongs to the core ops; this family keeps its own);
//   * mmx::ops::cpu::msa_* — the fast CPU implementations (cpu/msa.cpp); they assume valid
//     arguments.
#pragma once

#include <cstdint>

#include "ops/msa.h"

namespace mmx::ops::check {

// The paged layout (k_pages/v_pages or ik_pages, block_table, positions, n_keys); `pages` is
// [n_pages, B, ...]. Range-checks positions and the block table entries that can be read.
void msa_paged(const Tensor& pages, const Tensor& block_table, const Tensor& positions,
               int64_t n_keys, const char* op);
void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, const Tensor& selected);
// `selected` may be a default Tensor (ndim 0: attention_paged, every block visible).
void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     const Tensor& selected, const Tensor& out, const char* op);
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         int top_n, const Tensor& recall, const Tensor& coverage);

}  // namespace mmx::ops::check

namespace mmx::ops::cpu {

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);
// selected.ndim == 0 (a default Tensor) -> dense (attention_paged).
void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, const Tensor& selected,
                     float scale, Tensor& out);
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, const Tensor& selected, float scale, int top_n,
                         Tensor& recall, Tensor& coverage);

}  // namespace mmx::ops::cpu
