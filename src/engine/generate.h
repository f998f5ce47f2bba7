// A single-sequence generation loop: prefill the prompt, then decode one token at a time.
// The continuous-batching engine (serving issue) replaces this for many sequences; the CLI,
// benchmarks and consistency tests use it for one.
#pragma once

#include <functional>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"

namespace mmx {

struct GenerateStats {
  int64_t n_prompt = 0, n_generated = 0;
  double prefill_s = 0, decode_s = 0;
};

// Generates up to n_new tokens after `prompt`. on_token(id) is called per token; returning
// false stops early. Stops after a token the sampler's stop rule names (included in the output).
// Throws mmx::Error for invalid ids or when prompt + n_new exceeds the model's context.
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int n_new,
                              Sampler& sampler, const std::function<bool(int32_t)>& on_token, GenerateStats* stats,
                              int64_t n_valid_vocab = 0);
// n_valid_vocab > 0 restricts sampling to ids [0, n_valid_vocab): embedding/lm_head rows past the
// tokenizer's vocabulary are padding (M2: 200064 rows; spec §6.1) and must never be sampled.

// All-position logits of `ids` [n, vocab], prefilling in chunks of `chunk` tokens (0 = all at
// once) into a fresh cache. Used by `mmx logits` and the chunked == unchunked tests.
Buffer prefill_logits(Model& model, const std::vector<int32_t>& ids, int64_t chunk);

}  // namespace mmx
