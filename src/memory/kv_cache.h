// KvCache: the per-sequence memory of one sequence — K/V rows for softmax-attention layers and a
// fixed-size fp32 state per lightning (linear-attention) layer, plus state checkpoints.
//
// This is the contiguous memory of the single-sequence path (generate, logits, bench). Each layer
// says what it keeps (LayerCacheSpec): softmax layers get K/V [capacity, n_kv_heads, head_dim]
// F32, whose rows are absolute positions; lightning layers get a state [n_heads, head_dim,
// head_dim] F32 whose size does not grow with the context (spec §3.5 step 6). Models reach them
// only through k(il)/v(il)/ik(il)/state(il), so the paged cache of the serving engine can replace
// it. With a capacity that is a multiple of a block size B, k(il) reshaped to
// [capacity/B, B, n_kv_heads, head_dim] IS the block-major paged layout with an identity block
// table (page i = block i), which is how the MSA layers (M3) read it.
//
// Rolling back a KV cache is free (forget rows), but a lightning state cannot be un-decayed: it is
// restored from a checkpoint — a snapshot of every lightning state taken when n_past() crosses a
// multiple of `checkpoint_every` (the model splits its forward there; DESIGN "hybrid" rule). The
// newest `max_checkpoints` are kept; rollback(p) returns the position actually restored (the
// newest checkpoint <= p, or 0 with zero states) and the caller re-feeds the tokens from there.
// Memory cost: one checkpoint = state_bytes(); real MiniMax-Text-01 (70 lightning layers × 64
// heads × 128 × 128 × 4 B) = 280 MiB per checkpoint per sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace mmx {

struct LayerCacheSpec {
  enum Kind : uint8_t { kKv, kLinearState } kind = kKv;
  int n_heads = 0;   // kKv: KV heads; kLinearState: lightning heads
  int head_dim = 0;
  int index_dim = 0;  // kKv of an MSA layer: the indexer's key per token (0 = none)
};

class KvCache {
 public:
  // Every layer softmax (the M2 shape).
  KvCache(int n_layers, int64_t capacity, int n_kv_heads, int head_dim);
  // checkpoint_every: tokens between state checkpoints (0 = none; only lightning layers need them).
  // page: tokens per KV page of the block-major view (capacity is rounded up to whole pages).
  KvCache(const std::vector<LayerCacheSpec>& layers, int64_t capacity, int64_t checkpoint_every = 0,
          int max_checkpoints = 4, int page = 16);

  int n_layers() const { return int(specs_.size()); }
  const LayerCacheSpec& spec(int il) const { return specs_[il]; }
  Tensor k(int il) const;      // [rows, n_kv_heads, head_dim] (kKv layers; rows = capacity
  Tensor v(int il) const;      //  rounded up to whole pages)
  Tensor state(int il) const;  // [n_heads, head_dim, head_dim] F32 (kLinearState layers)
  Tensor ik(int il) const;     // [rows, index_dim] F32 (kKv layers with index_dim > 0)
  bool has_states() const { return state_bytes() > 0; }

  // The block-major paged view every attention layer reads and writes through (spec §5.6 layout;
  // the serving engine's shared page pool has the same shape with real block tables):
  int64_t page() const { return page_; }
  Tensor k_pages(int il) const;   // [n_pages, page, n_kv_heads, head_dim]
  Tensor v_pages(int il) const;   // [n_pages, page, n_kv_heads, head_dim]
  Tensor ik_pages(int il) const;  // [n_pages, page, index_dim]
  Tensor block_table() const { return table_.t(); }  // [n_pages] I32, logical block -> page
  // Store the rows of positions pos0.. (through the block table). k, v: [n, n_kv_heads * head_dim];
  // ik: [n, index_dim].
  void write_kv(int il, int64_t pos0, const Tensor& k, const Tensor& v);
  void write_ik(int il, int64_t pos0, const Tensor& ik);

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
  void save_checkpoint();
  std::vector<int64_t> checkpoint_positions() const;
  // Restores the newest state at a position <= p (a checkpoint, or 0 = empty) and returns it.
  int64_t rollback(int64_t p);

  size_t kv_bytes() const;          // K/V buffers (capacity rows)
  size_t state_bytes() const;       // live lightning states
  size_t checkpoint_bytes() const;  // snapshots kept
  size_t size_bytes() const { return kv_bytes() + state_bytes() + checkpoint_bytes(); }

 private:
  struct Checkpoint {
    int64_t pos = 0;
    std::vector<float> states;  // every lightning state, layer order, concatenated
  };
  std::vector<LayerCacheSpec> specs_;
  std::vector<Buffer> k_, v_, ik_, state_;  // indexed by layer; empty Buffers where not used
  std::vector<Checkpoint> checkpoints_;  // ascending pos
  int64_t capacity_ = 0;
  int64_t n_past_ = 0;
  int64_t checkpoint_every_ = 0;
  int max_checkpoints_ = 0;
  int64_t page_ = 16;
  int64_t rows_ = 0;  // allocated rows: capacity_ rounded up to whole pages
  Buffer table_;  // [n_pages] I32 identity block table
};

}  // namespace mmx
