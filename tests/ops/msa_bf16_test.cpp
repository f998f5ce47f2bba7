// MSA paged ops over BF16 pages (the KV cache's kv_dtype = kBF16; the MSA family of ops/ops.h). Over a grid of
// block sizes, K, contexts, GQA shapes, head dims with vector tails and shuffled block tables:
//   * fast vs the fp64 ref reading the SAME BF16 pages, with the F32 tolerances of msa_test.cpp
//     (a bf16 value widens to fp32/fp64 exactly, so the fast-vs-ref error budget is unchanged);
//   * fast over BF16 pages == fast over F32 pages holding the widened values, bit for bit (the
//     BF16 kernels are the F32 kernels with a widening load) — so every F32 property of
//     msa_test.cpp (thread invariance, slot order, sparse == dense within K·B) carries over;
//   * BF16 pages vs the original (unrounded) F32 pages: kBf16Kv below = tol::kBF16's elementwise
//     bound (atol 1e-2, rtol 1.6e-2) with max_nmse 5e-4. Why: bf16 keeps 8 significant bits, so
//     each K/V value moves by at most 2^-9 relative. The output is a convex combination of V rows
//     (|v| <~ 4 for unit normals: <= 4·2^-9 ~ 8e-3 from V alone, less after averaging), and each
//     logit scale·q·k moves by ~2^-9·|q|·|k|/sqrt(3·d) ~ 2e-3 for the unit-scale q, k used here,
//     which shifts the softmax weights by about as much relative. The NMSE bound is looser than
//     kBF16's 1e-5 because an attention output averaged over many keys is small (~1/sqrt(n))
//     while the logit perturbation is not; measured over this file's grid: max |diff| 1.2e-2
//     (inside rtol), max NMSE 6.4e-5.
//   * index selection: fast vs ref on BF16 pages exact except near-tie swaps (verified against
//     the fp64 block scores of the same BF16 pages), and == the F32-widened selection bitwise;
//     BF16 vs unrounded F32 selection is NOT compared: rounding the keys can legitimately swap
//     blocks whose scores are close.
//   * F8 E4M3 index-key pages (the release's compact form, --index-key-dtype f8): the same
//     three selection checks as BF16 (fast vs ref near-tie tolerant; == the F32-widened pages
//     bitwise, fast and ref), over the grid and at the M3 index width 128.
//   * the checks: K and V must share one dtype, only F32 / BF16 K/V pages and F32 / BF16 / E4M3
//     index-key pages are accepted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

constexpr Tol kBf16Kv{1e-2, 1.6e-2, 5e-4};  // BF16 pages vs unrounded F32 pages (see above)

// T tokens in pages behind a shuffled block table: F32 originals, their BF16 rounding, and the
// F32 pages holding the rounded values.
struct Pages {
  int64_t T = 0, B = 0, n_blocks = 0;
  Buffer k, v, ik;        // F32, unrounded
  Buffer kb, vb, ikb;     // BF16
  Buffer kw, vw, ikw;     // F32 = widen(BF16)
  Buffer bt;              // [n_blocks] I32
};

Pages make_pages(int64_t T, int64_t B, int64_t n_kvh, int64_t d, int64_t di, uint64_t seed) {
  Pages s;
  s.T = T, s.B = B;
  s.n_blocks = (T + B - 1) / B;
  const int64_t n_pages = s.n_blocks + 2;
  s.k = random_tensor({n_pages, B, n_kvh, d}, seed);
  s.v = random_tensor({n_pages, B, n_kvh, d}, seed + 1);
  s.ik = random_tensor({n_pages, B, di}, seed + 2);
  s.kb = to_bf16(s.k), s.vb = to_bf16(s.v), s.ikb = to_bf16(s.ik);
  s.kw = widen_bf16(s.kb), s.vw = widen_bf16(s.vb), s.ikw = widen_bf16(s.ikb);
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed + 3);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.bt = Buffer(DType::kI32, {std::max<int64_t>(s.n_blocks, 1)});
  for (int64_t b = 0; b < s.n_blocks; ++b) s.bt.t().ptr<int32_t>()[b] = perm[size_t(b)];
  return s;
}

Buffer positions_of(const std::vector<int32_t>& p) {
  Buffer b(DType::kI32, {int64_t(p.size())});
  std::copy(p.begin(), p.end(), b.t().ptr<int32_t>());
  return b;
}


std::vector<int32_t> row_of(const Tensor& sel, int64_t g, int64_t i) {
  const int64_t n_q = sel.dim(1), K = sel.dim(2);
  const int32_t* s = sel.ptr<int32_t>() + (g * n_q + i) * K;
  std::vector<int32_t> r;
  for (int64_t a = 0; a < K && s[a] >= 0; ++a) r.push_back(s[a]);
  return r;
}

// Fast vs ref selection over the same BF16 index keys: identical except swaps across the cutoff
// between blocks whose fp64 scores are within tol of it (the fp32 dots may rank them either way).
void expect_selection_matches(const Tensor& iq, const Pages& s, const Tensor& pos, const Tensor& fast,
                              const Tensor& ref, double tol, const Tensor* ik = nullptr) {
  const int64_t G = fast.dim(0), n_q = fast.dim(1);
  std::vector<double> S(static_cast<size_t>(G * n_q * s.n_blocks));
  ops::ref::msa_block_scores(iq, ik ? *ik : s.ikb.t(), s.bt, pos, s.T, s.n_blocks, S.data());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const std::vector<int32_t> f = row_of(fast, g, i), r = row_of(ref, g, i);
      if (f == r) continue;
      SCOPED_TRACE(fmt::format("g={} i={}", g, i));
      ASSERT_EQ(f.size(), r.size());
      ASSERT_EQ(f.back(), r.back());
      const double* sc = S.data() + (g * n_q + i) * s.n_blocks;
      const double cutoff = sc[r[r.size() - 2]];
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

using Case = testing::MsaAttnCase;

void check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("B={} K={} T={} heads={}/{} d={} n_q={} decode={}", c.B, c.K, c.T,
                           c.n_heads, c.n_kvh, c.d, c.n_q, c.decode));
  const int64_t di = c.d == 13 ? 13 : 8;
  Pages s = make_pages(c.T, c.B, c.n_kvh, c.d, di, seed);
  const std::vector<int32_t> p = make_positions(c.T, c.n_q, c.decode, seed + 1);
  Buffer pos = positions_of(p);
  Buffer iq = random_tensor({c.n_q, c.n_kvh, di}, seed + 2);
  Buffer q = random_tensor({c.n_q, c.n_heads, c.d}, seed + 3, 1.5f);
  const float scale = float(1.0 / std::sqrt(double(c.d)));

  // Selection over BF16 index keys.
  Buffer sel(DType::kI32, {c.n_kvh, c.n_q, c.K}), sel_ref(DType::kI32, {c.n_kvh, c.n_q, c.K}),
      sel_w(DType::kI32, {c.n_kvh, c.n_q, c.K}), sel_ref_w(DType::kI32, {c.n_kvh, c.n_q, c.K});
  ops::msa_index_select(iq, s.ikb, s.bt, pos, c.T, sel.t());
  ops::ref::msa_index_select(iq, s.ikb, s.bt, pos, c.T, sel_ref.t());
  ops::msa_index_select(iq, s.ikw, s.bt, pos, c.T, sel_w.t());
  ops::ref::msa_index_select(iq, s.ikw, s.bt, pos, c.T, sel_ref_w.t());
  EXPECT_TRUE(bitwise_equal(sel.t(), sel_w.t()));
  EXPECT_TRUE(bitwise_equal(sel_ref.t(), sel_ref_w.t()));
  expect_selection_matches(iq, s, pos, sel, sel_ref, 1e-5 * double(di));

  const auto out_buf = [&] { return Buffer(DType::kF32, {c.n_q, c.n_heads, c.d}); };
  // Block-sparse: fast BF16 vs ref BF16; == fast over the widened F32 pages; vs unrounded F32.
  Buffer sp = out_buf(), sp_ref = out_buf(), sp_w = out_buf(), sp_f = out_buf();
  ops::attention_block_sparse(q, s.kb, s.vb, s.bt, pos, c.T, sel_ref, scale, sp.t());
  ops::ref::attention_block_sparse(q, s.kb, s.vb, s.bt, pos, c.T, sel_ref, scale, sp_ref.t());
  ops::attention_block_sparse(q, s.kw, s.vw, s.bt, pos, c.T, sel_ref, scale, sp_w.t());
  ops::attention_block_sparse(q, s.k, s.v, s.bt, pos, c.T, sel_ref, scale, sp_f.t());
  EXPECT_ALLCLOSE(sp.t(), sp_ref.t(), tol::kF32Reduce);
  EXPECT_TRUE(bitwise_equal(sp.t(), sp_w.t()));
  EXPECT_ALLCLOSE(sp.t(), sp_f.t(), kBf16Kv);
  // Dense paged: the same four.
  Buffer dn = out_buf(), dn_ref = out_buf(), dn_w = out_buf(), dn_f = out_buf();
  ops::attention_dense_paged(q, s.kb, s.vb, s.bt, pos, c.T, scale, dn.t());
  ops::ref::attention_dense_paged(q, s.kb, s.vb, s.bt, pos, c.T, scale, dn_ref.t());
  ops::attention_dense_paged(q, s.kw, s.vw, s.bt, pos, c.T, scale, dn_w.t());
  ops::attention_dense_paged(q, s.k, s.v, s.bt, pos, c.T, scale, dn_f.t());
  EXPECT_ALLCLOSE(dn.t(), dn_ref.t(), tol::kF32Reduce);
  EXPECT_TRUE(bitwise_equal(dn.t(), dn_w.t()));
  EXPECT_ALLCLOSE(dn.t(), dn_f.t(), kBf16Kv);
  if (c.T <= c.K * c.B) {
    EXPECT_TRUE(bitwise_equal(sp.t(), dn.t()));
  }
}

// Selection over E4M3 index keys: fast vs ref (near ties), and == the widened F32 pages bitwise.
void check_f8_selection(const Case& c, uint64_t seed, int64_t di) {
  SCOPED_TRACE(fmt::format("f8 B={} K={} T={} G={} di={} n_q={} decode={}", c.B, c.K, c.T, c.n_kvh, di, c.n_q,
                           c.decode));
  Pages s = make_pages(c.T, c.B, c.n_kvh, c.d, di, seed);
  const Buffer ik8 = to_f8(s.ik), ik8w = widen_f8(ik8);
  Buffer pos = positions_of(make_positions(c.T, c.n_q, c.decode, seed + 1));
  Buffer iq = random_tensor({c.n_q, c.n_kvh, di}, seed + 2);
  const auto sel_buf = [&] { return Buffer(DType::kI32, {c.n_kvh, c.n_q, c.K}); };
  Buffer sel = sel_buf(), sel_ref = sel_buf(), sel_w = sel_buf(), sel_ref_w = sel_buf();
  ops::msa_index_select(iq, ik8, s.bt, pos, c.T, sel.t());
  ops::ref::msa_index_select(iq, ik8, s.bt, pos, c.T, sel_ref.t());
  ops::msa_index_select(iq, ik8w, s.bt, pos, c.T, sel_w.t());
  ops::ref::msa_index_select(iq, ik8w, s.bt, pos, c.T, sel_ref_w.t());
  EXPECT_TRUE(bitwise_equal(sel.t(), sel_w.t()));
  EXPECT_TRUE(bitwise_equal(sel_ref.t(), sel_ref_w.t()));
  expect_selection_matches(iq, s, pos, sel, sel_ref, 1e-5 * double(di), &ik8.t());
}

TEST(MsaF8IndexKeys, FastVsRefGrid) {
  testing::for_each_msa_grid_case(7100, [](const Case& c, uint64_t seed) {
    check_f8_selection(c, seed, c.d == 13 ? 13 : 8);
  });
  // The M3 index width (128) past K·B, prefill and decode.
  check_f8_selection({128, 16, 4500, 16, 4, 8, 2, true}, 3, 128);
  check_f8_selection({16, 4, 700, 8, 2, 8, 9, false}, 4, 128);
}

TEST(MsaBf16, FastVsRefGrid) {
  testing::for_each_msa_grid_case(7000, check_case);
}

TEST(MsaBf16, M3Shapes) {
  // head_dim 128, B 128, K 16, past K·B; index_dim 8 (the M3 128 is covered by msa_test's F32
  // grid, and BF16 == widened F32 bitwise here).
  check_case({128, 16, 4500, 16, 1, 128, 2, true}, 1);
  check_case({128, 16, 2048, 32, 2, 128, 3, false}, 2);
}

TEST(MsaBf16, StatsFastVsRef) {
  const int64_t B = 8, K = 4, T = 260, n_heads = 6, n_kvh = 2, d = 16, di = 8, n_q = 5;
  Pages s = make_pages(T, B, n_kvh, d, di, 24);
  Buffer pos = positions_of(make_positions(T, n_q, false, 25));
  Buffer iq = random_tensor({n_q, n_kvh, di}, 26), q = random_tensor({n_q, n_heads, d}, 27, 3.0f);
  Buffer sel(DType::kI32, {n_kvh, n_q, K});
  ops::msa_index_select(iq, s.ikb, s.bt, pos, T, sel.t());
  for (int top_n : {1, 4, 16}) {
    Buffer r1(DType::kF32, {n_kvh, n_q}), c1(DType::kF32, {n_kvh, n_q}), r2(DType::kF32, {n_kvh, n_q}),
        c2(DType::kF32, {n_kvh, n_q}), r3(DType::kF32, {n_kvh, n_q}), c3(DType::kF32, {n_kvh, n_q});
    ops::msa_selection_stats(q, s.kb, s.bt, pos, T, sel, 0.25f, top_n, r1.t(), c1.t());
    ops::ref::msa_selection_stats(q, s.kb, s.bt, pos, T, sel, 0.25f, top_n, r2.t(), c2.t());
    ops::msa_selection_stats(q, s.kw, s.bt, pos, T, sel, 0.25f, top_n, r3.t(), c3.t());
    EXPECT_TRUE(bitwise_equal(r1.t(), r2.t())) << top_n;
    EXPECT_ALLCLOSE(c1.t(), c2.t(), tol::kF32);
    EXPECT_TRUE(bitwise_equal(r1.t(), r3.t())) << top_n;
    EXPECT_TRUE(bitwise_equal(c1.t(), c3.t())) << top_n;
  }
}

TEST(MsaBf16, ChecksRejectMixedOrOtherDtypes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t B = 4, T = 8, d = 8;
  Pages s = make_pages(T, B, 1, d, 4, 40);
  Buffer q = random_tensor({1, 1, d}, 41), out(DType::kF32, {1, 1, d});
  Buffer pos = i32_tensor({5});
  EXPECT_DEATH(ops::attention_dense_paged(q, s.kb, s.v, s.bt, pos, T, 1.0f, out.t()), "one KV dtype");
  EXPECT_DEATH(ops::ref::attention_dense_paged(q, s.k, s.vb, s.bt, pos, T, 1.0f, out.t()), "one KV dtype");
  Buffer kh = copy_of(s.kb), vh = copy_of(s.vb);
  kh.t().dtype = DType::kF16, vh.t().dtype = DType::kF16;
  EXPECT_DEATH(ops::attention_dense_paged(q, kh, vh, s.bt, pos, T, 1.0f, out.t()), "must be F32 or BF16");
  Buffer ikh = copy_of(s.ikb);
  ikh.t().dtype = DType::kF16;
  Buffer iq = random_tensor({1, 1, 4}, 42), sel(DType::kI32, {1, 1, 2});
  EXPECT_DEATH(ops::msa_index_select(iq, ikh, s.bt, pos, T, sel.t()), "index-key pages must be F32, BF16 or F8_E4M3");
  Buffer k8 = to_f8(s.k), v8 = to_f8(s.v);  // E4M3 is for index keys only
  EXPECT_DEATH(ops::attention_dense_paged(q, k8, v8, s.bt, pos, T, 1.0f, out.t()), "must be F32 or BF16");
}

}  // namespace
}  // namespace mmx::testing
