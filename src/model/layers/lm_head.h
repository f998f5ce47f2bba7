// The model head shared by every family: final RMSNorm of the rows that need logits (every row,
// or the last n_logits rows of each sequence), then the lm_head projection.
#pragma once

#include <span>

#include "model/forward_batch.h"
#include "ops/ops.h"
#include "tensor/scratch.h"

namespace mmx::layers {

// x: [n_rows, d_model] residual stream.
// all_logits: logits [n_rows, vocab] F32 for every row; else [logit_rows(seqs), vocab] laid out as
// Model::forward_multi's: the last n_logits rows of each seq in order (only those rows are normed
// and projected; one NaN row for a seq whose n_logits is 0). hidden (optional): the same rows of
// the normed hidden state, [rows, d_model].
void lm_head(const Tensor& x, std::span<const SeqChunk> seqs, bool all_logits, const Tensor& final_norm,
             float eps, const ops::Linear& lm_head, Scratch& scratch, Tensor& logits, Tensor* hidden = nullptr);

}  // namespace mmx::layers
