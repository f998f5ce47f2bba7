// PagedMemory: sequences over one shared page pool. No model: a "forward" writes rows whose
// values encode (position, token, sequence-private marker) and advances a toy lightning state,
// so every read-back proves which page a row came from. Covers prefix hits (KV-only and hybrid:
// only at a state snapshot), copy-on-write of a shared tail page, eviction, and a seeded random
// workload with check_integrity() after every operation.
#include "memory/paged_memory.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace mmx {
namespace {

constexpr int64_t kPage = 4;

std::vector<LayerCacheSpec> kv_only() { return {{LayerCacheSpec::kKv, 1, 2}, {LayerCacheSpec::kKv, 1, 2}}; }
std::vector<LayerCacheSpec> hybrid() { return {{LayerCacheSpec::kLinearState, 1, 2}, {LayerCacheSpec::kKv, 1, 2}}; }

float row_value(int64_t pos, int32_t tok) { return float(pos * 1000 + tok); }

// Feeds tokens[n_past, n_past + n) the way a model would: K/V rows (k = value, v = -value, plus a
// marker in the second column), the state accumulates the tokens, checkpoints on multiples.
void feed(PagedMemory& m, SeqMemory& s, const std::vector<int32_t>& tokens, int64_t n, float marker = 0) {
  ASSERT_LE(n, m.fit(s));
  m.reserve(s, n);
  KvCache& kv = *s.kv;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = kv.n_past();
    const float val = row_value(p, tokens[size_t(p)]);
    const float kr[2] = {val, marker}, vr[2] = {-val, marker};
    for (int il = 0; il < kv.n_layers(); ++il) {
      if (kv.spec(il).kind == LayerCacheSpec::kKv) {
        kv.write_kv(il, p, Tensor(const_cast<float*>(kr), DType::kF32, {1, 2}),
                    Tensor(const_cast<float*>(vr), DType::kF32, {1, 2}));
      } else {
        kv.state(il).f32()[0] += float(tokens[size_t(p)]);
      }
    }
    kv.set_n_past(p + 1);
    if (kv.checkpoint_every() > 0 && kv.n_past() % kv.checkpoint_every() == 0) kv.save_checkpoint();
  }
  m.commit(s, tokens);
}

// Every cached row of s reads back as written for these tokens.
void expect_rows(const SeqMemory& s, const std::vector<int32_t>& tokens) {
  const KvCache& kv = *s.kv;
  float state = 0;
  for (int64_t p = 0; p < kv.n_past(); ++p) {
    state += float(tokens[size_t(p)]);
    for (int il = 0; il < kv.n_layers(); ++il) {
      if (kv.spec(il).kind != LayerCacheSpec::kKv) continue;
      const int32_t page = kv.blocks()[size_t(p / kPage)];
      const float* k = kv.k_pages(il).f32() + (page * kPage + p % kPage) * 2;
      const float* v = kv.v_pages(il).f32() + (page * kPage + p % kPage) * 2;
      ASSERT_EQ(k[0], row_value(p, tokens[size_t(p)])) << "pos " << p;
      ASSERT_EQ(v[0], -row_value(p, tokens[size_t(p)])) << "pos " << p;
    }
  }
  for (int il = 0; il < kv.n_layers(); ++il)
    if (kv.spec(il).kind == LayerCacheSpec::kLinearState) EXPECT_EQ(kv.state(il).f32()[0], state);
}

std::vector<int32_t> seq(int n, int base) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = base + i;
  return v;
}

TEST(PagedMemory, PrefixHitMapsTheSamePages) {
  PagedMemory m(kv_only(), {.n_pages = 16, .page = kPage});
  const std::vector<int32_t> a = seq(10, 1);
  SeqMemory sa;
  EXPECT_EQ(m.open(sa, a), 0);
  feed(m, sa, a, 10);
  EXPECT_EQ(m.n_used(), 3);
  // Same first 9 tokens, then different: 2 full blocks (8 tokens) are reused while A still runs.
  std::vector<int32_t> b = seq(12, 1);
  b[9] = 77;
  SeqMemory sb;
  EXPECT_EQ(m.open(sb, b), 8);
  EXPECT_EQ(sb.kv->blocks()[0], sa.kv->blocks()[0]);
  EXPECT_EQ(sb.kv->blocks()[1], sa.kv->blocks()[1]);
  feed(m, sb, b, 4);
  const SeqMemory* live[] = {&sa, &sb};
  m.check_integrity(live);
  expect_rows(sa, a);
  expect_rows(sb, b);
  m.release(sa);
  m.release(sb);
  EXPECT_EQ(m.n_used(), 0);
  m.check_integrity({});
  // After both finished, B's 3 full blocks are still findable (LRU keeps them until reused).
  SeqMemory sc;
  EXPECT_EQ(m.open(sc, b), 11);
  m.release(sc);
}

TEST(PagedMemory, CopyOnWriteOfTheSharedTailPage) {
  PagedMemory m(kv_only(), {.n_pages = 8, .page = kPage});
  const std::vector<int32_t> a = seq(8, 1);
  SeqMemory sa;
  m.open(sa, a);
  feed(m, sa, a, 8, /*marker=*/1);
  // The whole prompt is cached in 2 full blocks; B recomputes its last token, which lands in A's
  // second page: that page is copied first, so A's row 7 keeps A's marker.
  SeqMemory sb;
  EXPECT_EQ(m.open(sb, a), 7);
  EXPECT_EQ(sb.kv->blocks()[1], sa.kv->blocks()[1]);
  EXPECT_EQ(m.fit(sb), 1 + 5 * kPage);  // 1 row left in the mapped pages, 6 free pages - 1 copy
  feed(m, sb, a, 1, /*marker=*/2);
  EXPECT_NE(sb.kv->blocks()[1], sa.kv->blocks()[1]);
  EXPECT_EQ(sb.kv->blocks()[0], sa.kv->blocks()[0]);
  const int32_t pa = sa.kv->blocks()[1], pb = sb.kv->blocks()[1];
  EXPECT_EQ(sa.kv->k_pages(0).f32()[(pa * kPage + 3) * 2 + 1], 1.0f);
  EXPECT_EQ(sb.kv->k_pages(0).f32()[(pb * kPage + 3) * 2 + 1], 2.0f);
  EXPECT_EQ(sb.kv->k_pages(0).f32()[(pb * kPage + 2) * 2 + 1], 1.0f);  // copied rows
  expect_rows(sb, a);
  const SeqMemory* live[] = {&sa, &sb};
  m.check_integrity(live);
  m.release(sa);
  m.release(sb);
  m.check_integrity({});
}

TEST(PagedMemory, HybridHitsOnlyAtAStateSnapshot) {
  PagedMemory m(hybrid(), {.n_pages = 16, .page = kPage, .checkpoint_every = 8, .max_checkpoints = 4});
  const std::vector<int32_t> a = seq(14, 3);
  SeqMemory sa;
  m.open(sa, a);
  feed(m, sa, a, 14);  // snapshot at 8 (14 is not a multiple)
  // 3 full blocks (12 tokens) are cached, but the state exists only at 8.
  std::vector<int32_t> b = a;
  b.push_back(5);
  SeqMemory sb;
  EXPECT_EQ(m.open(sb, b), 8);
  expect_rows(sb, b);  // includes the restored state == sum of the first 8 tokens
  feed(m, sb, b, 7);
  expect_rows(sb, b);
  const SeqMemory* live[] = {&sa, &sb};
  m.check_integrity(live);
  // A prompt shorter than the first snapshot gets no hit at all.
  SeqMemory sc;
  EXPECT_EQ(m.open(sc, seq(7, 3)), 0);
  m.release(sa);
  m.release(sb);
  m.release(sc);
  m.check_integrity({});
}

TEST(PagedMemory, EvictsLeastRecentlyFreedPages) {
  PagedMemory m(kv_only(), {.n_pages = 4, .page = kPage});
  const std::vector<int32_t> a = seq(8, 1), b = seq(8, 100), c = seq(8, 200);
  for (const auto* t : {&a, &b}) {
    SeqMemory s;
    m.open(s, *t);
    feed(m, s, *t, 8);
    m.release(s);
  }
  SeqMemory s;
  m.open(s, c);  // takes the 2 pages freed first: a's
  feed(m, s, c, 8);
  m.release(s);
  SeqMemory sa, sb;
  EXPECT_EQ(m.open(sa, a), 0);
  m.release(sa);
  EXPECT_EQ(m.open(sb, b), 7);
  m.release(sb);
}

TEST(PagedMemory, RandomWorkloadKeepsIntegrity) {
  for (const bool with_states : {false, true}) {
    SCOPED_TRACE(with_states ? "hybrid" : "kv only");
    std::mt19937 rng(7);
    PagedMemory m(with_states ? hybrid() : kv_only(),
                  {.n_pages = 24, .page = kPage, .checkpoint_every = 8, .max_checkpoints = 8, .max_state_snapshots = 3});
    struct Seq {
      std::vector<int32_t> tokens;
      SeqMemory mem;
    };
    std::vector<Seq> live;
    const std::vector<std::vector<int32_t>> stems = {seq(20, 1), seq(20, 50), seq(20, 90)};
    int64_t hits = 0;
    for (int op = 0; op < 400; ++op) {
      const int kind = int(rng() % 4);
      if (kind == 0 && live.size() < 5) {  // a new sequence sharing a random stem prefix
        Seq s;
        const auto& stem = stems[rng() % stems.size()];
        s.tokens.assign(stem.begin(), stem.begin() + 1 + rng() % stem.size());
        for (int i = int(rng() % 6); i > 0; --i) s.tokens.push_back(int32_t(500 + rng() % 3));
        const int64_t hit = m.open(s.mem, s.tokens);
        ASSERT_LT(hit, int64_t(s.tokens.size()));
        hits += hit;
        live.push_back(std::move(s));
      } else if (kind == 1 && !live.empty()) {  // finish one
        const size_t i = rng() % live.size();
        m.release(live[i].mem);
        live.erase(live.begin() + long(i));
      } else if (!live.empty()) {  // feed some pending tokens, or decode a new one
        Seq& s = live[rng() % live.size()];
        if (s.mem.n_past() == int64_t(s.tokens.size())) s.tokens.push_back(int32_t(rng() % 600));
        const int64_t n = std::min<int64_t>(int64_t(s.tokens.size()) - s.mem.n_past(), m.fit(s.mem));
        if (n > 0) feed(m, s.mem, s.tokens, 1 + int64_t(rng() % uint64_t(n)));
      }
      std::vector<const SeqMemory*> ptrs;
      for (const Seq& s : live) ptrs.push_back(&s.mem);
      m.check_integrity(ptrs);
      for (const Seq& s : live) expect_rows(s.mem, s.tokens);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(hits, 0);  // the workload did exercise the prefix cache
    for (Seq& s : live) m.release(s.mem);
    EXPECT_EQ(m.n_used(), 0);
    m.check_integrity({});
  }
}

}  // namespace
}  // namespace mmx
