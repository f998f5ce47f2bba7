// The model head shared by every family: final RMSNorm of the rows that need logits (every row,
// or the last row of each sequence), then the lm_head projection.
#pragma once

#include <span>

#include "model/forward_batch.h"
#include "ops/ops.h"
#include "tensor/scratch.h"

namespace mmx::layers {

// x: [n_rows, d_model] residual stream.
// all_logits: logits [n_rows, vocab] F32 for every row; else [seqs.size(), vocab], row i for the
// last row of seqs[i] (only those rows are normed and projected; NaN for a seq whose logits flag
// is false).
void lm_head(const Tensor& x, std::span<const SeqChunk> seqs, bool all_logits, const Tensor& final_norm,
             float eps, const ops::Linear& lm_head, Scratch& scratch, Tensor& logits);

}  // namespace mmx::layers
