// rows_gather, rows_scatter_add, embedding, to_f32: hand cases for the reference, then the fast
// paths against it (gather/embedding/to_f32 exactly; scatter-add to fp32 rounding).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

TEST(RowsRef, GatherAndScatterByHand) {
  // src rows r0 = [1, 2], r1 = [3, 4], r2 = [5, 6]; gather [2, 0, 2].
  Buffer src = f32_tensor({1, 2, 3, 4, 5, 6});
  Tensor s = src.t().reshape({3, 2});
  Buffer ids = i32_tensor({2, 0, 2});
  Buffer g(DType::kF32, {3, 2});
  ops::ref::rows_gather(s, ids, g.t());
  const float want_g[] = {5, 6, 1, 2, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g.f32()[i], want_g[i]);
  // scatter-add into zeros: row 2 gets 0.5·[1,2] + 2·[5,6] = [10.5, 13]; row 0 gets -[3,4].
  Buffer dst(DType::kF32, {3, 2});
  Buffer sc = f32_tensor({0.5f, -1.0f, 2.0f});
  Tensor upd = src.t().reshape({3, 2});
  ops::ref::rows_scatter_add(upd, ids, sc, dst.t());
  const float want_d[] = {-3, -4, 0, 0, 10.5f, 13};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dst.f32()[i], want_d[i]);
}

TEST(Rows, FastVsRef) {
  uint64_t seed = 1;
  for (int64_t n : {1, 4, 37})
    for (int64_t d : {1, 7, 8, 100, 3072})
      for (int64_t m : {1, 5, 64}) {
        SCOPED_TRACE(fmt::format("src=[{}, {}] m={}", n, d, m));
        Buffer src = random_tensor({n, d}, seed++);
        Buffer ids(DType::kI32, {m});
        std::mt19937 rng(uint32_t(seed++));
        for (int64_t i = 0; i < m; ++i) ids.t().ptr<int32_t>()[i] = int32_t(rng() % uint32_t(n));
        Buffer g(DType::kF32, {m, d}), g_ref(DType::kF32, {m, d});
        ops::rows_gather(src, ids, g.t());
        ops::ref::rows_gather(src, ids, g_ref.t());
        EXPECT_TRUE(bitwise_equal(g.t(), g_ref.t()));

        // scatter the gathered rows back with weights; repeated ids accumulate in order.
        Buffer sc = random_tensor({m}, seed++);
        Buffer dst = random_tensor({n, d}, seed++);
        Buffer dst_ref = copy_of(dst);
        ops::rows_scatter_add(g, ids, sc, dst.t());
        ops::ref::rows_scatter_add(g, ids, sc, dst_ref.t());
        EXPECT_ALLCLOSE(dst.t(), dst_ref.t(), tol::kF32);
      }
}

TEST(Embedding, FastVsRefAllDtypes) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t d : {1, 9, 64, 3072}) {
      SCOPED_TRACE(fmt::format("{} d={}", dtype_name(dt), d));
      OwnedLinear table = make_linear(dt, 50, d, 7);  // reuse as a [vocab, d] table
      Buffer ids = i32_tensor({0, 49, 3, 3, 17});
      Buffer out(DType::kF32, {5, d}), out_ref(DType::kF32, {5, d});
      ops::embedding(table.w, ids, out.t());
      ops::ref::embedding(table.w, ids, out_ref.t());
      EXPECT_TRUE(bitwise_equal(out.t(), out_ref.t()));
      // row 0 of the output is table row 0, converted by the scalar conversion of base/dtype.h
      EXPECT_EQ(out.f32()[0], float(ops::ref::linear_at(table.lin, 0, 0)));
    }
}

TEST(ToF32, AllDtypesExact) {
  // Every 16-bit pattern for F16/BF16 (NaNs compared as NaN), every fp8 byte, in lengths that
  // leave vector tails; the expected values come from base/dtype.h's scalar conversions.
  auto check = [](DType dt, int64_t n, auto code_at, auto scalar) {
    SCOPED_TRACE(fmt::format("{} n={}", dtype_name(dt), n));
    Buffer x(dt, {n});
    for (int64_t i = 0; i < n; ++i) code_at(x.t(), i);
    Buffer out(DType::kF32, {n});
    ops::to_f32(x, out.t());
    int64_t n_bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = scalar(x.t(), i), got = out.f32()[i];
      n_bad += std::isnan(want) ? !std::isnan(got) : got != want;
    }
    EXPECT_EQ(n_bad, 0);
  };
  for (int64_t n : {int64_t(65536), int64_t(65536 + 13)}) {
    check(DType::kF16, n, [](Tensor& t, int64_t i) { t.ptr<uint16_t>()[i] = uint16_t(i * 40503u); },
          [](const Tensor& t, int64_t i) { return f16_to_f32(t.ptr<uint16_t>()[i]); });
    check(DType::kBF16, n, [](Tensor& t, int64_t i) { t.ptr<uint16_t>()[i] = uint16_t(i * 40503u); },
          [](const Tensor& t, int64_t i) { return bf16_to_f32(t.ptr<uint16_t>()[i]); });
  }
  for (int64_t n : {256, 256 + 7, 3 * 256 + 9})
    check(DType::kF8E4M3, n, [](Tensor& t, int64_t i) { t.ptr<uint8_t>()[i] = uint8_t(i * 37); },
          [](const Tensor& t, int64_t i) { return f8e4m3_to_f32(t.ptr<uint8_t>()[i]); });
  Buffer f = random_tensor({1000}, 3);
  Buffer out(DType::kF32, {10, 100});
  ops::to_f32(f, out.t());
  EXPECT_TRUE(bitwise_equal(out.t(), f.t()));
}

}  // namespace
}  // namespace mmx::testing
