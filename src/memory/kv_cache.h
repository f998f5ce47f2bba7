// KvCache: the memory of one sequence — its block table into a PageStore of K/V pages (softmax
// and MSA layers) and a fixed-size fp32 state per lightning (linear-attention) layer, plus state
// checkpoints.
//
// Two ways to make one:
//  * standalone (generate, logits, bench): a private PageStore of ceil(capacity / page) pages
//    mapped by the identity block table (page i = block i);
//  * paged (the serving engine): a PageStore shared by every sequence and an initially empty
//    block table; the engine maps pages from its BlockPool as the sequence grows (map_block),
//    shares full prefix pages between sequences and copies a shared page before it is written.
// Layers see neither: they read k_pages/v_pages/ik_pages through block_table() and append rows
// with write_kv/write_ik (spec §5.6: block-major pages, MSA reads whole blocks).
//
// Lightning layers keep a state [n_heads, head_dim, head_dim] F32 whose size does not grow with
// the context (spec §3.5 step 6). Rolling back K/V is free (forget rows), but a state cannot be
// un-decayed: it is restored from a checkpoint — a snapshot of every lightning state taken when
// n_past() crosses a multiple of `checkpoint_every` (the model splits its forward there; DESIGN
// "hybrid" rule). The newest `max_checkpoints` are kept; rollback(p) returns the position
// actually restored (the newest checkpoint <= p, or 0 with zero states) and the caller re-feeds
// the tokens from there. Memory cost: one checkpoint = state_bytes(); real MiniMax-Text-01 (70
// lightning layers × 64 heads × 128 × 128 × 4 B) = 280 MiB per checkpoint per sequence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "memory/page_store.h"
#include "tensor/tensor.h"

namespace mmx {

class KvCache {
 public:
  // Standalone, every layer softmax (the M2 shape). kv_dtype: the pages' dtype (kF32 or kBF16).
  KvCache(int n_layers, int64_t capacity, int n_kv_heads, int head_dim, DType kv_dtype = DType::kF32);
  // Standalone. checkpoint_every: tokens between state checkpoints (0 = none; only lightning
  // layers need them). page: tokens per KV page (capacity is rounded up to whole pages).
  // kv_dtype / ik_dtype: the pages' dtypes (page_store.h; ik_dtype none = kv_dtype).
  KvCache(const std::vector<LayerCacheSpec>& layers, int64_t capacity, int64_t checkpoint_every = 0,
          int max_checkpoints = 4, int page = 16, DType kv_dtype = DType::kF32,
          std::optional<DType> ik_dtype = std::nullopt);
  // Paged over a shared store (its dtype is the pages'): no blocks mapped yet (capacity 0 until
  // map_block).
  KvCache(std::shared_ptr<PageStore> store, const std::vector<LayerCacheSpec>& layers,
          int64_t checkpoint_every, int max_checkpoints);

  int n_layers() const { return int(specs_.size()); }
  const LayerCacheSpec& spec(int il) const { return specs_[size_t(il)]; }
  Tensor state(int il) const;  // [n_heads, head_dim, head_dim] F32 (kLinearState layers)
  bool has_states() const { return state_bytes() > 0; }

  // The block-major paged view every attention layer reads and writes through:
  int64_t page() const { return store_->page(); }
  DType kv_dtype() const { return store_->kv_dtype(); }  // of every K/V page
  DType ik_dtype() const { return store_->ik_dtype(); }  // of every index-key page
  Tensor k_pages(int il) const { return store_->k(il); }    // [n_pages, page, n_kv_heads, head_dim]
  Tensor v_pages(int il) const { return store_->v(il); }    // [n_pages, page, n_kv_heads, head_dim]
  Tensor ik_pages(int il) const { return store_->ik(il); }  // [n_pages, page, index_dim]
  Tensor block_table() const;  // [n_blocks] I32, logical block -> page
  const std::vector<int32_t>& blocks() const { return table_; }
  // Store the rows of positions pos0.. (through the block table). k, v: [n, n_kv_heads * head_dim]
  // F32; ik: [n, index_dim] F32. BF16 pages get each value rounded to nearest even.
  void write_kv(int il, int64_t pos0, const Tensor& k, const Tensor& v);
  void write_ik(int il, int64_t pos0, const Tensor& ik);

  // Paged caches: point logical block `blk` (<= n_blocks()) at page `id`; blk == n_blocks()
  // appends a block and grows capacity() by page().
  void map_block(int64_t blk, int32_t id);
  int64_t n_blocks() const { return int64_t(table_.size()); }
  // Paged caches: unmaps the blocks from `n` on (they must lie past n_past()); returns their pages.
  std::vector<int32_t> unmap_blocks_from(int64_t n);

  int64_t capacity() const { return capacity_; }
  // Positions already written (the next token goes at n_past()).
  int64_t n_past() const { return n_past_; }
  // Commit after a forward. Moving backwards is only allowed without lightning states (use
  // rollback() otherwise).
  void set_n_past(int64_t n);

  // Checkpoints. The model calls save_checkpoint() whenever n_past() lands on a multiple of
  // checkpoint_every() (next_checkpoint(pos) tells it where to split a forward).
  int64_t checkpoint_every() const { return checkpoint_every_; }
  int64_t next_checkpoint(int64_t pos) const;  // smallest multiple > pos, or INT64_MAX
  // The hybrid rule for a forward: how many of the next n tokens one pass may take (it never
  // crosses a state checkpoint; all n without lightning layers).
  int64_t max_chunk(int64_t n) const { return std::min(n, next_checkpoint(n_past_) - n_past_); }
  // Commits n tokens a forward wrote: n_past() += n, and the state checkpoint saved when due.
  void advance(int64_t n);
  void save_checkpoint();
  std::vector<int64_t> checkpoint_positions() const;
  // Every lightning state at checkpoint `pos`, layer order, concatenated (empty if none).
  std::vector<float> checkpoint_states(int64_t pos) const;
  // The live lightning states (at n_past()), in the same layout.
  std::vector<float> live_states() const;
  // Restores the newest state at a position <= p (a checkpoint, or 0 = empty) and returns it.
  int64_t rollback(int64_t p);
  // Starts this (empty) cache at position `pos` with the given lightning states (a checkpoint of
  // another sequence with the same first `pos` tokens): a prefix-cache hit of a hybrid model.
  // Empty `states` = zero states (only at pos 0, or for a model without lightning layers).
  void resume_at(int64_t pos, const std::vector<float>& states);

  size_t kv_bytes() const;          // K/V pages this sequence maps
  size_t state_bytes() const;       // live lightning states
  size_t checkpoint_bytes() const;  // snapshots kept
  size_t size_bytes() const { return kv_bytes() + state_bytes() + checkpoint_bytes(); }

 private:
  struct Checkpoint {
    int64_t pos = 0;
    std::vector<float> states;  // every lightning state, layer order, concatenated
  };
  void init_states();
  void copy_states(const float* src);  // null = zeros

  std::vector<LayerCacheSpec> specs_;
  std::shared_ptr<PageStore> store_;
  std::vector<int32_t> table_;  // logical block -> page id
  std::vector<Buffer> state_;   // indexed by layer; empty Buffers where not used
  std::vector<Checkpoint> checkpoints_;  // ascending pos
  int64_t capacity_ = 0;
  int64_t n_past_ = 0;
  int64_t checkpoint_every_ = 0;
  int max_checkpoints_ = 0;
};

}  // namespace mmx
