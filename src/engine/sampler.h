// Sampler: logits -> one token id, with a per-request seeded RNG.
//
// Order of filters (as llama.cpp and vLLM apply them): temperature == 0 is greedy argmax (ties ->
// lowest id); otherwise softmax(logits / T), then top-k, then top-p (smallest prefix of the
// descending distribution with mass >= p), then min-p (drop tokens with p < min_p · p_max),
// renormalise and draw.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mmx {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);  // throws mmx::Error on invalid parameters
  // logits: [n_vocab] F32.
  int32_t sample(const float* logits, int64_t n_vocab);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // reused: no allocation per step
};

int32_t argmax(const float* logits, int64_t n);  // ties -> lowest id

}  // namespace mmx
