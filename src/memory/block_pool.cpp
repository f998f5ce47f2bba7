#include "memory/block_pool.h"

#include <algorithm>

#include "base/error.h"

namespace mmx {

BlockPool::BlockPool(int n_blocks, int block_size) : block_size_(block_size), blocks_(n_blocks) {
  MMX_CHECK(n_blocks > 0 && block_size > 0, "BlockPool({}, {})", n_blocks, block_size);
  for (int i = 0; i < n_blocks; ++i) blocks_[i].pos = free_.insert(free_.end(), i);
}

int BlockPool::allocate() {
  MMX_CHECK(!free_.empty(), "allocate() with no free block (check can_allocate first)");
  const int id = free_.front();
  free_.pop_front();
  uncache(id);
  blocks_[id].ref = 1;
  return id;
}

void BlockPool::incref(int id) {
  Block& b = blocks_[id];
  if (b.ref == 0) free_.erase(b.pos);  // a cached free block comes back into use
  ++b.ref;
}

void BlockPool::decref(int id) {
  Block& b = blocks_[id];
  MMX_CHECK(b.ref > 0, "decref of free block {}", id);
  if (--b.ref == 0) b.pos = free_.insert(free_.end(), id);
}

uint64_t BlockPool::hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the token ids, then a final avalanche (splitmix64).
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  mix(parent);
  for (int32_t t : tokens) mix(uint64_t(uint32_t(t)));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == kNoHash ? 1 : h;
}

int BlockPool::lookup(uint64_t h, std::span<const int32_t> tokens) {
  const auto it = cached_.find(h);
  if (it == cached_.end()) return -1;
  const Block& b = blocks_[it->second];
  if (!std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) return -1;
  incref(it->second);
  return it->second;
}

void BlockPool::commit(int id, uint64_t h, std::span<const int32_t> tokens) {
  MMX_CHECK(int(tokens.size()) == block_size_, "commit of a partial block ({} tokens)", tokens.size());
  MMX_CHECK(blocks_[id].ref > 0, "commit of free block {}", id);
  if (blocks_[id].hash != kNoHash || cached_.count(h)) return;
  blocks_[id].hash = h;
  blocks_[id].tokens.assign(tokens.begin(), tokens.end());
  cached_[h] = id;
}

void BlockPool::uncache(int id) {
  Block& b = blocks_[id];
  if (b.hash == kNoHash) return;
  cached_.erase(b.hash);
  b.hash = kNoHash;
  b.tokens.clear();
}

void BlockPool::uncache_all() {
  for (int id = 0; id < n_blocks(); ++id) uncache(id);
}

void BlockPool::check_integrity() const {
  std::vector<int> in_free(blocks_.size(), 0);
  for (int id : free_) {
    MMX_CHECK(id >= 0 && id < n_blocks(), "free list holds bad id {}", id);
    ++in_free[id];
  }
  for (int id = 0; id < n_blocks(); ++id) {
    const Block& b = blocks_[id];
    MMX_CHECK(b.ref >= 0, "block {} ref {}", id, b.ref);
    MMX_CHECK(in_free[id] == (b.ref == 0 ? 1 : 0), "block {} ref {} but {} times in the free list",
              id, b.ref, in_free[id]);
    if (b.hash != kNoHash) {
      const auto it = cached_.find(b.hash);
      MMX_CHECK(it != cached_.end() && it->second == id, "block {} hash not mapped to it", id);
      MMX_CHECK(int(b.tokens.size()) == block_size_, "cached block {} has {} tokens", id, b.tokens.size());
    }
  }
  for (const auto& [h, id] : cached_)
    MMX_CHECK(blocks_[id].hash == h, "hash map entry for block {} is stale", id);
}

}  // namespace mmx
