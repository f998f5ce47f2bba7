// Who sees whom inside one training sequence, in the two forms a TrainBatch may carry, and the
// view the attention kernels read. Not here: the kernels themselves (kernels*.h) or batch checks
// (graph.cpp check_batch).
//
//   dense:  [t, t] uint8, vis[i*t + j] = 1 when token i sees token j. Any pattern with the diagonal
//           set; O(t²) per sequence — for tests and hand-made masks.
//   tree:   [t] int32 parent links, parents[i] ∈ [-1, i): a prefix tree of merged rollouts packed
//           into one sequence in an order where every token follows its parent (-1: a root; a
//           causal sequence is the chain parents[i] = i − 1). Token i sees j iff j is i or an
//           ancestor of i. O(t) per sequence: the form that scales.
// The kernels read a row either expanded to t bytes (SeqVis::row) or as its visible keys in
// ascending disjoint intervals (SeqVis::intervals): in DFS order a token's ancestry is one interval
// per branch point above it (the run of its own segment, then its parent segment's run, ...), so a
// tree row costs O(branch depth), not O(t). Both forms of the same tree give the same bytes and the
// same intervals, hence bitwise the same results.
#pragma once

#include <cstdint>
#include <vector>

namespace mmx::train {

// Keys lo..hi (inclusive) of one query row.
struct VisInterval {
  int64_t lo = 0, hi = 0;
};

// One sequence's visibility: causal (the default), dense or tree. A view; owns nothing.
class SeqVis {
 public:
  SeqVis() = default;
  // The dense form [t, t]; null = causal. Implicit: kernels taking a SeqVis take a mask pointer.
  SeqVis(const uint8_t* dense) : dense_(dense) {}  // NOLINT(google-explicit-constructor)
  // The tree form: parents [t]; runs [t] (optional, tree_runs): the first row of each row's run
  // of consecutive parent links — without it intervals() walks each run.
  static SeqVis tree(const int32_t* parents, const int32_t* runs = nullptr) {
    SeqVis v;
    v.parents_ = parents;
    v.runs_ = runs;
    return v;
  }
  bool causal() const { return dense_ == nullptr && parents_ == nullptr; }
  // Whether row() writes into its buffer (size the per-thread scratch by it).
  bool needs_row_buffer() const { return parents_ != nullptr; }
  // Row i of the mask as t bytes: the dense row itself, `buf` [t] filled from i's ancestry
  // (tree), or null when causal (then token i sees exactly j <= i).
  const uint8_t* row(int64_t i, int64_t t, uint8_t* buf) const;
  // Row i's visible keys as ascending disjoint, non-adjacent intervals (out is overwritten):
  // causal [0, i]; tree: one per run on the path to the root; dense: the runs of ones.
  void intervals(int64_t i, int64_t t, std::vector<VisInterval>& out) const;

 private:
  const uint8_t* dense_ = nullptr;
  const int32_t* parents_ = nullptr;
  const int32_t* runs_ = nullptr;
};

// runs [t]: runs[i] = runs[i − 1] when parents[i] = i − 1, else i (the start of i's run).
void tree_runs(const int32_t* parents, int64_t t, int32_t* runs);

// The dense [n_seqs, t, t] mask of parent links [n_seqs, t] (validated: parents[i] ∈ [-1, i)).
std::vector<uint8_t> tree_to_dense(const int32_t* parents, int64_t n_seqs, int64_t t);
// The parent links of a dense mask that is a tree (each row = the token itself plus the whole row
// of its nearest visible predecessor, or the token alone); throws mmx::Error naming the first row
// that is not.
std::vector<int32_t> dense_to_tree(const uint8_t* vis, int64_t n_seqs, int64_t t);
// Throws mmx::Error unless every parents[i] of every sequence is in [-1, i).
void check_tree(const int32_t* parents, int64_t n_seqs, int64_t t);

}  // namespace mmx::train
