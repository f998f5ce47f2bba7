// ForwardBatch: the ONLY input a model sees (DESIGN rule 2) — never a Request.
//
// Foundation stage: one sequence whose new tokens sit at consecutive positions starting at the
// cache's n_past(). The serving issue extends this with per-sequence metadata and block tables.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace mmx {

struct ForwardBatch {
  Tensor tokens;     // [n_tokens] I32, validated to lie in [0, vocab_size)
  Tensor positions;  // [n_tokens] I32, absolute positions pos0, pos0+1, ...
  int64_t pos0 = 0;  // position of tokens[0]; equals the KV cache's n_past()
  bool all_logits = false;  // true: logits for every token; false: only the last one

  int64_t n_tokens() const { return tokens.dim(0); }
  int64_t n_logit_rows() const { return all_logits ? n_tokens() : 1; }
};

}  // namespace mmx
