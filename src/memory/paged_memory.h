// PagedMemory: the serving engine's memory for many sequences at once (DESIGN memory/hybrid).
//
//   PageStore   one block-major K/V page pool shared by every sequence (memory/page_store.h);
//   BlockPool   which pages are used (ref counts), which full blocks are in the prefix cache
//               (hash-chained, token-verified) and the LRU order of eviction (memory/block_pool.h);
//   state cache lightning-state snapshots at checkpoint positions, keyed like the blocks, LRU.
//
// One sequence = a SeqMemory: a paged KvCache (block table into the shared store + its own
// lightning states) and the chained hashes of its committed full blocks.
//
// The hybrid rule lives in memory and nowhere else: per sequence, KvCache::max_chunk / advance
// (a forward never crosses a state checkpoint, and the state is saved there); across sequences,
// here: open() maps the longest cached prefix that is usable — full K/V blocks, and for a model
// with lightning layers only up to a position where a state snapshot exists (a state cannot be
// rebuilt from pages) — and rollback() / fork() land on a checkpoint. The engine and the models
// only see the lengths. A page that is shared (ref > 1) or registered in the prefix cache is never written:
// reserve() first copies it to a private page (copy-on-write of the shared tail block).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/block_pool.h"
#include "memory/kv_cache.h"

namespace mmx {

struct SeqMemory {
  std::unique_ptr<KvCache> kv;   // null while the sequence holds no memory
  std::vector<uint64_t> hashes;  // chained hash of each committed full block, in order
  int64_t exported = 0;          // newest lightning checkpoint already offered to the state cache
  int64_t n_past() const { return kv ? kv->n_past() : 0; }
};

struct PagedMemoryOptions {
  int64_t n_pages = 0;           // pages in the shared pool
  int64_t page = 16;             // tokens per page
  int64_t checkpoint_every = 0;  // lightning state snapshots (multiple of page; 0 = no lightning hits)
  int max_checkpoints = 2;       // per live sequence
  int max_state_snapshots = 8;   // lightning states kept for prefix hits (LRU)
  DType kv_dtype = DType::kF32;  // K/V page storage: kF32 or kBF16 (half the bytes)
  std::optional<DType> ik_dtype;  // MSA index-key pages: kF32, kBF16, kF8E4M3 (none: kv_dtype)
};

class PagedMemory {
 public:
  PagedMemory(std::vector<LayerCacheSpec> specs, PagedMemoryOptions o);

  int64_t page() const { return o_.page; }
  int64_t n_pages() const { return o_.n_pages; }
  int64_t n_free() const { return pool_.n_free(); }  // unused pages (cached ones included)
  int64_t n_used() const { return n_pages() - n_free(); }
  size_t bytes() const { return store_->bytes(); }

  // Gives `s` a cache for `tokens` (its prompt) and maps the longest usable cached prefix, at
  // most tokens.size() - 1 tokens (the last one is recomputed for its logits). Returns the
  // number of tokens served from the cache; s.n_past() equals it.
  int64_t open(SeqMemory& s, std::span<const int32_t> tokens);
  // What open() would map for a prompt of n_tokens if its first n_shared tokens were cached:
  // whole pages, at most n_tokens - 1, and with lightning layers only a snapshot position.
  int64_t usable_prefix(int64_t n_shared, int64_t n_tokens) const;
  // How many more tokens `s` can take with the pages mapped and free now.
  int64_t fit(const SeqMemory& s) const;
  // Maps pages for the next n tokens (n <= fit(s)), copying a shared tail page first.
  void reserve(SeqMemory& s, int64_t n);
  // After a forward: registers the newly full blocks of tokens[0, n_past) in the prefix cache and
  // any new lightning checkpoint in the state cache.
  void commit(SeqMemory& s, std::span<const int32_t> tokens);
  // Drops every page reference and the cache (full blocks stay findable until evicted).
  void release(SeqMemory& s);
  // Forgets the prefix cache: no block or lightning snapshot is found by open() again (new
  // weights made their contents stale). Pages a sequence holds stay its own, unregistered.
  void drop_cache();

  // The verbs speculation and RL need (the hybrid rule again lives only here):
  // rollback: `s` goes back to at most `len` of its tokens (a speculative draft rejected). Rows
  // past it are forgotten and the pages wholly past it released (a page still shared or cached
  // is copied before its next write, as always); with lightning layers the state returns to the
  // newest checkpoint <= len. Returns s.n_past(): == len without lightning layers, else the
  // checkpoint, and the caller re-feeds tokens [returned, len).
  int64_t rollback(SeqMemory& s, int64_t len);
  // fork: `dst` (holding no memory) gets the first `pos` tokens of `src` without recomputing
  // them — src's pages shared (ref counted), and with lightning layers src's live state when pos
  // is where src is, else its newest checkpoint <= pos. Returns dst.n_past() (== pos without
  // lightning layers); the caller feeds dst's tokens [returned, pos) first.
  int64_t fork(const SeqMemory& src, int64_t pos, SeqMemory& dst);

  // Aborts unless the pool's ref counts equal the block-table references of `live` (the only
  // holders), tables hold valid distinct pages and cover n_past, and the pool is consistent.
  void check_integrity(std::span<const SeqMemory* const> live) const;

 private:
  struct StateSnapshot {
    std::vector<int32_t> tokens;  // the prefix it belongs to (verified on lookup)
    std::vector<float> states;
    std::list<uint64_t>::iterator lru;
  };
  const StateSnapshot* find_state(uint64_t h, std::span<const int32_t> prefix);
  bool shared_tail(const SeqMemory& s) const;  // the block at n_past is shared or cached

  std::vector<LayerCacheSpec> specs_;
  PagedMemoryOptions o_;
  std::shared_ptr<PageStore> store_;
  BlockPool pool_;
  bool has_states_ = false;
  std::unordered_map<uint64_t, StateSnapshot> states_;  // chain hash at a checkpoint -> snapshot
  std::list<uint64_t> state_lru_;                         // front = evicted first
};

}  // namespace mmx
