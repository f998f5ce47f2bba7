// KvCache: a contiguous per-sequence K/V store for softmax-attention layers (F32).
//
// This is the simple memory of the engine-foundation stage: one sequence, rows = absolute
// positions 0..capacity-1. The paged cache with prefix sharing (memory/paged_kv) replaces it
// for serving; models reach K/V only through k(il)/v(il) views so the swap is local.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace mmx {

class KvCache {
 public:
  KvCache(int n_layers, int64_t capacity, int n_kv_heads, int head_dim);

  Tensor k(int il) const { return k_[il].t(); }  // [capacity, n_kv_heads, head_dim]
  Tensor v(int il) const { return v_[il].t(); }  // [capacity, n_kv_heads, head_dim]
  int64_t capacity() const { return capacity_; }
  // Positions already written (the next token goes at n_past()).
  int64_t n_past() const { return n_past_; }
  void set_n_past(int64_t n);  // commit after a forward, or roll back
  size_t size_bytes() const;

 private:
  std::vector<Buffer> k_, v_;
  int64_t capacity_ = 0;
  int64_t n_past_ = 0;
};

}  // namespace mmx
