// PageStore: the block-major K/V pages of every attention layer (spec §5.6 layout), plus the
// MSA indexer's key pages. Per kKv layer: K and V [n_pages, page, n_kv_heads, head_dim] and, for
// MSA layers, index keys [n_pages, page, index_dim]. K/V are of the store's kv_dtype: F32
// (default) or BF16 (half the bytes; rows are rounded to nearest even when written, see
// KvCache::write_kv); index keys are of its ik_dtype: the kv_dtype unless chosen apart, or F8
// E4M3 as the release stores them (128 B per token at index_dim 128; vLLM's fp8 index cache:
// saturating round to nearest even, no scale).
// Lightning layers keep nothing here (their fixed-size state lives with the sequence, in KvCache).
//
// Who owns one: a single-sequence KvCache makes a private store whose pages it maps 1:1 (the
// identity block table); the serving engine makes ONE store for all sequences and hands out page
// ids from a BlockPool (memory/block_pool.h), so sequences with a common prefix point at the same
// pages. A page id means the same rows in every layer.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace mmx {

struct LayerCacheSpec {
  enum Kind : uint8_t { kKv, kLinearState } kind = kKv;
  int n_heads = 0;   // kKv: KV heads; kLinearState: lightning heads
  int head_dim = 0;
  int index_dim = 0;  // kKv of an MSA layer: the indexer's key per token (0 = none)
};

class PageStore {
 public:
  // kv_dtype: kF32 or kBF16, the dtype of every K/V page; ik_dtype: of the index-key pages,
  // kF32, kBF16 or kF8E4M3 (none: the kv_dtype).
  PageStore(const std::vector<LayerCacheSpec>& specs, int64_t n_pages, int64_t page,
            DType kv_dtype = DType::kF32, std::optional<DType> ik_dtype = std::nullopt);

  int64_t n_pages() const { return n_pages_; }
  int64_t page() const { return page_; }
  DType kv_dtype() const { return dtype_; }
  DType ik_dtype() const { return ik_dtype_; }
  Tensor k(int il) const;   // [n_pages, page, n_kv_heads, head_dim]
  Tensor v(int il) const;   // [n_pages, page, n_kv_heads, head_dim]
  Tensor ik(int il) const;  // [n_pages, page, index_dim]
  bool has_kv(int il) const { return !k_[size_t(il)].t().empty(); }
  bool has_ik(int il) const { return !ik_[size_t(il)].t().empty(); }

  // Copies page `src` over page `dst` in every layer (copy-on-write of a shared page).
  void copy_page(int32_t src, int32_t dst);

  size_t page_bytes() const;  // one page over all layers
  size_t bytes() const { return page_bytes() * size_t(n_pages_); }

  // The bytes one page costs for these layers (0 when no layer keeps K/V).
  static size_t page_bytes(const std::vector<LayerCacheSpec>& specs, int64_t page,
                           DType kv_dtype = DType::kF32, std::optional<DType> ik_dtype = std::nullopt);

 private:
  std::vector<Buffer> k_, v_, ik_;  // indexed by layer; empty where the layer keeps no K/V
  int64_t n_pages_ = 0, page_ = 0;
  DType dtype_ = DType::kF32, ik_dtype_ = DType::kF32;
};

}  // namespace mmx
