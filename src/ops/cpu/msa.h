// Private declarations of the paged-attention / MSA op family (public contracts: ops/ops.h).
//   * mmx::ops::cpu::msa_* — the fast CPU implementations (cpu/msa.cpp; paged_attention in
//     cpu/paged_attention.cpp); they assume valid arguments.
#pragma once

#include <cstdint>

#include "ops/ops.h"

namespace mmx::ops::cpu {

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected);
// selected.ndim == 0 (a default Tensor) -> dense (attention_dense_paged).
void paged_attention(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, const Tensor& selected,
                     float scale, Tensor& out);
void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, const Tensor& selected, float scale, int top_n,
                         Tensor& recall, Tensor& coverage);

}  // namespace mmx::ops::cpu
