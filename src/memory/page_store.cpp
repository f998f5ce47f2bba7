#include "memory/page_store.h"

#include <cstring>

#include "base/error.h"

namespace mmx {

PageStore::PageStore(const std::vector<LayerCacheSpec>& specs, int64_t n_pages, int64_t page,
                     DType kv_dtype, std::optional<DType> ik_dtype)
    : k_(specs.size()), v_(specs.size()), ik_(specs.size()), n_pages_(n_pages), page_(page),
      dtype_(kv_dtype), ik_dtype_(ik_dtype.value_or(kv_dtype)) {
  MMX_CHECK(n_pages > 0 && page > 0, "PageStore({} pages of {})", n_pages, page);
  MMX_CHECK(kv_dtype == DType::kF32 || kv_dtype == DType::kBF16,
            "PageStore: KV pages are F32 or BF16, not {}", dtype_name(kv_dtype));
  MMX_CHECK(ik_dtype_ == DType::kF32 || ik_dtype_ == DType::kBF16 || ik_dtype_ == DType::kF8E4M3,
            "PageStore: index-key pages are F32, BF16 or F8_E4M3, not {}", dtype_name(ik_dtype_));
  for (size_t il = 0; il < specs.size(); ++il) {
    const LayerCacheSpec& s = specs[il];
    MMX_CHECK(s.n_heads > 0 && s.head_dim > 0, "layer {}: {} heads x {}", il, s.n_heads, s.head_dim);
    if (s.kind != LayerCacheSpec::kKv) continue;
    k_[il] = Buffer(kv_dtype, {n_pages, page, s.n_heads, s.head_dim});
    v_[il] = Buffer(kv_dtype, {n_pages, page, s.n_heads, s.head_dim});
    if (s.index_dim > 0) ik_[il] = Buffer(ik_dtype_, {n_pages, page, s.index_dim});
  }
}

Tensor PageStore::k(int il) const {
  MMX_CHECK(has_kv(il), "layer {} keeps no K/V", il);
  return k_[size_t(il)].t();
}
Tensor PageStore::v(int il) const {
  MMX_CHECK(has_kv(il), "layer {} keeps no K/V", il);
  return v_[size_t(il)].t();
}
Tensor PageStore::ik(int il) const {
  MMX_CHECK(has_ik(il), "layer {} keeps no index keys", il);
  return ik_[size_t(il)].t();
}

void PageStore::copy_page(int32_t src, int32_t dst) {
  MMX_CHECK(src >= 0 && src < n_pages_ && dst >= 0 && dst < n_pages_, "copy_page({}, {}) of {} pages",
            src, dst, n_pages_);
  if (src == dst) return;
  for (const std::vector<Buffer>* set : {&k_, &v_, &ik_})
    for (const Buffer& b : *set) {
      const Tensor t = b.t();
      if (t.empty()) continue;
      const size_t stride = t.size_bytes() / size_t(n_pages_);
      std::memcpy(static_cast<char*>(t.data) + stride * size_t(dst),
                  static_cast<const char*>(t.data) + stride * size_t(src), stride);
    }
}

size_t PageStore::page_bytes(const std::vector<LayerCacheSpec>& specs, int64_t page, DType kv_dtype,
                             std::optional<DType> ik_dtype) {
  size_t s = 0;
  for (const LayerCacheSpec& l : specs)
    if (l.kind == LayerCacheSpec::kKv)
      s += size_t(page) * (2 * size_t(l.n_heads) * size_t(l.head_dim) * dtype_size(kv_dtype) +
                           size_t(l.index_dim) * dtype_size(ik_dtype.value_or(kv_dtype)));
  return s;
}

size_t PageStore::page_bytes() const {
  size_t s = 0;
  for (const std::vector<Buffer>* set : {&k_, &v_, &ik_})
    for (const Buffer& b : *set)
      if (!b.t().empty()) s += b.t().size_bytes() / size_t(n_pages_);
  return s;
}

}  // namespace mmx
