// BlockPool: ref counts, LRU reuse of freed blocks, the hash-chained prefix cache (hits, misses,
// collisions), and check_integrity() after every step of a seeded random workload.
#include "memory/block_pool.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace mmx {
namespace {

std::vector<int32_t> toks(int base, int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

TEST(BlockPool, AllocateFreeAndRefCounts) {
  BlockPool p(4, 16);
  EXPECT_EQ(p.n_free(), 4);
  const int a = p.allocate(), b = p.allocate();
  EXPECT_NE(a, b);
  EXPECT_EQ(p.n_free(), 2);
  p.incref(a);
  EXPECT_EQ(p.ref_count(a), 2);
  p.decref(a);
  EXPECT_EQ(p.n_free(), 2);
  p.decref(a);
  p.decref(b);
  EXPECT_EQ(p.n_free(), 4);
  EXPECT_FALSE(p.can_allocate(5));
  p.check_integrity();
}

TEST(BlockPool, PrefixHitAfterTheOwnerFinished) {
  BlockPool p(4, 4);
  const auto t0 = toks(10, 4), t1 = toks(20, 4);
  const uint64_t h0 = BlockPool::hash_block(BlockPool::kNoHash, t0);
  const uint64_t h1 = BlockPool::hash_block(h0, t1);
  const int a = p.allocate(), b = p.allocate();
  p.commit(a, h0, t0);
  p.commit(b, h1, t1);
  p.decref(a);
  p.decref(b);  // sequence finished: blocks free but still cached
  EXPECT_EQ(p.lookup(h0, t0), a);
  EXPECT_EQ(p.lookup(h1, t1), b);
  EXPECT_EQ(p.ref_count(a), 1);
  EXPECT_EQ(p.n_free(), 2);
  // The same tokens after a different parent chain hash differently: no hit.
  EXPECT_EQ(p.lookup(BlockPool::hash_block(12345, t1), t1), -1);
  p.check_integrity();
}

TEST(BlockPool, CollisionIsAMissNotAWrongHit) {
  BlockPool p(2, 2);
  const auto t = toks(1, 2), other = toks(7, 2);
  const int a = p.allocate();
  p.commit(a, 42, t);  // pretend `other` hashes to 42 too
  EXPECT_EQ(p.lookup(42, other), -1);
  EXPECT_EQ(p.lookup(42, t), a);
  p.check_integrity();
}

TEST(BlockPool, FreedBlocksAreReusedLeastRecentlyFreedFirst) {
  BlockPool p(3, 2);
  const int a = p.allocate(), b = p.allocate(), c = p.allocate();
  for (int id : {a, b, c}) p.commit(id, BlockPool::hash_block(id + 1, toks(id, 2)), toks(id, 2));
  p.decref(b);
  p.decref(a);
  p.decref(c);
  EXPECT_EQ(p.allocate(), b);  // evicts b's cache entry
  EXPECT_FALSE(p.is_cached(b));
  EXPECT_EQ(p.lookup(BlockPool::hash_block(b + 1, toks(b, 2)), toks(b, 2)), -1);
  EXPECT_EQ(p.lookup(BlockPool::hash_block(a + 1, toks(a, 2)), toks(a, 2)), a);  // still cached
  EXPECT_EQ(p.allocate(), c);
  p.check_integrity();
}

TEST(BlockPool, FirstRegistrationWins) {
  BlockPool p(2, 2);
  const auto t = toks(3, 2);
  const uint64_t h = BlockPool::hash_block(BlockPool::kNoHash, t);
  const int a = p.allocate(), b = p.allocate();
  p.commit(a, h, t);
  p.commit(b, h, t);  // duplicate content computed by a second sequence: stays private
  EXPECT_TRUE(p.is_cached(a));
  EXPECT_FALSE(p.is_cached(b));
  p.check_integrity();
}

// Sequences of random lengths sharing random prefixes come and go; after every step the books
// must balance, and when all are gone every block is free.
TEST(BlockPool, RandomWorkloadKeepsIntegrity) {
  constexpr int kBlock = 4;
  BlockPool p(64, kBlock);
  std::mt19937 rng(7);
  struct Seq {
    std::vector<int> blocks;
  };
  std::vector<Seq> live;
  int hits = 0;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && (rng() % 3 == 0 || p.n_free() < 8)) {
      const size_t k = rng() % live.size();
      for (int id : live[k].blocks) p.decref(id);
      live.erase(live.begin() + k);
    } else {
      Seq s;
      const int n_blocks = 1 + int(rng() % 6);
      const int family = int(rng() % 4);  // sequences of one family share their token prefix
      uint64_t h = BlockPool::kNoHash;
      bool matching = true;
      for (int i = 0; i < n_blocks && p.can_allocate(1); ++i) {
        const auto t = toks(family * 1000 + i * kBlock + (i >= 3 ? int(rng() % 2) * 500 : 0), kBlock);
        h = BlockPool::hash_block(h, t);
        int id = matching ? p.lookup(h, t) : -1;
        if (id >= 0) {
          ++hits;
        } else {
          matching = false;
          id = p.allocate();
          p.commit(id, h, t);
        }
        s.blocks.push_back(id);
      }
      live.push_back(s);
    }
    p.check_integrity();
  }
  for (auto& s : live)
    for (int id : s.blocks) p.decref(id);
  p.check_integrity();
  EXPECT_EQ(p.n_free(), p.n_blocks());
  EXPECT_GT(hits, 100);  // the workload really exercises sharing
}

}  // namespace
}  // namespace mmx
