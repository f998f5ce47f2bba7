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
// The kernels expand one query row at a time (SeqVis::row), so both forms give the same bytes and
// hence bitwise the same results.
#pragma once

#include <cstdint>
#include <vector>

namespace mmx::train {

// One sequence's visibility: causal (the default), dense or tree. A view; owns nothing.
class SeqVis {
 public:
  SeqVis() = default;
  // The dense form [t, t]; null = causal. Implicit: kernels taking a SeqVis take a mask pointer.
  SeqVis(const uint8_t* dense) : dense_(dense) {}  // NOLINT(google-explicit-constructor)
  // The tree form: parents [t].
  static SeqVis tree(const int32_t* parents) {
    SeqVis v;
    v.parents_ = parents;
    return v;
  }
  bool causal() const { return dense_ == nullptr && parents_ == nullptr; }
  // Whether row() writes into its buffer (size the per-thread scratch by it).
  bool needs_row_buffer() const { return parents_ != nullptr; }
  // Row i of the mask as t bytes: the dense row itself, `buf` [t] filled from i's ancestry
  // (tree), or null when causal (then token i sees exactly j <= i).
  const uint8_t* row(int64_t i, int64_t t, uint8_t* buf) const;

 private:
  const uint8_t* dense_ = nullptr;
  const int32_t* parents_ = nullptr;
};

// The dense [n_seqs, t, t] mask of parent links [n_seqs, t] (validated: parents[i] ∈ [-1, i)).
std::vector<uint8_t> tree_to_dense(const int32_t* parents, int64_t n_seqs, int64_t t);
// The parent links of a dense mask that is a tree (each row = the token itself plus the whole row
// of its nearest visible predecessor, or the token alone); throws mmx::Error naming the first row
// that is not.
std::vector<int32_t> dense_to_tree(const uint8_t* vis, int64_t n_seqs, int64_t t);
// Throws mmx::Error unless every parents[i] of every sequence is in [-1, i).
void check_tree(const int32_t* parents, int64_t n_seqs, int64_t t);

}  // namespace mmx::train
