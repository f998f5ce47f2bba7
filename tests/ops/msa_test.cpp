// MSA ops (the MSA family of ops/ops.h): the references proven by hand (known block scores and selections, the
// causal partial local block, per-group independence, exact ties, a masked-dense formulation of
// block-sparse attention), then the fast paths against them over a grid of block sizes, K,
// contexts, query positions, group counts and shuffled block tables; the contract of the
// selection output; sparse == dense for contexts <= K·B; paged == contiguous attention;
// multi-query == one query at a time; thread-count invariance.
//
// Tolerances: attention outputs use tol::kF32Reduce (fp32 softmax over <= a few thousand keys vs
// fp64, the same budget as attention_softmax). The selection is compared exactly, except that a
// block may swap places with another across the top-(K-1) cutoff when their fp64 scores are
// within 1e-5 · (|iq|·|ik| scale) — the fp32 dots may rank such near-ties either way
// (docs/numerics.md, "MSA"); every such swap is verified against the fp64 scores.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "ops/ops.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"
#include "msa_cases.h"

namespace mmx::testing {
namespace {

// A sequence of T tokens in block-major pages behind a shuffled block table, plus contiguous
// copies of its K/V for the dense ops::attention_softmax.
struct Paged {
  int64_t T = 0, B = 0, n_kvh = 0, d = 0, di = 0, n_blocks = 0, n_pages = 0;
  Buffer k, v, ik;  // [n_pages, B, n_kvh, d] x2, [n_pages, B, di]
  Buffer bt;        // [n_blocks] I32
  Buffer kc, vc;    // [T, n_kvh, d]
};

Paged make_paged(int64_t T, int64_t B, int64_t n_kvh, int64_t d, int64_t di, uint64_t seed,
                 int64_t extra_pages = 2) {
  Paged s;
  s.T = T, s.B = B, s.n_kvh = n_kvh, s.d = d, s.di = di;
  s.n_blocks = (T + B - 1) / B;
  s.n_pages = s.n_blocks + extra_pages;
  s.k = random_tensor({s.n_pages, B, n_kvh, d}, seed);
  s.v = random_tensor({s.n_pages, B, n_kvh, d}, seed + 1);
  s.ik = random_tensor({s.n_pages, B, di}, seed + 2);
  std::vector<int32_t> perm(size_t(s.n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed + 3);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.bt = Buffer(DType::kI32, {std::max<int64_t>(s.n_blocks, 1)});
  for (int64_t b = 0; b < s.n_blocks; ++b) s.bt.t().ptr<int32_t>()[b] = perm[size_t(b)];
  s.kc = Buffer(DType::kF32, {T, n_kvh, d});
  s.vc = Buffer(DType::kF32, {T, n_kvh, d});
  for (int64_t j = 0; j < T; ++j) {
    const int64_t off = (int64_t(perm[size_t(j / B)]) * B + j % B) * n_kvh * d;
    std::copy_n(s.k.f32() + off, n_kvh * d, s.kc.f32() + j * n_kvh * d);
    std::copy_n(s.v.f32() + off, n_kvh * d, s.vc.f32() + j * n_kvh * d);
  }
  return s;
}

Buffer positions_of(const std::vector<int32_t>& p) {
  Buffer b(DType::kI32, {int64_t(p.size())});
  std::copy(p.begin(), p.end(), b.t().ptr<int32_t>());
  return b;
}

// The valid prefix of selected[g, i, :].
std::vector<int32_t> row_of(const Tensor& sel, int64_t g, int64_t i) {
  const int64_t n_q = sel.dim(1), K = sel.dim(2);
  const int32_t* s = sel.ptr<int32_t>() + (g * n_q + i) * K;
  std::vector<int32_t> r;
  for (int64_t a = 0; a < K && s[a] >= 0; ++a) r.push_back(s[a]);
  return r;
}

// The output contract of msa_index_select for one row.
void expect_contract(const Tensor& sel, const std::vector<int32_t>& pos, int64_t B) {
  const int64_t G = sel.dim(0), n_q = sel.dim(1), K = sel.dim(2);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      SCOPED_TRACE(fmt::format("g={} i={} p={}", g, i, pos[size_t(i)]));
      const int64_t local = pos[size_t(i)] / B, nvis = local + 1;
      const int32_t* s = sel.ptr<int32_t>() + (g * n_q + i) * K;
      const int64_t n_valid = std::min(nvis, K);
      for (int64_t a = 0; a < K; ++a) {
        if (a >= n_valid) {
          EXPECT_EQ(s[a], -1) << "padding slot " << a;
          continue;
        }
        EXPECT_GE(s[a], 0);
        EXPECT_LE(s[a], local);
        for (int64_t c = 0; c < a; ++c) EXPECT_NE(s[a], s[c]) << "repeated block";
      }
      EXPECT_EQ(s[n_valid - 1], local) << "local block not in the last valid slot";
    }
}

// Rows compared / rows where fast and ref differ (near-ties), over the whole test binary.
int64_t g_rows_compared = 0, g_rows_swapped = 0;

// Fast selection vs ref: identical, except swaps across the cutoff between blocks whose fp64
// scores are within tol of it.
void expect_selection_matches(const Tensor& iq, const Paged& s, const std::vector<int32_t>& pos,
                              const Tensor& fast, const Tensor& ref, double tol) {
  const int64_t G = fast.dim(0), n_q = fast.dim(1), K = fast.dim(2);
  std::vector<double> S(size_t(G * n_q * s.n_blocks));
  Buffer pb = positions_of(pos);
  ops::ref::msa_block_scores(iq, s.ik, s.bt, pb, s.T, s.n_blocks, S.data());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const std::vector<int32_t> f = row_of(fast, g, i), r = row_of(ref, g, i);
      ++g_rows_compared;
      if (f == r) continue;
      ++g_rows_swapped;
      SCOPED_TRACE(fmt::format("g={} i={} p={} K={}", g, i, pos[size_t(i)], K));
      ASSERT_EQ(f.size(), r.size());
      ASSERT_EQ(f.back(), r.back());
      const double* sc = S.data() + (g * n_q + i) * s.n_blocks;
      const double cutoff = sc[r[r.size() - 2]];  // the worst selected non-local block (ref)
      const std::set<int32_t> fs(f.begin(), f.end()), rs(r.begin(), r.end());
      for (int32_t b : fs)
        if (!rs.count(b)) {
          EXPECT_GE(sc[b], cutoff - tol) << "fast picked block " << b;
        }
      for (int32_t b : rs)
        if (!fs.count(b)) {
          EXPECT_LE(sc[b], cutoff + tol) << "fast dropped block " << b;
        }
    }
}

// ---- the reference, by hand ----

TEST(MsaRef, KnownSelection) {
  // index_dim 1, iq = 1: z(j) = ik(j). B = 2, 10 tokens -> blocks {0,5} {1,1} {7,0} {3,2} {4,9}.
  // Query at p = 9, K = 3: nvis = 5 > 3 -> top-2 of blocks 0..3 by max (5, 1, 7, 3) = 2, 0; then
  // the local block 4.
  Paged s = make_paged(10, 2, 1, 4, 1, 1, 0);
  const float z[10] = {0, 5, 1, 1, 7, 0, 3, 2, 4, 9};
  for (int64_t j = 0; j < 10; ++j) s.ik.f32()[s.bt.t().ptr<int32_t>()[j / 2] * 2 + j % 2] = z[j];
  Buffer iq = f32_tensor({1.0f});
  Tensor iqt = iq.t().reshape({1, 1, 1});
  Buffer pos = i32_tensor({9});
  Buffer sel(DType::kI32, {1, 1, 3}), sel_fast(DType::kI32, {1, 1, 3});
  ops::ref::msa_index_select(iqt, s.ik, s.bt, pos, 10, sel.t());
  EXPECT_EQ(row_of(sel, 0, 0), (std::vector<int32_t>{2, 0, 4}));
  ops::msa_index_select(iqt, s.ik, s.bt, pos, 10, sel_fast.t());
  EXPECT_EQ(row_of(sel_fast, 0, 0), (std::vector<int32_t>{2, 0, 4}));
  // K = 5 >= nvis: everything, ascending. K = 7: then two -1.
  Buffer sel7(DType::kI32, {1, 1, 7});
  ops::ref::msa_index_select(iqt, s.ik, s.bt, pos, 10, sel7.t());
  const int32_t want7[7] = {0, 1, 2, 3, 4, -1, -1};
  for (int a = 0; a < 7; ++a) EXPECT_EQ(sel7.t().ptr<int32_t>()[a], want7[a]);
  // K = 1: only the local block.
  Buffer sel1(DType::kI32, {1, 1, 1});
  ops::msa_index_select(iqt, s.ik, s.bt, pos, 10, sel1.t());
  EXPECT_EQ(sel1.t().ptr<int32_t>()[0], 4);
}

TEST(MsaRef, CausalPartialBlock) {
  // B = 4, 16 tokens, index_dim 1, iq = 1. Query A at p = 9 (local block 2 = keys 8..11, of which
  // 8, 9 visible), query C at p = 15. Key 10 (block 2, future for A) and key 14 (block 3, future
  // for A) carry a huge score; everything else small.
  Paged s = make_paged(16, 4, 1, 4, 1, 2, 1);
  auto set_z = [&](int64_t j, float z) { s.ik.f32()[s.bt.t().ptr<int32_t>()[j / 4] * 4 + j % 4] = z; };
  for (int64_t j = 0; j < 16; ++j) set_z(j, 0.01f * float(j % 5));
  set_z(10, 100.0f);
  set_z(14, 100.0f);
  set_z(1, 1.0f);  // block 0 is A's best visible non-local block
  Buffer iq = f32_tensor({1.0f, 1.0f});
  Tensor iqt = iq.t().reshape({2, 1, 1});
  const std::vector<int32_t> p = {9, 15};
  Buffer pos = positions_of(p);
  std::vector<double> S(2 * 4);
  ops::ref::msa_block_scores(iqt, s.ik, s.bt, pos, 16, 4, S.data());
  EXPECT_DOUBLE_EQ(S[2], double(0.01f * 4));  // A's local block: keys 8, 9 only (z 0.03, 0.04)
  EXPECT_EQ(S[3], -std::numeric_limits<double>::infinity());  // A: block 3 is in the future
  EXPECT_DOUBLE_EQ(S[4 + 2], 100.0);                           // C sees all of block 2
  // K = 2: A -> {0 (score 1), 2}; C -> {2 (100, includes key 10), 3}.
  Buffer sel(DType::kI32, {1, 2, 2}), sel_fast(DType::kI32, {1, 2, 2});
  ops::ref::msa_index_select(iqt, s.ik, s.bt, pos, 16, sel.t());
  ops::msa_index_select(iqt, s.ik, s.bt, pos, 16, sel_fast.t());
  for (const Buffer* b : {&sel, &sel_fast}) {
    EXPECT_EQ(row_of(*b, 0, 0), (std::vector<int32_t>{0, 2}));
    EXPECT_EQ(row_of(*b, 0, 1), (std::vector<int32_t>{2, 3}));
  }
  // The same for A alone (a different tiling of rows in the fast path).
  Buffer pos_a = i32_tensor({9}), sel_a(DType::kI32, {1, 1, 2}), iq_a = f32_tensor({1.0f});
  ops::msa_index_select(iq_a.t().reshape({1, 1, 1}), s.ik, s.bt, pos_a, 16, sel_a.t());
  EXPECT_EQ(row_of(sel_a, 0, 0), (std::vector<int32_t>{0, 2}));
}

TEST(MsaRef, GroupsSelectIndependently) {
  // Two index heads with different queries pick different blocks from the one shared index key:
  // block 3 holds a key along e0, block 7 one along e1; iq_0 = e0, iq_1 = e1. K = 2, p = 39.
  const int64_t B = 4, di = 8, T = 40;
  Paged s = make_paged(T, B, 2, 4, di, 3, 0);
  for (int64_t n = 0; n < s.ik.t().numel(); ++n) s.ik.f32()[n] *= 0.01f;
  auto ik_row = [&](int64_t j) { return s.ik.f32() + (s.bt.t().ptr<int32_t>()[j / B] * B + j % B) * di; };
  ik_row(13)[0] = 5.0f;
  ik_row(29)[1] = 5.0f;
  Buffer iq(DType::kF32, {1, 2, di});
  iq.f32()[0] = 1.0f;
  iq.f32()[di + 1] = 1.0f;
  Buffer pos = i32_tensor({39});
  for (bool fast : {false, true}) {
    Buffer sel(DType::kI32, {2, 1, 2});
    if (fast) ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    else ops::ref::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    EXPECT_EQ(row_of(sel, 0, 0), (std::vector<int32_t>{3, 9})) << fast;
    EXPECT_EQ(row_of(sel, 1, 0), (std::vector<int32_t>{7, 9})) << fast;
  }
}

TEST(MsaRef, ExactTiesGoToLowerIds) {
  // Every page holds the same index keys, so every non-local block has exactly the same score in
  // fp32 and fp64: the winners are the lowest ids, in ascending order. Then a pattern with
  // ties at the cutoff: blocks 1, 4, 6 share the best score, blocks 2, 5 the second.
  const int64_t B = 8, di = 16, T = 100;  // 13 blocks, local 12
  Paged s = make_paged(T, B, 1, 4, di, 4, 0);
  for (int64_t pg = 1; pg < s.n_pages; ++pg)
    std::copy_n(s.ik.f32(), B * di, s.ik.f32() + pg * B * di);
  Buffer iq = random_tensor({1, 1, di}, 5);
  Buffer pos = i32_tensor({99});
  for (bool fast : {false, true}) {
    Buffer sel(DType::kI32, {1, 1, 5});
    if (fast) ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    else ops::ref::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    EXPECT_EQ(row_of(sel, 0, 0), (std::vector<int32_t>{0, 1, 2, 3, 12})) << fast;
  }
  // Scores by block: make block b's keys all equal to a multiple of iq -> score level[b].
  const float level[13] = {1, 5, 4, 2, 5, 4, 5, 3, 1, 0, 2, 3, 9};
  for (int64_t j = 0; j < T; ++j) {
    float* row = s.ik.f32() + (s.bt.t().ptr<int32_t>()[j / B] * B + j % B) * di;
    for (int64_t c = 0; c < di; ++c) row[c] = level[j / B] * (c == 3 ? 1.0f : 0.0f);
  }
  std::fill_n(iq.f32(), di, 0.0f);
  iq.f32()[3] = 1.0f;
  for (bool fast : {false, true}) {
    Buffer sel(DType::kI32, {1, 1, 5});  // top-4: 1, 4, 6 (5), then 2 (4, beats 5 on id)
    if (fast) ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    else ops::ref::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    EXPECT_EQ(row_of(sel, 0, 0), (std::vector<int32_t>{1, 4, 6, 2, 12})) << fast;
  }
}

// fp64 attention with an explicit additive mask over a contiguous cache: mask[i][j] = 0 if key j
// is allowed for query i and KV head g, -inf otherwise (a different formulation of the sparse op).
void masked_dense(const Tensor& q, const Paged& s, const std::vector<int32_t>& pos,
                  const Tensor& sel, float scale, Tensor& out) {
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2), group = n_heads / s.n_kvh;
  for (int64_t i = 0; i < n_q; ++i)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / group;
      const std::vector<int32_t> blocks = row_of(sel, g, i);
      std::vector<double> logit(size_t(s.T));
      for (int64_t j = 0; j < s.T; ++j) {
        const bool ok = j <= pos[size_t(i)] &&
                        std::find(blocks.begin(), blocks.end(), int32_t(j / s.B)) != blocks.end();
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c)
          dot += double(q.f32()[(i * n_heads + h) * d + c]) * s.kc.f32()[(j * s.n_kvh + g) * d + c];
        logit[size_t(j)] = scale * dot + (ok ? 0.0 : -std::numeric_limits<double>::infinity());
      }
      const double m = *std::max_element(logit.begin(), logit.end());
      double sum = 0.0;
      for (double& e : logit) sum += (e = std::exp(e - m));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < s.T; ++j) acc += logit[size_t(j)] * s.vc.f32()[(j * s.n_kvh + g) * d + c];
        out.f32()[(i * n_heads + h) * d + c] = float(acc / sum);
      }
    }
}

TEST(MsaRef, SparseEqualsMaskedDense) {
  const int64_t B = 4, T = 37, n_heads = 6, n_kvh = 2, d = 8, K = 3;
  Paged s = make_paged(T, B, n_kvh, d, 8, 6);
  const std::vector<int32_t> p = {36, 20, 3, 35};
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({4, n_kvh, 8}, 7), q = random_tensor({4, n_heads, d}, 8, 2.0f);
  Buffer sel(DType::kI32, {n_kvh, 4, K});
  ops::ref::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
  Buffer out(DType::kF32, {4, n_heads, d}), want(DType::kF32, {4, n_heads, d}), fast(DType::kF32, {4, n_heads, d});
  ops::ref::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.35f, out.t());
  masked_dense(q, s, p, sel, 0.35f, want.t());
  EXPECT_ALLCLOSE(out.t(), want.t(), tol::kF32);
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.35f, fast.t());
  EXPECT_ALLCLOSE(fast.t(), out.t(), tol::kF32Reduce);
}

TEST(MsaRef, SelectionStatsByHand) {
  // All blocks selected -> coverage 1, recall 1. Only the local block selected, and every key
  // equal -> mass is proportional to visible keys per block.
  const int64_t B = 4, T = 18, n_kvh = 1, d = 4;
  Paged s = make_paged(T, B, n_kvh, d, 4, 9);
  Buffer q(DType::kF32, {1, 2, d});  // q = 0: uniform attention over the 18 visible keys
  Buffer pos = i32_tensor({17});
  Buffer all(DType::kI32, {1, 1, 5}), loc(DType::kI32, {1, 1, 2});
  for (int a = 0; a < 5; ++a) all.t().ptr<int32_t>()[a] = a;
  loc.t().ptr<int32_t>()[0] = 4;
  loc.t().ptr<int32_t>()[1] = -1;
  for (bool fast : {false, true}) {
    Buffer rec(DType::kF32, {1, 1}), cov(DType::kF32, {1, 1});
    auto stats = fast ? ops::msa_selection_stats : ops::ref::msa_selection_stats;
    stats(q, s.k, s.bt, pos, T, all, 1.0f, 16, rec.t(), cov.t());
    EXPECT_FLOAT_EQ(rec.f32()[0], 1.0f);
    EXPECT_NEAR(cov.f32()[0], 1.0f, 1e-6);
    // Local block 4 holds keys 16, 17: mass 2/18. Top-2 by mass: blocks 0 and 1 (4/18 each,
    // ties -> lower ids), so the local block is not among them: recall 0.
    stats(q, s.k, s.bt, pos, T, loc, 1.0f, 2, rec.t(), cov.t());
    EXPECT_FLOAT_EQ(rec.f32()[0], 0.0f);
    EXPECT_NEAR(cov.f32()[0], 2.0 / 18.0, 1e-6);
    // top_n 16 > nvis 5: the true set is all 5 blocks, one of them selected.
    stats(q, s.k, s.bt, pos, T, loc, 1.0f, 16, rec.t(), cov.t());
    EXPECT_FLOAT_EQ(rec.f32()[0], 0.2f);
  }
}

// ---- fast vs ref ----

struct GridCase {
  int64_t B, K, T, G, n_q;
  bool decode;  // positions T-n_q..T-1, else random in [0, T)
};

void check_select(const GridCase& c, int64_t di, uint64_t seed) {
  SCOPED_TRACE(fmt::format("B={} K={} T={} G={} n_q={} decode={} di={}", c.B, c.K, c.T, c.G, c.n_q,
                           c.decode, di));
  Paged s = make_paged(c.T, c.B, 1, 1, di, seed, 3);
  std::mt19937_64 rng(seed + 10);
  std::vector<int32_t> p(size_t(c.n_q));
  for (int64_t i = 0; i < c.n_q; ++i)
    p[size_t(i)] = c.decode ? int32_t(c.T - c.n_q + i)
                            : int32_t(std::uniform_int_distribution<int64_t>(0, c.T - 1)(rng));
  if (c.decode && c.T < c.n_q)
    for (auto& x : p) x = std::max<int32_t>(x, 0);
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({c.n_q, c.G, di}, seed + 11);
  Buffer sel(DType::kI32, {c.G, c.n_q, c.K}), sel_ref(DType::kI32, {c.G, c.n_q, c.K});
  ops::msa_index_select(iq, s.ik, s.bt, pos, c.T, sel.t());
  ops::ref::msa_index_select(iq, s.ik, s.bt, pos, c.T, sel_ref.t());
  expect_contract(sel, p, c.B);
  expect_contract(sel_ref, p, c.B);
  // |z| <~ |iq||ik| ~ di for unit normals; fp32 dot error ~ sqrt(di)·2^-24·di.
  expect_selection_matches(iq, s, p, sel, sel_ref, 1e-5 * double(di));
}

TEST(MsaSelect, FastVsRefGrid) {
  uint64_t seed = 1000;
  for (int64_t B : {4, 16, 128})
    for (int64_t K : {1, 2, 3, 16}) {
      const int64_t kb = K * B;
      std::vector<int64_t> Ts = {1, 2, B - 1, B, B + 1, kb - 1, kb, kb + 1, kb + B + 3, 3 * kb + 5};
      if (B == 4) Ts.push_back(40 * kb + 3);
      for (int64_t T : Ts) {
        if (T < 1) continue;
        for (int64_t G : {1, 2, 4})
          for (int64_t n_q : {1, 3, 8})
            for (bool decode : {true, false}) {
              if (decode && n_q > T) continue;
              const int64_t di = B == 128 ? 16 : (G == 2 ? 13 : 8);
              check_select({B, K, T, G, n_q, decode}, di, seed += 17);
            }
      }
    }
  std::printf("selection rows compared: %lld, differing from ref by a near-tie swap: %lld\n",
              (long long)g_rows_compared, (long long)g_rows_swapped);
}

TEST(MsaSelect, M3Shapes) {
  // index_dim 128, B 128, K 16, 4 heads; decode and multi-query decode past K·B, and a chunk of
  // 70 queries (> one internal query chunk of 64).
  check_select({128, 16, 5000, 4, 1, true}, 128, 1);
  check_select({128, 16, 5000, 4, 8, true}, 128, 2);
  check_select({128, 16, 3000, 4, 70, false}, 128, 3);
}

using AttnCase = testing::MsaAttnCase;


void check_sparse(const AttnCase& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("B={} K={} T={} heads={}/{} d={} n_q={} decode={}", c.B, c.K, c.T,
                           c.n_heads, c.n_kvh, c.d, c.n_q, c.decode));
  Paged s = make_paged(c.T, c.B, c.n_kvh, c.d, 8, seed);
  const std::vector<int32_t> p = make_positions(c.T, c.n_q, c.decode, seed + 1);
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({c.n_q, c.n_kvh, 8}, seed + 2);
  Buffer q = random_tensor({c.n_q, c.n_heads, c.d}, seed + 3, 1.5f);
  Buffer sel(DType::kI32, {c.n_kvh, c.n_q, c.K});
  ops::ref::msa_index_select(iq, s.ik, s.bt, pos, c.T, sel.t());
  const float scale = float(1.0 / std::sqrt(double(c.d)));
  Buffer out(DType::kF32, {c.n_q, c.n_heads, c.d}), out_ref(DType::kF32, {c.n_q, c.n_heads, c.d});
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, c.T, sel, scale, out.t());
  ops::ref::attention_block_sparse(q, s.k, s.v, s.bt, pos, c.T, sel, scale, out_ref.t());
  EXPECT_ALLCLOSE(out.t(), out_ref.t(), tol::kF32Reduce);
  // Dense paged, fast vs ref and vs the contiguous attention_softmax one query at a time.
  Buffer dense(DType::kF32, {c.n_q, c.n_heads, c.d}), dense_ref(DType::kF32, {c.n_q, c.n_heads, c.d});
  ops::attention_dense_paged(q, s.k, s.v, s.bt, pos, c.T, scale, dense.t());
  ops::ref::attention_dense_paged(q, s.k, s.v, s.bt, pos, c.T, scale, dense_ref.t());
  EXPECT_ALLCLOSE(dense.t(), dense_ref.t(), tol::kF32Reduce);
  Buffer contig(DType::kF32, {c.n_q, c.n_heads, c.d});
  for (int64_t i = 0; i < c.n_q; ++i) {
    Tensor qi = q.t().rows_range(i, i + 1), oi = contig.t().rows_range(i, i + 1);
    ops::attention_softmax(qi, s.kc, s.vc, p[size_t(i)], scale, oi);
  }
  EXPECT_ALLCLOSE(dense.t(), contig.t(), tol::kF32Reduce);
  // Context within K·B: every visible block is selected, so sparse == dense (same bits: same key
  // list, same code).
  if (c.T <= c.K * c.B) {
    EXPECT_TRUE(bitwise_equal(out.t(), dense.t()));
  }
}

TEST(MsaAttention, FastVsRefGrid) {
  testing::for_each_msa_grid_case(5000, check_sparse);
}

TEST(MsaAttention, M3Shapes) {
  // head_dim 128, group 16 (4 of M3's 64 heads per KV head: 16/1), B 128, K 16, past K·B.
  check_sparse({128, 16, 4500, 16, 1, 128, 2, true}, 1);
  check_sparse({128, 16, 2048, 32, 2, 128, 3, false}, 2);
}

TEST(MsaAttention, ContextWithinKBEqualsDense) {
  // T <= K·B: msa_index_select keeps every block and sparse attention equals the contiguous
  // dense attention_softmax (chunked prefill: consecutive positions, one call).
  const int64_t B = 16, K = 4, T = 64, n_heads = 8, n_kvh = 2, d = 32, n_q = 10, pos0 = T - n_q;
  Paged s = make_paged(T, B, n_kvh, d, 16, 11);
  std::vector<int32_t> p(n_q);
  std::iota(p.begin(), p.end(), int32_t(pos0));
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({n_q, n_kvh, 16}, 12), q = random_tensor({n_q, n_heads, d}, 13);
  Buffer sel(DType::kI32, {n_kvh, n_q, K});
  ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
  for (int64_t g = 0; g < n_kvh; ++g)
    for (int64_t i = 0; i < n_q; ++i)
      EXPECT_EQ(row_of(sel, g, i).size(), size_t(p[size_t(i)] / B + 1));
  Buffer out(DType::kF32, {n_q, n_heads, d}), want(DType::kF32, {n_q, n_heads, d});
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.2f, out.t());
  ops::attention_softmax(q, s.kc, s.vc, pos0, 0.2f, want.t());
  EXPECT_ALLCLOSE(out.t(), want.t(), tol::kF32Reduce);
  ops::ref::attention_softmax(q, s.kc, s.vc, pos0, 0.2f, want.t());
  EXPECT_ALLCLOSE(out.t(), want.t(), tol::kF32Reduce);
}

TEST(MsaAttention, SlotOrderDoesNotMatter) {
  const int64_t B = 8, K = 5, T = 200, n_heads = 4, n_kvh = 2, d = 16, n_q = 3;
  Paged s = make_paged(T, B, n_kvh, d, 8, 14);
  const std::vector<int32_t> p = {199, 150, 77};
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({n_q, n_kvh, 8}, 15), q = random_tensor({n_q, n_heads, d}, 16);
  Buffer sel(DType::kI32, {n_kvh, n_q, K});
  ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
  Buffer a(DType::kF32, {n_q, n_heads, d}), b(DType::kF32, {n_q, n_heads, d});
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.25f, a.t());
  // the valid prefix of every row reversed (the local block now first)
  Buffer sel3 = copy_of(sel.t());
  for (int64_t r = 0; r < n_kvh * n_q; ++r) {
    int32_t* row = sel3.t().ptr<int32_t>() + r * K;
    int64_t n = 0;
    while (n < K && row[n] >= 0) ++n;
    std::reverse(row, row + n);
  }
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel3, 0.25f, b.t());
  EXPECT_TRUE(bitwise_equal(a.t(), b.t()));
}

TEST(MsaAttention, MultiQueryEqualsSequential) {
  // One call with 6 queries (multi-query decode at T-6..T-1 and two earlier positions) gives the
  // same bits as six single-query calls, for the selection and both attentions.
  const int64_t B = 16, K = 4, T = 300, n_heads = 8, n_kvh = 4, d = 24, di = 16;
  Paged s = make_paged(T, B, n_kvh, d, di, 17);
  const std::vector<int32_t> p = {294, 295, 296, 297, 298, 299, 40, 133};
  const int64_t n_q = int64_t(p.size());
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({n_q, n_kvh, di}, 18), q = random_tensor({n_q, n_heads, d}, 19);
  Buffer sel(DType::kI32, {n_kvh, n_q, K}), out(DType::kF32, {n_q, n_heads, d}), dense(DType::kF32, {n_q, n_heads, d});
  ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.2f, out.t());
  ops::attention_dense_paged(q, s.k, s.v, s.bt, pos, T, 0.2f, dense.t());
  for (int64_t i = 0; i < n_q; ++i) {
    SCOPED_TRACE(i);
    Buffer pi = positions_of({p[size_t(i)]});
    Buffer si(DType::kI32, {n_kvh, 1, K}), oi(DType::kF32, {1, n_heads, d}), di_(DType::kF32, {1, n_heads, d});
    Tensor iqi = iq.t().rows_range(i, i + 1), qi = q.t().rows_range(i, i + 1);
    ops::msa_index_select(iqi, s.ik, s.bt, pi, T, si.t());
    for (int64_t g = 0; g < n_kvh; ++g) EXPECT_EQ(row_of(si, g, 0), row_of(sel, g, i));
    ops::attention_block_sparse(qi, s.k, s.v, s.bt, pi, T, si, 0.2f, oi.t());
    ops::attention_dense_paged(qi, s.k, s.v, s.bt, pi, T, 0.2f, di_.t());
    EXPECT_EQ(0, std::memcmp(oi.f32(), out.f32() + i * n_heads * d, size_t(n_heads * d) * 4));
    EXPECT_EQ(0, std::memcmp(di_.f32(), dense.f32() + i * n_heads * d, size_t(n_heads * d) * 4));
  }
}

TEST(MsaAttention, ThreadInvariance) {
  const int64_t B = 16, K = 4, T = 1000, n_heads = 12, n_kvh = 4, d = 32, di = 32, n_q = 70;
  Paged s = make_paged(T, B, n_kvh, d, di, 20);
  const std::vector<int32_t> p = make_positions(T, n_q, false, 21);
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({n_q, n_kvh, di}, 22), q = random_tensor({n_q, n_heads, d}, 23);
  std::vector<Buffer> sels, outs, denses, recs, covs;
  const int saved = ops::n_threads();
  for (int nt : {1, 2, 3}) {
    ops::set_n_threads(nt);
    Buffer sel(DType::kI32, {n_kvh, n_q, K}), out(DType::kF32, {n_q, n_heads, d}), dense(DType::kF32, {n_q, n_heads, d});
    Buffer rec(DType::kF32, {n_kvh, n_q}), cov(DType::kF32, {n_kvh, n_q});
    ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
    ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 0.2f, out.t());
    ops::attention_dense_paged(q, s.k, s.v, s.bt, pos, T, 0.2f, dense.t());
    ops::msa_selection_stats(q, s.k, s.bt, pos, T, sel, 0.2f, 16, rec.t(), cov.t());
    sels.push_back(std::move(sel));
    outs.push_back(std::move(out));
    denses.push_back(std::move(dense));
    recs.push_back(std::move(rec));
    covs.push_back(std::move(cov));
  }
  ops::set_n_threads(saved);
  for (size_t t = 1; t < sels.size(); ++t) {
    EXPECT_TRUE(bitwise_equal(sels[t].t(), sels[0].t())) << t;
    EXPECT_TRUE(bitwise_equal(outs[t].t(), outs[0].t())) << t;
    EXPECT_TRUE(bitwise_equal(denses[t].t(), denses[0].t())) << t;
    EXPECT_TRUE(bitwise_equal(recs[t].t(), recs[0].t())) << t;
    EXPECT_TRUE(bitwise_equal(covs[t].t(), covs[0].t())) << t;
  }
}

TEST(MsaStats, FastVsRef) {
  const int64_t B = 8, K = 4, T = 260, n_heads = 6, n_kvh = 2, d = 16, di = 8, n_q = 5;
  Paged s = make_paged(T, B, n_kvh, d, di, 24);
  const std::vector<int32_t> p = make_positions(T, n_q, false, 25);
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({n_q, n_kvh, di}, 26), q = random_tensor({n_q, n_heads, d}, 27, 3.0f);
  Buffer sel(DType::kI32, {n_kvh, n_q, K});
  ops::msa_index_select(iq, s.ik, s.bt, pos, T, sel.t());
  for (int top_n : {1, 4, 16}) {
    Buffer r1(DType::kF32, {n_kvh, n_q}), c1(DType::kF32, {n_kvh, n_q}), r2(DType::kF32, {n_kvh, n_q}),
        c2(DType::kF32, {n_kvh, n_q});
    ops::msa_selection_stats(q, s.k, s.bt, pos, T, sel, 0.25f, top_n, r1.t(), c1.t());
    ops::ref::msa_selection_stats(q, s.k, s.bt, pos, T, sel, 0.25f, top_n, r2.t(), c2.t());
    EXPECT_TRUE(bitwise_equal(r1.t(), r2.t())) << top_n;  // counts / n_top: exact unless a mass tie
    EXPECT_ALLCLOSE(c1.t(), c2.t(), tol::kF32);
    for (int64_t e = 0; e < n_kvh * n_q; ++e) {
      EXPECT_GE(c1.f32()[e], 0.0f);
      EXPECT_LE(c1.f32()[e], 1.0f + 1e-6f);
    }
  }
}

TEST(MsaChecks, RejectsBadIds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP workers are alive by now
  const int64_t B = 4, T = 20, n_kvh = 1, d = 4;
  Paged s = make_paged(T, B, n_kvh, d, 4, 30, 0);
  Buffer q = random_tensor({1, 1, d}, 31), out(DType::kF32, {1, 1, d});
  Buffer pos = i32_tensor({10});
  Buffer sel(DType::kI32, {1, 1, 3});
  int32_t* sp = sel.t().ptr<int32_t>();
  sp[0] = 3, sp[1] = 2, sp[2] = -1;  // block 3 is in the future of position 10 (local block 2)
  EXPECT_DEATH(ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 1.0f, out.t()), "sees blocks");
  sp[0] = 1, sp[1] = 1;
  EXPECT_DEATH(ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 1.0f, out.t()), "repeats");
  sp[0] = -1, sp[1] = 2;
  EXPECT_DEATH(ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, T, sel, 1.0f, out.t()), "no valid|padding");
  Buffer bad_pos = i32_tensor({20});
  sp[0] = 0, sp[1] = -1;
  EXPECT_DEATH(ops::attention_dense_paged(q, s.k, s.v, s.bt, bad_pos, T, 1.0f, out.t()), "positions");
  s.bt.t().ptr<int32_t>()[1] = int32_t(s.n_pages);
  EXPECT_DEATH(ops::attention_dense_paged(q, s.k, s.v, s.bt, pos, T, 1.0f, out.t()), "block_table");
}

}  // namespace
}  // namespace mmx::testing
