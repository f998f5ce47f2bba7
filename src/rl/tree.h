// The prefix-tree packer (Forge, seed 004 §2): a group of samples that share prefixes — one system
// prompt, multi-turn histories, branches — becomes ONE training sequence holding each distinct
// prefix once. The trie is laid out in DFS order; a token's position id is its position in its own
// sequence (its depth), its parent link is the token before it in every sequence through it
// (train/visibility.h tree form), so each token sees exactly its ancestors: what it sees in each of
// its sequences run alone. A row's logits predict the next token of every sample through it: one
// ScoredRow per (sample, completion token), so a shared row keeps one weighted term per owner.
//
//   sample i:  prompt p_i (unscored) ++ completion c_i (every id scored: c_i[k] is predicted by the
//              row of the token before it)
//   packed:    tokens / positions / parents [n] with n = the trie's node count ≤ Σ_i (|p_i|+|c_i|−1)
//
// Not here: the objective over the scored rows (rl/objective.h), the model (train/graph.h).
#pragma once

#include <cstdint>
#include <vector>

namespace mmx::rl {

struct Sample {
  std::vector<int32_t> prompt;      // >= 1 id (the first completion id needs a row to predict it)
  std::vector<int32_t> completion;  // >= 1 id
};

// One scored term: the logits of packed row `row` predict `target` = completion[index] of `sample`.
struct ScoredRow {
  int64_t row = 0;
  int32_t target = 0;
  int32_t sample = 0;
  int32_t index = 0;
};

// A packed batch of n_seqs sequences of seq_len rows (train::TrainBatch's shape).
struct Packed {
  int64_t n_seqs = 0, seq_len = 0;
  std::vector<int32_t> tokens;     // [n_seqs * seq_len] input ids (padding: id 0, never scored)
  std::vector<int32_t> positions;  // [n_seqs * seq_len] RoPE positions = depth in own sequence
  std::vector<int32_t> parents;    // [n_seqs * seq_len] tree parent links; empty = causal rows
  std::vector<ScoredRow> scored;   // sorted by (sample, index): one per completion id
};

// Every sample in ONE sequence: the trie of the samples' input ids in DFS order (children in the
// order their first sample comes). Throws mmx::Error on an empty prompt or completion.
Packed pack_tree(const std::vector<Sample>& samples);
// The reference layout: each sample its own causal sequence (rows 0..|p|+|c|−2), padded to the
// longest; nothing shared.
Packed pack_separate(const std::vector<Sample>& samples);

// Tokens a training step processes for the samples: merged (the trie's nodes) and separate (Σ the
// samples' input rows) — the token-count bound of the speed-up is separate / merged.
int64_t tree_tokens(const std::vector<Sample>& samples);
int64_t separate_tokens(const std::vector<Sample>& samples);

}  // namespace mmx::rl
