// BlockPool: fixed-size KV pages as pure bookkeeping (integers, no tensors), with reference
// counts and a hash-chained prefix cache of full blocks (nano-vllm's BlockManager idea).
//
// A block holds block_size tokens of one sequence's KV. Full blocks may be registered in the
// prefix cache under h = hash(parent_h, tokens); a later sequence with the same prefix finds
// them with lookup(), which verifies the tokens (a hash collision is a miss, never a wrong hit).
// A block whose ref count drops to 0 goes to the back of the free list but stays findable
// until allocate() reuses it — so the free list is also the LRU eviction order.
// Not here: tensors (memory/paged_kv), scheduling policy (engine/scheduler).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace mmx {

class BlockPool {
 public:
  static constexpr uint64_t kNoHash = 0;  // hash of "no parent" and of unregistered blocks

  BlockPool(int n_blocks, int block_size);

  int n_blocks() const { return int(blocks_.size()); }
  int block_size() const { return block_size_; }
  int n_free() const { return int(free_.size()); }  // includes cached blocks with ref 0
  bool can_allocate(int n) const { return n <= n_free(); }

  // Takes the least recently freed block (evicting its cache entry, if any); ref count 1.
  // Precondition: can_allocate(1).
  int allocate();
  void incref(int id);
  // At 0 the block becomes free (and, if registered, stays cached until reused).
  void decref(int id);
  int ref_count(int id) const { return blocks_[id].ref; }

  // Hash of a full block given its parent's hash (kNoHash for the first block).
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);
  // The cached block for (h, tokens), with a reference taken for the caller; -1 on a miss.
  int lookup(uint64_t h, std::span<const int32_t> tokens);
  // Registers a full block (tokens.size() == block_size) under h. A block already registered
  // under the same hash wins (the caller keeps its own copy, unshared).
  void commit(int id, uint64_t h, std::span<const int32_t> tokens);
  bool is_cached(int id) const { return blocks_[id].hash != kNoHash; }
  // Unregisters every block (lookup() misses from now on); ref counts and the free list stay.
  void uncache_all();

  // Aborts (MMX_CHECK) if ref counts, the free list and the hash map disagree.
  void check_integrity() const;

 private:
  struct Block {
    int ref = 0;
    uint64_t hash = kNoHash;
    std::vector<int32_t> tokens;   // the registered tokens (for collision-safe lookup)
    std::list<int>::iterator pos;  // position in free_ when ref == 0
  };
  void uncache(int id);

  int block_size_;
  std::vector<Block> blocks_;
  std::list<int> free_;                      // LRU order: front = reused first
  std::unordered_map<uint64_t, int> cached_;  // hash -> block id
};

}  // namespace mmx
