// PagedMemory: sequences over one shared page pool. No model: a "forward" writes rows whose
// values encode (position, token, sequence-private marker) and advances a toy lightning state,
// so every read-back proves which page a row came from. Covers prefix hits (KV-only and hybrid:
// only at a state snapshot), copy-on-write of a shared tail page, eviction, and a seeded random
// workload with check_integrity() after every operation.
#include "memory/paged_memory.h"

#include <gtest/gtest.h>

#include <memory>
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
    if (kv.spec(il).kind == LayerCacheSpec::kLinearState) {
      EXPECT_EQ(kv.state(il).f32()[0], state);
    }
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

// ---- BF16 pages (PageStore / KvCache kv_dtype = kBF16) ----

uint16_t bf16_at(const Tensor& pages, int64_t e) { return pages.ptr<uint16_t>()[e]; }

TEST(KvBf16, WriteRoundsToNearestEven) {
  // One layer, 1 head x 4, pages of 4: position 5 is page 1, row 1.
  KvCache kv({{LayerCacheSpec::kKv, 1, 4}}, 8, 0, 4, 4, DType::kBF16);
  ASSERT_EQ(kv.k_pages(0).dtype, DType::kBF16);
  // 1 + 2^-8 is halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): ties go to even, down.
  // 1 + 3·2^-8 is halfway between 0x3F81 (odd) and 0x3F82 (even): up. Just above a tie: up.
  // -2 is exact (0xC000).
  const float k[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.0f};
  const float v[4] = {-k[0], -k[1], -k[2], -k[3]};
  kv.write_kv(0, 5, Tensor(const_cast<float*>(k), DType::kF32, {1, 4}),
              Tensor(const_cast<float*>(v), DType::kF32, {1, 4}));
  const int64_t at = (1 * 4 + 1) * 4;
  const uint16_t want[4] = {0x3F80, 0x3F82, 0x3F81, 0xC000};
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(bf16_at(kv.k_pages(0), at + c), want[c]) << c;
    EXPECT_EQ(bf16_at(kv.v_pages(0), at + c), uint16_t(want[c] ^ 0x8000)) << c;
  }
  EXPECT_EQ(bf16_at(kv.k_pages(0), at - 1), 0);  // nothing else written
  EXPECT_EQ(bf16_at(kv.k_pages(0), at + 4), 0);
}

TEST(KvBf16, PageBytesHalve) {
  const std::vector<LayerCacheSpec> specs = {
      {LayerCacheSpec::kLinearState, 2, 8}, {LayerCacheSpec::kKv, 2, 8, 16}, {LayerCacheSpec::kKv, 4, 8}};
  const PageStore f(specs, 6, 4), b(specs, 6, 4, DType::kBF16);
  EXPECT_EQ(f.kv_dtype(), DType::kF32);
  EXPECT_EQ(b.kv_dtype(), DType::kBF16);
  const size_t f32_page = 4 * (2 * 2 * 8 + 16 + 2 * 4 * 8) * sizeof(float);
  EXPECT_EQ(f.page_bytes(), f32_page);
  EXPECT_EQ(b.page_bytes(), f32_page / 2);
  EXPECT_EQ(b.bytes(), f.bytes() / 2);
  EXPECT_EQ(PageStore::page_bytes(specs, 4), f32_page);
  EXPECT_EQ(PageStore::page_bytes(specs, 4, DType::kBF16), f32_page / 2);
  EXPECT_EQ(b.k(1).dtype, DType::kBF16);
  EXPECT_EQ(b.ik(1).dtype, DType::kBF16);
  const KvCache kf(specs, 10, 0, 4, 4), kb(specs, 10, 0, 4, 4, DType::kBF16);
  EXPECT_EQ(kf.kv_dtype(), DType::kF32);  // the standalone default
  EXPECT_EQ(kb.kv_bytes(), kf.kv_bytes() / 2);
  EXPECT_EQ(kb.state_bytes(), kf.state_bytes());  // lightning states stay F32
  PagedMemoryOptions o;
  o.n_pages = 8;
  o.page = kPage;
  const PagedMemory mf(kv_only(), o);
  o.kv_dtype = DType::kBF16;
  const PagedMemory mb(kv_only(), o);
  EXPECT_EQ(mb.bytes(), mf.bytes() / 2);
}

TEST(KvBf16, CopyPageCopiesBf16Rows) {
  PageStore st({{LayerCacheSpec::kKv, 1, 2, 3}}, 3, 2, DType::kBF16);
  KvCache kv(std::shared_ptr<PageStore>(&st, [](PageStore*) {}), {{LayerCacheSpec::kKv, 1, 2, 3}}, 0, 0);
  kv.map_block(0, 2);
  const float k[4] = {1.5f, -3.0f, 0.25f, 7.0f}, ik[6] = {1, 2, 3, 4, 5, 6};
  kv.write_kv(0, 0, Tensor(const_cast<float*>(k), DType::kF32, {2, 2}),
              Tensor(const_cast<float*>(k), DType::kF32, {2, 2}));
  kv.write_ik(0, 0, Tensor(const_cast<float*>(ik), DType::kF32, {2, 3}));
  st.copy_page(2, 0);
  for (int e = 0; e < 4; ++e) EXPECT_EQ(bf16_to_f32(bf16_at(st.k(0), e)), k[e]) << e;
  for (int e = 0; e < 6; ++e) EXPECT_EQ(bf16_to_f32(bf16_at(st.ik(0), e)), ik[e]) << e;
}

// ---- F8 E4M3 index-key pages (ik_dtype = kF8E4M3: the release's 128 B per token) ----

TEST(KvF8IndexKeys, WriteRoundsSaturatesAndSizes) {
  // One MSA-shaped layer: 1 KV head x 4, index keys of 4; pages of 4. Position 5 = page 1, row 1.
  const std::vector<LayerCacheSpec> specs = {{LayerCacheSpec::kKv, 1, 4, 4}};
  KvCache kv(specs, 8, 0, 4, 4, DType::kF32, DType::kF8E4M3);
  ASSERT_EQ(kv.kv_dtype(), DType::kF32);
  ASSERT_EQ(kv.ik_dtype(), DType::kF8E4M3);
  ASSERT_EQ(kv.ik_pages(0).dtype, DType::kF8E4M3);
  // E4M3 has 3 mantissa bits: 1 + 1/16 is halfway between 1 (0x38, even) and 1.125 (0x39): down;
  // 1 + 3/16 is halfway between 0x39 (odd) and 1.25 (0x3A): up. 500 saturates to 448 (0x7E, no
  // inf in e4m3fn), -2^-10 is half the smallest subnormal: to even, -0 (0x80).
  const float ik[4] = {1.0f + 0x1p-4f, 1.0f + 3 * 0x1p-4f, 500.0f, -0x1p-10f};
  kv.write_ik(0, 5, Tensor(const_cast<float*>(ik), DType::kF32, {1, 4}));
  const uint8_t* p = kv.ik_pages(0).ptr<uint8_t>() + (1 * 4 + 1) * 4;
  const uint8_t want[4] = {0x38, 0x3A, 0x7E, 0x80};
  for (int c = 0; c < 4; ++c) EXPECT_EQ(p[c], want[c]) << c;
  EXPECT_EQ(p[-1], 0);  // nothing else written
  EXPECT_EQ(p[4], 0);
  // Bytes: K/V as before, index keys 1 byte each; none given = the K/V dtype.
  const size_t kv_f32 = 4 * 2 * 4 * sizeof(float);
  EXPECT_EQ(PageStore::page_bytes(specs, 4, DType::kF32, DType::kF8E4M3), kv_f32 + 4 * 4);
  EXPECT_EQ(PageStore::page_bytes(specs, 4, DType::kBF16, DType::kF8E4M3), kv_f32 / 2 + 4 * 4);
  EXPECT_EQ(PageStore::page_bytes(specs, 4, DType::kBF16), (kv_f32 + 4 * 4 * sizeof(float)) / 2);
  const PageStore st(specs, 3, 4, DType::kBF16, DType::kF8E4M3);
  EXPECT_EQ(st.page_bytes(), kv_f32 / 2 + 4 * 4);
  EXPECT_EQ(st.ik(0).dtype, DType::kF8E4M3);
  EXPECT_EQ(st.k(0).dtype, DType::kBF16);
}

TEST(KvF8IndexKeys, OnlyIndexKeysMayBeF8) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<LayerCacheSpec> specs = {{LayerCacheSpec::kKv, 1, 4, 4}};
  EXPECT_DEATH(PageStore(specs, 3, 4, DType::kF8E4M3), "KV pages are F32 or BF16");
  EXPECT_DEATH(PageStore(specs, 3, 4, DType::kF32, DType::kF16), "index-key pages are F32, BF16 or F8_E4M3");
}

}  // namespace
}  // namespace mmx
