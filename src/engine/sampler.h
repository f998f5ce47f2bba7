// Sampler: one sequence's logits -> its next token id, with a seeded RNG and the penalties that
// look at the tokens so far. The same rules serve the engine, generate() and the tests.
//
// Order (llama.cpp's and vLLM's): the raw logits get
//   1. logit_bias: bias[id] added (OpenAI: -100..100);
//   2. min_tokens: the stop ids get -inf until min_tokens tokens were generated (vLLM);
//   3. repetition_penalty r (CTRL / HF / vLLM semantics): for every id in the prompt or the output
//      so far, a positive logit is divided by r and a negative one multiplied by r (1 = off);
//   4. presence / frequency penalties (OpenAI semantics, over the generated tokens only):
//      logit[id] -= frequency · count[id] + presence · (count[id] > 0);
// (when min_tokens has masked every id — a vocabulary of stop ids — the raw argmax is taken);
// then temperature == 0 is greedy argmax (ties -> lowest id); otherwise w = exp((z - max) / T),
// top-k (the k largest, ties -> lower id), top-p (the smallest descending prefix with mass >=
// p of what top-k kept), min-p (drop w < min_p · w_max; and w < kMinWeight, a logit more than
// 85·T below the best, is never drawn), and one uniform draw u in [0, Σw)
// walks the kept ids in ascending id order. No step sorts the whole vocabulary: top-k and top-p
// select with nth_element over a growing prefix, and only the kept candidates are sorted.
// sampler_ref.h is the fp64 reference of exactly these rules (full sort, no shortcuts).
//
// A TokenConstraint (structured output), when set, masks after step 4: ids it refuses get -inf
// before the temperature, and it is told every drawn id.
//
// Logprobs (raw_logprobs below) are the log-softmax of the raw logits: the distribution before
// penalties, temperature and filters, as OpenAI and vLLM report them by default.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/token_constraint.h"

namespace mmx {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
  float presence_penalty = 0.0f;    // -2..2 (OpenAI)
  float frequency_penalty = 0.0f;   // -2..2 (OpenAI)
  float repetition_penalty = 1.0f;  // > 0, 1 = off (HF / vLLM)
  std::vector<std::pair<int32_t, float>> logit_bias;  // (id, bias in -100..100)
  int64_t min_tokens = 0;           // stop ids are masked until this many were generated
};

// What the penalties and min_tokens look at: the tokens so far. Kept only where a penalty needs it.
class SamplerState {
 public:
  SamplerState(const SamplingParams& p, std::span<const int32_t> prompt);
  void accept(int32_t tok);  // one generated token
  int64_t n_generated() const { return n_generated_; }
  const std::unordered_map<int32_t, int32_t>& output_counts() const { return counts_; }  // presence/frequency
  const std::unordered_set<int32_t>& seen() const { return seen_; }  // prompt + output (repetition)

 private:
  bool track_counts_, track_seen_;
  int64_t n_generated_ = 0;
  std::unordered_map<int32_t, int32_t> counts_;
  std::unordered_set<int32_t> seen_;
};

class Sampler {
 public:
  // Throws mmx::Error on invalid parameters. `prompt` seeds the repetition penalty; `stop_ids` are
  // the ids that end the sequence (what min_tokens masks, and what stops() answers).
  explicit Sampler(const SamplingParams& p, std::span<const int32_t> prompt = {}, std::vector<int32_t> stop_ids = {});
  // logits: [n_vocab] F32, raw. Draws, records the token (penalties), returns it.
  int32_t sample(const float* logits, int64_t n_vocab);
  // The token the rules above give for the uniform u in [0, 1) — no draw, nothing recorded.
  int32_t pick(const float* logits, int64_t n_vocab, double u);
  // Constrains every later draw; max_tokens: the sequence's budget (the constraint steers the
  // reply to finish within it).
  void constrain(std::unique_ptr<TokenConstraint> c, int64_t max_tokens);
  bool constrained() const { return constraint_ != nullptr; }
  // The one stop rule: true when `tok` ends the sequence.
  bool stops(int32_t tok) const;
  const SamplingParams& params() const { return p_; }
  const SamplerState& state() const { return state_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

 private:
  const float* adjusted(const float* logits, int64_t n);  // steps 1-4 (logits itself when none apply)
  SamplingParams p_;
  std::vector<int32_t> stop_ids_;
  SamplerState state_;
  std::mt19937_64 rng_;
  std::vector<float> work_, w_;                  // reused: no allocation per step
  std::vector<double> blocks_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::unique_ptr<TokenConstraint> constraint_;
  int64_t max_tokens_ = 0;
};

int32_t argmax(const float* logits, int64_t n);  // ties -> lowest id

// The log-softmax of the raw logits over [0, n) at `tok`, and the `top` most likely ids with
// theirs (descending; ties -> lower id). The engine reports these with every emitted token.
struct RawLogprobs {
  float token = 0;
  std::vector<std::pair<int32_t, float>> top;
};
RawLogprobs raw_logprobs(const float* logits, int64_t n, int32_t tok, int top);

// Weights below this are never drawn (e^-85: the vector exp's floor is e^-87.3, and a masked
// -inf logit must stay impossible).
inline constexpr float kMinWeight = 1e-37f;

// Throws mmx::Error naming the first invalid field (the engine and the server share this).
void validate_sampling(const SamplingParams& p);

}  // namespace mmx
