// The visibility forms of visibility.h: row expansion and the dense <-> tree converters.
#include "train/visibility.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace mmx::train {

const uint8_t* SeqVis::row(int64_t i, int64_t t, uint8_t* buf) const {
  if (dense_) return dense_ + i * t;
  if (!parents_) return nullptr;
  std::memset(buf, 0, size_t(t));
  for (int64_t j = i; j >= 0; j = parents_[j]) buf[j] = 1;
  return buf;
}

void SeqVis::intervals(int64_t i, int64_t t, std::vector<VisInterval>& out) const {
  out.clear();
  if (dense_) {
    const uint8_t* r = dense_ + i * t;
    for (int64_t j = 0; j < t;) {
      if (!r[j]) {
        ++j;
        continue;
      }
      const int64_t lo = j;
      while (j < t && r[j]) ++j;
      out.push_back({lo, j - 1});
    }
    return;
  }
  if (!parents_) {
    out.push_back({0, i});
    return;
  }
  for (int64_t j = i; j >= 0;) {
    int64_t s = j;
    if (runs_) s = runs_[j];
    else
      while (s > 0 && parents_[s] == s - 1) --s;
    out.push_back({s, j});  // never adjacent to the next: parents[s] != s − 1 at a run start
    j = parents_[s];
  }
  std::reverse(out.begin(), out.end());
}

void tree_runs(const int32_t* parents, int64_t t, int32_t* runs) {
  for (int64_t i = 0; i < t; ++i) runs[i] = i > 0 && parents[i] == i - 1 ? runs[i - 1] : int32_t(i);
}

void check_tree(const int32_t* parents, int64_t n_seqs, int64_t t) {
  for (int64_t s = 0; s < n_seqs; ++s)
    for (int64_t i = 0; i < t; ++i) {
      const int32_t p = parents[s * t + i];
      if (p < -1 || p >= i)
        fail("training batch: token {} of sequence {} has parent {}; a parent must come before its child "
             "(in [-1, {}))", i, s, p, i);
    }
}

std::vector<uint8_t> tree_to_dense(const int32_t* parents, int64_t n_seqs, int64_t t) {
  check_tree(parents, n_seqs, t);
  std::vector<uint8_t> vis(size_t(n_seqs * t * t));
  for (int64_t s = 0; s < n_seqs; ++s) {
    const SeqVis v = SeqVis::tree(parents + s * t);
    for (int64_t i = 0; i < t; ++i) v.row(i, t, vis.data() + (s * t + i) * t);
  }
  return vis;
}

std::vector<int32_t> dense_to_tree(const uint8_t* vis, int64_t n_seqs, int64_t t) {
  std::vector<int32_t> parents(size_t(n_seqs * t));
  std::vector<uint8_t> want(static_cast<size_t>(t));
  for (int64_t s = 0; s < n_seqs; ++s) {
    const uint8_t* m = vis + s * t * t;
    for (int64_t i = 0; i < t; ++i) {
      int32_t p = -1;  // the nearest earlier token i sees
      for (int64_t j = i - 1; j >= 0 && p < 0; --j)
        if (m[i * t + j]) p = int32_t(j);
      parents[size_t(s * t + i)] = p;
      // row i must be {i} ∪ row(p)
      if (p >= 0) std::memcpy(want.data(), m + p * t, size_t(t));
      else std::memset(want.data(), 0, size_t(t));
      want[size_t(i)] = 1;
      for (int64_t j = 0; j < t; ++j)
        if ((m[i * t + j] != 0) != (want[size_t(j)] != 0))
          fail("visibility: row {} of sequence {} is not a prefix-tree row (it should see exactly itself and "
               "what token {} sees; key {} differs)", i, s, p, j);
    }
  }
  return parents;
}

}  // namespace mmx::train
