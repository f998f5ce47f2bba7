// The model head shared by every family: final RMSNorm of the rows that need logits (the last
// token, or all of them), then the lm_head projection.
#pragma once

#include "ops/ops.h"
#include "tensor/scratch.h"

namespace mmx::layers {

// x: [n_tokens, d_model] residual stream; logits: [all_logits ? n_tokens : 1, vocab] F32.
void lm_head(const Tensor& x, bool all_logits, const Tensor& final_norm, float eps,
             const ops::Linear& lm_head, Scratch& scratch, Tensor& logits);

}  // namespace mmx::layers
