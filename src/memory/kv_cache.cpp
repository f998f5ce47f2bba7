#include "memory/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace mmx {

KvCache::KvCache(int n_layers, int64_t capacity, int n_kv_heads, int head_dim, DType kv_dtype)
    : KvCache(std::vector<LayerCacheSpec>(size_t(std::max(n_layers, 0)),
                                          LayerCacheSpec{LayerCacheSpec::kKv, n_kv_heads, head_dim}),
              capacity, 0, 4, 16, kv_dtype) {}

KvCache::KvCache(const std::vector<LayerCacheSpec>& layers, int64_t capacity, int64_t checkpoint_every,
                 int max_checkpoints, int page, DType kv_dtype, std::optional<DType> ik_dtype)
    : specs_(layers), checkpoint_every_(checkpoint_every), max_checkpoints_(max_checkpoints) {
  MMX_CHECK(capacity > 0 && !layers.empty() && checkpoint_every >= 0 && max_checkpoints >= 0 && page > 0,
            "KvCache({} layers, capacity {}, checkpoint_every {}, page {})", layers.size(), capacity,
            checkpoint_every, page);
  const int64_t n_pages = (capacity + page - 1) / page;
  store_ = std::make_shared<PageStore>(layers, n_pages, page, kv_dtype, ik_dtype);
  for (int64_t b = 0; b < n_pages; ++b) table_.push_back(int32_t(b));  // identity block table
  capacity_ = capacity;  // the logical limit (the last page may have spare rows)
  init_states();
}

KvCache::KvCache(std::shared_ptr<PageStore> store, const std::vector<LayerCacheSpec>& layers,
                 int64_t checkpoint_every, int max_checkpoints)
    : specs_(layers), store_(std::move(store)), checkpoint_every_(checkpoint_every),
      max_checkpoints_(max_checkpoints) {
  MMX_CHECK(store_ && !layers.empty() && checkpoint_every >= 0 && max_checkpoints >= 0,
            "paged KvCache({} layers, checkpoint_every {})", layers.size(), checkpoint_every);
  init_states();
}

void KvCache::init_states() {
  state_.resize(specs_.size());
  for (size_t il = 0; il < specs_.size(); ++il) {
    const LayerCacheSpec& s = specs_[il];
    MMX_CHECK(s.n_heads > 0 && s.head_dim > 0, "layer {}: {} heads x {}", il, s.n_heads, s.head_dim);
    if (s.kind == LayerCacheSpec::kLinearState)
      state_[il] = Buffer(DType::kF32, {s.n_heads, s.head_dim, s.head_dim});  // zero-filled
  }
}

Tensor KvCache::block_table() const {
  // A read-only view; the ops only read it.
  return Tensor(const_cast<int32_t*>(table_.data()), DType::kI32, {int64_t(table_.size())});
}

void KvCache::map_block(int64_t blk, int32_t id) {
  MMX_CHECK(blk >= 0 && blk <= n_blocks(), "map_block({}) with {} blocks mapped", blk, n_blocks());
  MMX_CHECK(id >= 0 && id < store_->n_pages(), "map_block: page {} outside [0, {})", id, store_->n_pages());
  if (blk == n_blocks()) {
    table_.push_back(id);
    capacity_ = n_blocks() * page();
  } else {
    table_[size_t(blk)] = id;
  }
}

// Copies rows [0, n) of src ([n, width] F32) to positions pos0.. of a paged store, page by page
// (F32 pages: a byte copy; BF16 pages: each value rounded to nearest even; F8 E4M3 index-key
// pages: rounded to nearest even, saturating at +-448).
static void write_rows(const Tensor& pages, const std::vector<int32_t>& table, int64_t page, int64_t pos0,
                       const Tensor& src) {
  const int64_t n = src.dim(0), width = src.numel() / std::max<int64_t>(n, 1);
  MMX_CHECK(src.dtype == DType::kF32, "KV rows are {}, expected F32", dtype_name(src.dtype));
  MMX_CHECK(pages.numel() / (pages.dim(0) * page) == width, "KV row width {} vs pages {}", width,
            pages.shape_str());
  const bool bf16 = pages.dtype == DType::kBF16, f8 = pages.dtype == DType::kF8E4M3;
  for (int64_t i = 0; i < n;) {
    const int64_t pos = pos0 + i, blk = pos / page, off = pos % page;
    const int64_t m = std::min(n - i, page - off);  // rows that stay in this page
    MMX_CHECK(blk < int64_t(table.size()), "position {} past the block table ({} blocks)", pos, table.size());
    const int64_t at = (int64_t(table[size_t(blk)]) * page + off) * width;
    if (bf16) {
      uint16_t* dst = static_cast<uint16_t*>(pages.data) + at;
      const float* s = src.f32() + i * width;
      for (int64_t e = 0; e < m * width; ++e) dst[e] = f32_to_bf16(s[e]);
    } else if (f8) {
      uint8_t* dst = static_cast<uint8_t*>(pages.data) + at;
      const float* s = src.f32() + i * width;
      for (int64_t e = 0; e < m * width; ++e) dst[e] = f32_to_f8e4m3(s[e]);
    } else {
      std::memcpy(pages.f32() + at, src.f32() + i * width, size_t(m * width) * sizeof(float));
    }
    i += m;
  }
}

void KvCache::write_kv(int il, int64_t pos0, const Tensor& k, const Tensor& v) {
  MMX_CHECK(pos0 + k.dim(0) <= capacity_, "KV write {} + {} past capacity {}", pos0, k.dim(0), capacity_);
  write_rows(k_pages(il), table_, page(), pos0, k);
  write_rows(v_pages(il), table_, page(), pos0, v);
}

void KvCache::write_ik(int il, int64_t pos0, const Tensor& ik_rows) {
  MMX_CHECK(pos0 + ik_rows.dim(0) <= capacity_, "index-key write past capacity {}", capacity_);
  write_rows(ik_pages(il), table_, page(), pos0, ik_rows);
}

Tensor KvCache::state(int il) const {
  MMX_CHECK(specs_[size_t(il)].kind == LayerCacheSpec::kLinearState, "layer {} keeps no linear state", il);
  return state_[size_t(il)].t();
}

void KvCache::set_n_past(int64_t n) {
  MMX_CHECK(n >= 0 && n <= capacity_, "n_past {} outside [0, {}]", n, capacity_);
  MMX_CHECK(n >= n_past_ || !has_states(),
            "set_n_past({}) would move a lightning state back from {}; use rollback()", n, n_past_);
  n_past_ = n;
}

void KvCache::advance(int64_t n) {
  set_n_past(n_past_ + n);
  if (checkpoint_every_ > 0 && has_states() && n_past_ % checkpoint_every_ == 0) save_checkpoint();
}

int64_t KvCache::next_checkpoint(int64_t pos) const {
  if (checkpoint_every_ <= 0 || !has_states()) return std::numeric_limits<int64_t>::max();
  return (pos / checkpoint_every_ + 1) * checkpoint_every_;
}

void KvCache::save_checkpoint() {
  if (!has_states() || max_checkpoints_ == 0) return;
  if (!checkpoints_.empty() && checkpoints_.back().pos == n_past_) checkpoints_.pop_back();
  Checkpoint c;
  c.pos = n_past_;
  c.states.reserve(state_bytes() / sizeof(float));
  for (const Buffer& s : state_)
    if (!s.t().empty()) c.states.insert(c.states.end(), s.t().f32(), s.t().f32() + s.t().numel());
  checkpoints_.push_back(std::move(c));
  if (int(checkpoints_.size()) > max_checkpoints_) checkpoints_.erase(checkpoints_.begin());
}

std::vector<int64_t> KvCache::checkpoint_positions() const {
  std::vector<int64_t> p;
  for (const auto& c : checkpoints_) p.push_back(c.pos);
  return p;
}

std::vector<float> KvCache::checkpoint_states(int64_t pos) const {
  for (const auto& c : checkpoints_)
    if (c.pos == pos) return c.states;
  return {};
}

std::vector<float> KvCache::live_states() const {
  std::vector<float> out;
  for (const Buffer& s : state_)
    if (!s.t().empty()) out.insert(out.end(), s.t().f32(), s.t().f32() + s.t().numel());
  return out;
}

std::vector<int32_t> KvCache::unmap_blocks_from(int64_t n) {
  MMX_CHECK(n >= 0 && n * page() >= n_past_, "unmap_blocks_from({}) would drop cached rows ({} cached)", n, n_past_);
  if (n >= n_blocks()) return {};
  std::vector<int32_t> ids(table_.begin() + n, table_.end());
  table_.resize(size_t(n));
  capacity_ = n_blocks() * page();
  return ids;
}

void KvCache::copy_states(const float* src) {
  for (Buffer& s : state_) {
    Tensor t = s.t();
    if (t.empty()) continue;
    if (src) {
      std::memcpy(t.data, src, t.size_bytes());
      src += t.numel();
    } else {
      std::memset(t.data, 0, t.size_bytes());
    }
  }
}

int64_t KvCache::rollback(int64_t p) {
  MMX_CHECK(p >= 0 && p <= n_past_, "rollback({}) with {} tokens cached", p, n_past_);
  if (!has_states()) {
    n_past_ = p;
    return p;
  }
  while (!checkpoints_.empty() && checkpoints_.back().pos > p) checkpoints_.pop_back();
  if (p == n_past_) return p;  // nothing to undo
  copy_states(checkpoints_.empty() ? nullptr : checkpoints_.back().states.data());
  n_past_ = checkpoints_.empty() ? 0 : checkpoints_.back().pos;
  return n_past_;
}

void KvCache::resume_at(int64_t pos, const std::vector<float>& states) {
  MMX_CHECK(n_past_ == 0 && checkpoints_.empty(), "resume_at() on a cache holding {} tokens", n_past_);
  MMX_CHECK(states.size() * sizeof(float) == state_bytes() || (states.empty() && (pos == 0 || !has_states())),
            "resume_at({}): {} state floats, the model has {}", pos, states.size(), state_bytes() / sizeof(float));
  MMX_CHECK(pos >= 0 && pos <= capacity_, "resume_at({}) past capacity {}", pos, capacity_);
  copy_states(states.empty() ? nullptr : states.data());
  n_past_ = pos;
  if (has_states() && pos > 0) save_checkpoint();  // so rollback() can return here
}

size_t KvCache::kv_bytes() const {
  return PageStore::page_bytes(specs_, page(), kv_dtype(), ik_dtype()) * table_.size();
}
size_t KvCache::state_bytes() const {
  size_t s = 0;
  for (const auto& b : state_)
    if (!b.t().empty()) s += b.t().size_bytes();
  return s;
}
size_t KvCache::checkpoint_bytes() const {
  size_t s = 0;
  for (const auto& c : checkpoints_) s += c.states.size() * sizeof(float);
  return s;
}

}  // namespace mmx
