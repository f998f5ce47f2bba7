#include "memory/kv_cache.h"

namespace mmx {

KvCache::KvCache(int n_layers, int64_t capacity, int n_kv_heads, int head_dim) : capacity_(capacity) {
  MMX_CHECK(capacity > 0 && n_layers > 0, "KvCache({}, {})", n_layers, capacity);
  for (int il = 0; il < n_layers; ++il) {
    k_.emplace_back(DType::kF32, std::initializer_list<int64_t>{capacity, n_kv_heads, head_dim});
    v_.emplace_back(DType::kF32, std::initializer_list<int64_t>{capacity, n_kv_heads, head_dim});
  }
}

void KvCache::set_n_past(int64_t n) {
  MMX_CHECK(n >= 0 && n <= capacity_, "n_past {} outside [0, {}]", n, capacity_);
  n_past_ = n;
}

size_t KvCache::size_bytes() const {
  size_t s = 0;
  for (const auto& b : k_) s += 2 * b.t().size_bytes();
  return s;
}

}  // namespace mmx
