// Random prefix trees for the visibility tests: parent links of n_seqs packed sequences of t
// tokens (train/visibility.h, parents[i] ∈ [-1, i)), their RoPE positions (the depth), and a
// whole batch of them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "train/visibility.h"

namespace mmx::train::testing_tree {

// Mostly continuing the previous token, sometimes branching off an earlier one, rarely a new root.
inline std::vector<int32_t> random_parents(int64_t n_seqs, int64_t t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n_seqs * t));
  for (int64_t s = 0; s < n_seqs; ++s)
    for (int64_t i = 0; i < t; ++i) {
      const uint64_t r = rng() % 10;
      int32_t v = int32_t(i) - 1;
      if (i > 0 && r >= 6) v = int32_t(rng() % uint64_t(i));  // branch off token v
      if (r == 9) v = -1;                                       // a new root
      p[size_t(s * t + i)] = v;
    }
  return p;
}

inline std::vector<int32_t> depths(const std::vector<int32_t>& parents, int64_t t) {
  std::vector<int32_t> d(parents.size());
  for (size_t i = 0; i < parents.size(); ++i) {
    const int32_t p = parents[i];
    d[i] = p < 0 ? 0 : d[i - size_t(int64_t(i) % t) + size_t(p)] + 1;
  }
  return d;
}

// A tree-packed batch: random tokens and targets, random trees, positions = depths, and the same
// trees as a dense mask (train/visibility.h tree_to_dense).
struct TreeBatch {
  std::vector<int32_t> tok, tgt, parents, pos;
  std::vector<uint8_t> dense;
};
inline TreeBatch random_tree_batch(int64_t n_seqs, int64_t t, int64_t vocab, uint64_t seed) {
  TreeBatch b;
  std::mt19937_64 rng(seed * 7919 + 1);
  for (auto* v : {&b.tok, &b.tgt})
    for (int64_t i = 0; i < n_seqs * t; ++i) v->push_back(int32_t(rng() % uint64_t(vocab)));
  b.parents = random_parents(n_seqs, t, seed);
  b.pos = depths(b.parents, t);
  b.dense = tree_to_dense(b.parents.data(), n_seqs, t);
  return b;
}

}  // namespace mmx::train::testing_tree
