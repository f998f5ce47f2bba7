// ForwardBatch: the ONLY input a model sees (DESIGN rule 2) — never a Request.
//
// Model::forward takes one sequence whose new tokens sit at consecutive positions starting at the
// cache's n_past(). Model::forward_multi takes several sequences' tokens concatenated, each
// sequence's share described by a SeqChunk (continuous batching: one pass over the weights per
// engine step, whatever the number of sequences).
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace mmx {

class KvCache;

struct ForwardBatch {
  Tensor tokens;     // [n_tokens] I32, validated to lie in [0, vocab_size)
  Tensor positions;  // [n_tokens] I32, absolute positions pos0, pos0+1, ...
  int64_t pos0 = 0;  // position of tokens[0]; equals the KV cache's n_past()
  bool all_logits = false;  // true: logits for every token; false: only the last one

  int64_t n_tokens() const { return tokens.dim(0); }
  int64_t n_logit_rows() const { return all_logits ? n_tokens() : 1; }
};

// One sequence's share of a fused forward: rows [begin, begin + n) of the concatenated tokens,
// at positions kv->n_past() .. + n - 1, appended to *kv.
struct SeqChunk {
  int64_t begin = 0, n = 0;
  KvCache* kv = nullptr;
  // How many of the chunk's LAST rows get logits (and hidden rows), in order: 1 (a next token is
  // sampled), up to n (speculative verification: a drafted chunk of K tokens after the last
  // accepted one gives K + 1 rows), or 0 (a prompt chunk that does not reach the end of the
  // prompt: the lm_head skips it and its one row is filled with NaN).
  int64_t n_logits = 1;
};

// Rows a chunk takes in forward_multi's logits: its n_logits, or the one NaN row when 0.
inline int64_t logit_rows(const SeqChunk& c) { return c.n_logits > 0 ? c.n_logits : 1; }
inline int64_t logit_rows(std::span<const SeqChunk> chunks) {
  int64_t n = 0;
  for (const SeqChunk& c : chunks) n += logit_rows(c);
  return n;
}

// What the layers see of a forward (fused or single-sequence): row-wise work (projections, norms,
// RoPE, FFN) runs over all rows at once; attention loops over `seqs`, each against its own cache.
// A chunk's first position is its kv->n_past(): caches are advanced only after the last layer.
struct SeqRows {
  Tensor positions;               // [n_rows] I32: chunk c's rows at c.kv->n_past() + 0, 1, ...
  std::span<const SeqChunk> seqs;  // tile rows [0, n_rows) in order, each n >= 1, distinct caches
};

}  // namespace mmx
