#include "memory/paged_memory.h"

#include <algorithm>

#include "base/error.h"

namespace mmx {

PagedMemory::PagedMemory(std::vector<LayerCacheSpec> specs, PagedMemoryOptions o)
    : specs_(std::move(specs)), o_(o), pool_(int(o.n_pages), int(o.page)) {
  MMX_CHECK(o_.n_pages > 0 && o_.n_pages < (int64_t(1) << 31) && o_.page > 0, "PagedMemory({} pages of {})",
            o_.n_pages, o_.page);
  MMX_CHECK(o_.checkpoint_every % o_.page == 0, "state checkpoints every {} tokens: not a multiple of the page {}",
            o_.checkpoint_every, o_.page);
  store_ = std::make_shared<PageStore>(specs_, o_.n_pages, o_.page, o_.kv_dtype, o_.ik_dtype);
  for (const LayerCacheSpec& l : specs_) has_states_ |= l.kind == LayerCacheSpec::kLinearState;
}

const PagedMemory::StateSnapshot* PagedMemory::find_state(uint64_t h, std::span<const int32_t> prefix) {
  const auto it = states_.find(h);
  if (it == states_.end() || !std::equal(prefix.begin(), prefix.end(), it->second.tokens.begin(),
                                         it->second.tokens.end()))
    return nullptr;
  state_lru_.splice(state_lru_.end(), state_lru_, it->second.lru);  // most recently used
  return &it->second;
}

int64_t PagedMemory::open(SeqMemory& s, std::span<const int32_t> tokens) {
  MMX_CHECK(!s.kv, "open() of a sequence that holds memory");
  const int64_t n = int64_t(tokens.size()), B = o_.page;
  // 1. The longest chain of cached full blocks (each lookup takes a reference).
  std::vector<int32_t> ids;
  std::vector<uint64_t> hashes;
  for (int64_t b = 0; (b + 1) * B <= n; ++b) {
    const auto blk = tokens.subspan(size_t(b * B), size_t(B));
    const uint64_t h = BlockPool::hash_block(hashes.empty() ? BlockPool::kNoHash : hashes.back(), blk);
    const int id = pool_.lookup(h, blk);
    if (id < 0) break;
    ids.push_back(id);
    hashes.push_back(h);
  }
  // 2. The usable part: leave the last token to recompute; with lightning layers, only up to a
  //    state snapshot (checkpoints are page-aligned, so whole blocks).
  int64_t usable = usable_prefix(int64_t(ids.size()) * B, n);
  const StateSnapshot* snap = nullptr;
  if (has_states_) {  // the newest snapshot at or below it
    for (; usable > 0; usable -= o_.checkpoint_every)
      if ((snap = find_state(hashes[size_t(usable / B - 1)], tokens.first(size_t(usable))))) break;
  }
  // 3. Keep the blocks that hold the usable tokens, return the rest.
  const size_t keep = size_t((usable + B - 1) / B);
  for (size_t i = keep; i < ids.size(); ++i) pool_.decref(ids[i]);
  ids.resize(keep);
  hashes.resize(size_t(usable / B));  // a partly used block is not ours to commit yet

  s.kv = std::make_unique<KvCache>(store_, specs_, o_.checkpoint_every, o_.max_checkpoints);
  for (size_t b = 0; b < ids.size(); ++b) s.kv->map_block(int64_t(b), ids[b]);
  s.kv->resume_at(usable, snap ? snap->states : std::vector<float>{});
  s.hashes = std::move(hashes);
  s.exported = usable;  // its snapshot (if any) is the one just used
  return usable;
}

int64_t PagedMemory::usable_prefix(int64_t n_shared, int64_t n_tokens) const {
  int64_t p = std::min(n_shared / o_.page * o_.page, n_tokens - 1);
  if (has_states_) p = o_.checkpoint_every > 0 ? p / o_.checkpoint_every * o_.checkpoint_every : 0;
  return std::max<int64_t>(p, 0);
}

bool PagedMemory::shared_tail(const SeqMemory& s) const {
  const int64_t blk = s.kv->n_past() / o_.page;
  if (blk >= s.kv->n_blocks()) return false;
  const int32_t id = s.kv->blocks()[size_t(blk)];
  return pool_.ref_count(id) > 1 || pool_.is_cached(id);
}

int64_t PagedMemory::fit(const SeqMemory& s) const {
  const int64_t room = s.kv->n_blocks() * o_.page - s.kv->n_past();  // rows left in mapped pages
  const int64_t free = n_free() - (shared_tail(s) ? 1 : 0);
  return free < 0 ? 0 : room + free * o_.page;
}

void PagedMemory::reserve(SeqMemory& s, int64_t n) {
  MMX_CHECK(n >= 0 && n <= fit(s), "reserve({}) with room for {} tokens", n, fit(s));
  if (n == 0) return;
  KvCache& kv = *s.kv;
  if (shared_tail(s)) {  // copy-on-write: the next row goes into a page others read
    const int64_t blk = kv.n_past() / o_.page;
    const int32_t old = kv.blocks()[size_t(blk)];
    const int32_t id = pool_.allocate();
    store_->copy_page(old, id);
    kv.map_block(blk, id);
    pool_.decref(old);
  }
  while (kv.n_blocks() * o_.page < kv.n_past() + n) kv.map_block(kv.n_blocks(), pool_.allocate());
}

void PagedMemory::commit(SeqMemory& s, std::span<const int32_t> tokens) {
  const KvCache& kv = *s.kv;
  const int64_t B = o_.page, n_full = kv.n_past() / B;
  MMX_CHECK(int64_t(tokens.size()) >= kv.n_past(), "commit(): {} tokens for {} cached", tokens.size(), kv.n_past());
  for (int64_t b = int64_t(s.hashes.size()); b < n_full; ++b) {
    const auto blk = tokens.subspan(size_t(b * B), size_t(B));
    const uint64_t h = BlockPool::hash_block(s.hashes.empty() ? BlockPool::kNoHash : s.hashes.back(), blk);
    pool_.commit(kv.blocks()[size_t(b)], h, blk);
    s.hashes.push_back(h);
  }
  if (!has_states_ || o_.max_state_snapshots <= 0) return;
  for (int64_t p : kv.checkpoint_positions()) {  // only the new ones: commit runs every step
    if (p <= s.exported || p % B != 0 || p / B > int64_t(s.hashes.size())) continue;
    s.exported = p;
    const uint64_t h = s.hashes[size_t(p / B - 1)];
    if (states_.count(h)) continue;  // already cached (or a colliding prefix: keep the old one)
    if (int(states_.size()) >= o_.max_state_snapshots) {
      states_.erase(state_lru_.front());
      state_lru_.pop_front();
    }
    StateSnapshot& snap = states_[h];
    snap.tokens.assign(tokens.begin(), tokens.begin() + p);
    snap.states = kv.checkpoint_states(p);
    snap.lru = state_lru_.insert(state_lru_.end(), h);
  }
}

void PagedMemory::release(SeqMemory& s) {
  if (!s.kv) return;
  for (int32_t id : s.kv->blocks()) pool_.decref(id);
  s.kv.reset();
  s.hashes.clear();
  s.exported = 0;
}

void PagedMemory::drop_cache() {
  pool_.uncache_all();
  states_.clear();
  state_lru_.clear();
}

int64_t PagedMemory::rollback(SeqMemory& s, int64_t len) {
  MMX_CHECK(s.kv && len >= 0 && len <= s.kv->n_past(), "rollback({}) of a sequence holding {} tokens", len,
            s.n_past());
  const int64_t r = s.kv->rollback(len);
  for (int32_t id : s.kv->unmap_blocks_from((r + o_.page - 1) / o_.page)) pool_.decref(id);
  s.hashes.resize(std::min(s.hashes.size(), size_t(r / o_.page)));
  s.exported = std::min(s.exported, r);
  return r;
}

int64_t PagedMemory::fork(const SeqMemory& src, int64_t pos, SeqMemory& dst) {
  MMX_CHECK(src.kv && !dst.kv && pos >= 0 && pos <= src.n_past(), "fork at {} of a sequence holding {} tokens",
            pos, src.n_past());
  int64_t r = pos;
  std::vector<float> states;
  if (has_states_) {
    if (pos == src.n_past()) {
      states = src.kv->live_states();
    } else {
      r = 0;
      for (int64_t p : src.kv->checkpoint_positions())
        if (p <= pos) r = std::max(r, p);
      if (r > 0) states = src.kv->checkpoint_states(r);
    }
  }
  dst.kv = std::make_unique<KvCache>(store_, specs_, o_.checkpoint_every, o_.max_checkpoints);
  const int64_t n_blocks = (r + o_.page - 1) / o_.page;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int32_t id = src.kv->blocks()[size_t(b)];
    pool_.incref(id);
    dst.kv->map_block(b, id);
  }
  dst.kv->resume_at(r, states);
  dst.hashes.assign(src.hashes.begin(), src.hashes.begin() + int64_t(std::min(src.hashes.size(), size_t(r / o_.page))));
  dst.exported = r;
  return r;
}

void PagedMemory::check_integrity(std::span<const SeqMemory* const> live) const {
  pool_.check_integrity();
  std::vector<int> refs(size_t(n_pages()), 0);
  for (const SeqMemory* s : live) {
    if (!s->kv) continue;
    const KvCache& kv = *s->kv;
    MMX_CHECK(kv.n_past() <= kv.n_blocks() * o_.page, "sequence with {} tokens maps only {} blocks",
              kv.n_past(), kv.n_blocks());
    MMX_CHECK(int64_t(s->hashes.size()) <= kv.n_past() / o_.page, "{} committed blocks for {} tokens",
              s->hashes.size(), kv.n_past());
    std::vector<int32_t> mine = kv.blocks();
    std::sort(mine.begin(), mine.end());
    MMX_CHECK(std::adjacent_find(mine.begin(), mine.end()) == mine.end(), "a block table maps a page twice");
    for (int32_t id : mine) {
      MMX_CHECK(id >= 0 && id < n_pages(), "block table holds page {}", id);
      ++refs[size_t(id)];
    }
  }
  for (int32_t id = 0; id < int32_t(n_pages()); ++id)
    MMX_CHECK(pool_.ref_count(id) == refs[size_t(id)], "page {}: ref count {} but {} block tables map it", id,
              pool_.ref_count(id), refs[size_t(id)]);
  MMX_CHECK(states_.size() == state_lru_.size(), "state cache {} entries, LRU {}", states_.size(),
            state_lru_.size());
}

}  // namespace mmx
