// Rollouts from our own engine, in-process, through EngineApi (engine/engine_api.h): sampled
// completions with the log-probability of every completion id, G samples per prompt, and the
// trainer's new weights pushed into the live engine after each update.
//
//   Rollouts::run   submits every sample of every prompt at once (up to the engine's queue), so
//                   the engine batches them; a group's G samples share one prompt, so the
//                   scheduler computes it once and the others map its pages from the prefix
//                   cache (Rollout::n_cached, RolloutStats::cached_tokens say how many tokens).
//   push_weights    a train::ParamSet (the trainer's parameters under checkpoint names) ->
//                   EngineApi::update_weights: the engine pauses between two steps, takes the
//                   values in its storage dtype, and drops its prefix cache (stale K/V).
//
// Which distribution the log-probs are of (docs/rl.md "Rollouts"): Rollout::logprobs[t] is
// log π_old(completion[t] | prompt, completion[<t]) under the RAW model distribution: the
// log-softmax of the unmodified logits (temperature 1, no top-k / top-p / min-p, no penalties or
// bias), in fp64 from the engine's F32 logits — the same quantity the trainer recomputes as
// log π_θ (train::Graph::forward's target_logp). The ids are drawn from the distribution
// RolloutRequest::sampling defines; it is the raw one by default (SamplingParams{}: T = 1, no
// filters), and only then is r = π_θ / π_old the true importance ratio. With another temperature
// or a filter the draws come from q ≠ π_old: the ratio then misses the factor π_old / q (top-p
// also draws only ids q keeps), so keep the defaults for RL (samples_raw_policy() tells).
//
// Not here: rewards, advantages, objectives (rl/objective.h), the packer (rl/tree.h), text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "train/params.h"

namespace mmx::rl {

struct RolloutRequest {
  std::vector<int32_t> prompt;    // >= 1 id
  int group = 1;                  // G samples of this prompt (>= 1)
  SamplingParams sampling;        // its seed is ignored: sample g draws with sample_seed(seed, g)
  int64_t max_tokens = 16;        // per sample (the engine also stops at its context)
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // end a sample (emitted, then "stop"); the model's eos also do
  bool ignore_eos = false;        // the engine's eos ids do not stop (only stop_ids do)
};

struct Rollout {
  int32_t prompt_index = 0;           // into the requests given to run()
  int32_t sample_index = 0;           // g in [0, group)
  std::vector<int32_t> prompt;        // the request's
  std::vector<int32_t> completion;    // the sampled ids (a stop id included), >= 1
  std::vector<double> logprobs;       // [completion.size()] log π_old of each id, raw softmax (above)
  std::string finish_reason;          // "stop" (a stop id or eos) or "length"
  int64_t n_cached = 0;               // prompt tokens the engine served from its prefix cache
};

struct RolloutStats {
  int64_t samples = 0;
  int64_t prompt_tokens = 0;     // Σ prompt lengths over the samples
  int64_t cached_tokens = 0;     // Σ Rollout::n_cached: prompt tokens not recomputed
  int64_t generated_tokens = 0;  // Σ completion lengths
  double wall_s = 0;
};

// The seed of sample g of a request with `seed` (splitmix64 of both: distinct per sample).
uint64_t sample_seed(uint64_t seed, int g);

// True when `p` draws from the raw model distribution whose log-probs Rollout reports (T = 1, no
// top-k / top-p / min-p, no penalties, no bias): only then are the log-probs those of the
// sampling distribution.
bool samples_raw_policy(const SamplingParams& p);

class Rollouts {
 public:
  // The engine must step on its own thread (an Engine with start_thread, as `mmx serve` builds
  // it): run() waits for its events.
  explicit Rollouts(EngineApi& engine) : engine_(engine) {}
  // Every sample of every request, ordered by request, then sample. Reproducible: the same
  // requests on the same weights give the same ids and log-probs (the engine's sampled streams do
  // not depend on what else is batched). Throws mmx::Error for an invalid request or an engine
  // refusal (the engine's message), after cancelling what it submitted.
  std::vector<Rollout> run(const std::vector<RolloutRequest>& requests);
  const RolloutStats& last_stats() const { return stats_; }

 private:
  EngineApi& engine_;
  RolloutStats stats_;
};

// The trainer's parameters as a weight push (views into P.value: valid while P lives unchanged).
std::vector<TensorValues> tensor_values(const train::ParamSet<float>& P);
// Pushes every tensor of P into the live engine (EngineApi::update_weights). The fp64 form is
// rounded to F32 first. Throws mmx::Error (nothing changed) when the engine refuses.
void push_weights(EngineApi& engine, const train::ParamSet<float>& P);
void push_weights(EngineApi& engine, const train::ParamSet<double>& P);

}  // namespace mmx::rl
