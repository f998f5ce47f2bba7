// Dense / block-sparse paged attention: the split-key (flash-decoding) paths of the fast kernel
// (cpu/paged_attention.cpp). msa_test.cpp / msa_bf16_test.cpp cover the shape grid up to 2500
// keys; here, contexts that cut the key list into many splits (the split length depends on the
// number of keys only: >= 512 keys, <= 64 splits), with odd lengths and partial last blocks:
//   * fast vs the fp64 reference (tol::kF32Reduce), F32 and BF16 pages, GQA groups 1..8;
//   * bitwise independent of the thread count, also where the kernel hands the KV heads of one
//     query to different threads (decode with few splits);
//   * one multi-query call == single-query calls, bit for bit;
//   * sparse with every visible block selected == dense, bit for bit (past one split).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

struct Pool {
  Buffer k, v;  // [n_pages, B, n_kvh, d], F32 or BF16
  Buffer bt;    // [n_blocks] I32, shuffled pages
};

Pool make_pool(int64_t T, int64_t B, int64_t n_kvh, int64_t d, bool bf16, uint64_t seed) {
  const int64_t n_blocks = (T + B - 1) / B, n_pages = n_blocks + 3;
  Pool p;
  p.k = random_tensor({n_pages, B, n_kvh, d}, seed);
  p.v = random_tensor({n_pages, B, n_kvh, d}, seed + 1);
  if (bf16) p.k = to_bf16(p.k), p.v = to_bf16(p.v);
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed + 2));
  p.bt = Buffer(DType::kI32, {n_blocks});
  std::copy(perm.begin(), perm.begin() + n_blocks, p.bt.t().ptr<int32_t>());
  return p;
}

Buffer positions_of(const std::vector<int32_t>& p) {
  Buffer b(DType::kI32, {int64_t(p.size())});
  std::copy(p.begin(), p.end(), b.t().ptr<int32_t>());
  return b;
}

struct Case {
  int64_t T, B, n_heads, n_kvh, d;
  bool bf16;
};

// The last n_q positions of T, plus a few earlier ones (different split counts in one call).
std::vector<int32_t> decode_positions(int64_t T, int64_t n_q) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n_q; ++i) p.push_back(int32_t(std::max<int64_t>(0, T - n_q + i)));
  for (int64_t e : {T / 3, T / 2 + 1, int64_t(511), int64_t(513)})
    if (e < T) p.push_back(int32_t(e));
  return p;
}

void check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(fmt::format("T={} B={} heads={}/{} d={} {}", c.T, c.B, c.n_heads, c.n_kvh, c.d,
                           c.bf16 ? "bf16" : "f32"));
  const Pool pl = make_pool(c.T, c.B, c.n_kvh, c.d, c.bf16, seed);
  const std::vector<int32_t> p = decode_positions(c.T, 2);
  const int64_t n_q = int64_t(p.size());
  Buffer pos = positions_of(p);
  Buffer q = random_tensor({n_q, c.n_heads, c.d}, seed + 5, 1.5f);
  const float scale = float(1.0 / std::sqrt(double(c.d)));
  const auto out_buf = [&] { return Buffer(DType::kF32, {n_q, c.n_heads, c.d}); };

  Buffer fast = out_buf(), ref = out_buf();
  ops::attention_dense_paged(q, pl.k, pl.v, pl.bt, pos, c.T, scale, fast.t());
  ops::ref::attention_dense_paged(q, pl.k, pl.v, pl.bt, pos, c.T, scale, ref.t());
  EXPECT_ALLCLOSE(fast.t(), ref.t(), tol::kF32Reduce);

  // Thread counts 1..4: the same bits.
  const int saved = ops::n_threads();
  for (int nt : {1, 2, 3, 4}) {
    ops::set_n_threads(nt);
    Buffer o = out_buf();
    ops::attention_dense_paged(q, pl.k, pl.v, pl.bt, pos, c.T, scale, o.t());
    EXPECT_TRUE(bitwise_equal(o.t(), fast.t())) << nt << " threads";
    // one query at a time (different task layouts, different head runs per task)
    for (int64_t i = 0; i < n_q; ++i) {
      Buffer pi = positions_of({p[size_t(i)]});
      Buffer oi(DType::kF32, {1, c.n_heads, c.d});
      Tensor qi = q.t().rows_range(i, i + 1);
      ops::attention_dense_paged(qi, pl.k, pl.v, pl.bt, pi, c.T, scale, oi.t());
      EXPECT_EQ(0, std::memcmp(oi.f32(), fast.f32() + i * c.n_heads * c.d, size_t(c.n_heads * c.d) * 4))
          << "query " << i << ", " << nt << " threads";
    }
  }
  ops::set_n_threads(saved);

  // Sparse with every visible block selected (slots in reverse order) == dense.
  const int64_t K = (c.T + c.B - 1) / c.B;
  Buffer sel(DType::kI32, {c.n_kvh, n_q, K});
  for (int64_t g = 0; g < c.n_kvh; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      int32_t* r = sel.t().ptr<int32_t>() + (g * n_q + i) * K;
      const int64_t nvis = p[size_t(i)] / c.B + 1;
      for (int64_t a = 0; a < K; ++a) r[a] = a < nvis ? int32_t(nvis - 1 - a) : -1;
    }
  Buffer sp = out_buf();
  ops::attention_block_sparse(q, pl.k, pl.v, pl.bt, pos, c.T, sel, scale, sp.t());
  EXPECT_TRUE(bitwise_equal(sp.t(), fast.t()));
}

TEST(PagedAttentionSplits, FastVsRefThreadsAndSparse) {
  // contexts around the minimum split length (512 keys) and past 64 of them (40000 keys: splits
  // of 768, the last one short); block sizes that do not divide the split length
  const Case cases[] = {
      {1, 4, 6, 1, 8, false},       {300, 16, 6, 2, 13, true},   {511, 16, 12, 2, 32, false},
      {513, 128, 48, 8, 16, true},  {1025, 7, 8, 8, 8, false},    {1537, 16, 6, 1, 24, true},
      {5000, 128, 16, 1, 32, false}, {5003, 64, 64, 4, 16, true}, {40000, 128, 4, 1, 8, true},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) check_case(c, seed += 10);
}

TEST(PagedAttentionSplits, SparseListsOfDifferentLengths) {
  // Each KV head selects a different number of blocks: its own key list and split count.
  const int64_t B = 16, T = 20000, n_kvh = 3, n_heads = 9, d = 16, K = 64;
  const Pool pl = make_pool(T, B, n_kvh, d, true, 7);
  const std::vector<int32_t> p = {int32_t(T - 1), 9000};
  const int64_t n_q = int64_t(p.size());
  Buffer pos = positions_of(p), q = random_tensor({n_q, n_heads, d}, 8);
  Buffer sel(DType::kI32, {n_kvh, n_q, K});
  std::mt19937_64 rng(9);
  for (int64_t g = 0; g < n_kvh; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      int32_t* r = sel.t().ptr<int32_t>() + (g * n_q + i) * K;
      const int32_t local = p[size_t(i)] / int32_t(B);
      std::vector<int32_t> ids(static_cast<size_t>(local));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      const int64_t n = std::min<int64_t>(K - 1, 20 * (g + 1) + i);  // 20, 21, 40, 41, 60, 61 (+ local)
      for (int64_t a = 0; a < K; ++a) r[a] = a < n ? ids[size_t(a)] : -1;
      r[n] = local;
    }
  Buffer fast(DType::kF32, {n_q, n_heads, d}), ref(DType::kF32, {n_q, n_heads, d});
  ops::attention_block_sparse(q, pl.k, pl.v, pl.bt, pos, T, sel, 0.3f, fast.t());
  ops::ref::attention_block_sparse(q, pl.k, pl.v, pl.bt, pos, T, sel, 0.3f, ref.t());
  EXPECT_ALLCLOSE(fast.t(), ref.t(), tol::kF32Reduce);
  const int saved = ops::n_threads();
  for (int nt : {1, 3}) {
    ops::set_n_threads(nt);
    Buffer o(DType::kF32, {n_q, n_heads, d});
    ops::attention_block_sparse(q, pl.k, pl.v, pl.bt, pos, T, sel, 0.3f, o.t());
    EXPECT_TRUE(bitwise_equal(o.t(), fast.t())) << nt;
  }
  ops::set_n_threads(saved);
}

}  // namespace
}  // namespace mmx::testing
