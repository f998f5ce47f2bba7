// Scored samples on disk: the JSONL of `mmx rl grad --samples` (one sample a line),
//   {"prompt": [ids], "completion": [ids], "advantage": A, "old_logprobs": [one float per completion id]}
// optionally "ref_logprobs": [...] (the reference policy, for a KL term). The prompt is unscored,
// every completion id is scored. Not here: packing (rl/tree.h), the objective (rl/objective.h).
#pragma once

#include <string>
#include <vector>

#include "rl/objective.h"
#include "rl/tree.h"

namespace mmx::rl {

struct ScoredSample {
  Sample ids;
  double advantage = 0;
  std::vector<double> old_logp;  // [|completion|]
  std::vector<double> ref_logp;  // [|completion|] or empty
};

// Reads and checks every line (ids in [0, vocab), lengths, finite numbers); mmx::Error names the
// file, line and field.
std::vector<ScoredSample> read_samples_jsonl(const std::string& path, int64_t vocab);

// The objective's view of the samples' scored tokens in Packed::scored order (sample, index):
// sample ids = the samples' indices, the sequence advantage on each of its tokens.
ObjectiveBatch objective_batch(const std::vector<ScoredSample>& samples);
std::vector<Sample> sample_ids(const std::vector<ScoredSample>& samples);

}  // namespace mmx::rl
