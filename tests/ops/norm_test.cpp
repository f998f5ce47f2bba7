// rms_norm, add, glu_silu: the reference on hand-derived values, the fast paths against it over
// row counts and widths that exercise every vector tail (d mod 8, d mod 32).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

const int64_t kWidths[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 3072};
const int64_t kRows[] = {1, 3, 17};

// ---- rms_norm ----

TEST(RmsNormRef, ConstantVector) {
  // x = c·1: mean(x^2) = c^2, so y = c / sqrt(c^2 + eps) · w.  eps = 0 gives sign(c)·w.
  Buffer x(DType::kF32, {2, 4}), y(DType::kF32, {2, 4});
  Buffer w = f32_tensor({1, 2, -3, 0.5f});
  for (int i = 0; i < 4; ++i) x.f32()[i] = 3.0f, x.f32()[4 + i] = -0.25f;
  ops::ref::rms_norm(x, w, 0.0f, y.t());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(y.f32()[i], w.f32()[i]);
    EXPECT_EQ(y.f32()[4 + i], -w.f32()[i]);
  }
  // eps: x = [2, 2], eps = 0.5 -> 2 / sqrt(4.5)
  Buffer x2(DType::kF32, {1, 2}), y2(DType::kF32, {1, 2});
  Buffer w2 = f32_tensor({1, 1});
  x2.f32()[0] = x2.f32()[1] = 2.0f;
  ops::ref::rms_norm(x2, w2, 0.5f, y2.t());
  EXPECT_FLOAT_EQ(y2.f32()[0], float(2.0 / std::sqrt(4.5)));
  // x = [3, 4]: rms = sqrt(12.5)
  x2.f32()[0] = 3.0f;
  x2.f32()[1] = 4.0f;
  ops::ref::rms_norm(x2, w2, 0.0f, y2.t());
  EXPECT_FLOAT_EQ(y2.f32()[0], float(3.0 / std::sqrt(12.5)));
  EXPECT_FLOAT_EQ(y2.f32()[1], float(4.0 / std::sqrt(12.5)));
}

TEST(RmsNorm, FastVsRef) {
  uint64_t seed = 1;
  for (int64_t n : kRows)
    for (int64_t d : kWidths)
      for (float eps : {1e-6f, 1e-2f}) {
        SCOPED_TRACE(fmt::format("x=[{}, {}] eps={}", n, d, eps));
        Buffer x = random_tensor({n, d}, seed++, 2.0f);
        Buffer w = random_tensor({d}, seed++);
        Buffer y(DType::kF32, {n, d}), y_ref(DType::kF32, {n, d});
        ops::rms_norm(x, w, eps, y.t());
        ops::ref::rms_norm(x, w, eps, y_ref.t());
        EXPECT_ALLCLOSE(y.t(), y_ref.t(), tol::kF32);
        // in place (y aliases x) gives the same bits as out of place
        Buffer xi = copy_of(x);
        ops::rms_norm(xi, w, eps, xi.t());
        EXPECT_TRUE(bitwise_equal(xi.t(), y.t()));
      }
}

// ---- add ----

TEST(Add, FastVsRef) {
  uint64_t seed = 50;
  for (int64_t n : kRows)
    for (int64_t d : kWidths) {
      SCOPED_TRACE(fmt::format("x=[{}, {}]", n, d));
      Buffer x = random_tensor({n, d}, seed++), y = random_tensor({n, d}, seed++);
      Buffer x_ref = copy_of(x);
      ops::add(x.t(), y);
      ops::ref::add(x_ref.t(), y);
      EXPECT_ALLCLOSE(x.t(), x_ref.t(), tol::kF32);
    }
  Buffer a = f32_tensor({1, 2, 3}), b = f32_tensor({0.5f, -2, 1e-3f});
  ops::ref::add(a.t(), b);
  EXPECT_EQ(a.f32()[0], 1.5f);
  EXPECT_EQ(a.f32()[1], 0.0f);
  EXPECT_EQ(a.f32()[2], 3.001f);
}

// ---- glu_silu ----

TEST(GluSiluRef, Hand) {
  // silu(0) = 0; silu(g) -> g for g >> 0, -> 0 for g << 0; silu(1) = 1 / (1 + e^-1).
  Buffer g = f32_tensor({0, 1, 40, -40, -2}), u = f32_tensor({5, 2, 0.5f, 3, 1});
  Buffer o(DType::kF32, {5});
  ops::ref::glu_silu(g, u, o.t());
  EXPECT_EQ(o.f32()[0], 0.0f);
  EXPECT_FLOAT_EQ(o.f32()[1], float(2.0 / (1.0 + std::exp(-1.0))));
  EXPECT_FLOAT_EQ(o.f32()[2], 20.0f);
  EXPECT_NEAR(o.f32()[3], 0.0f, 1e-15);
  EXPECT_FLOAT_EQ(o.f32()[4], float(-2.0 / (1.0 + std::exp(2.0))));
}

TEST(GluSilu, FastVsRef) {
  uint64_t seed = 90;
  for (int64_t n : kRows)
    for (int64_t f : kWidths) {
      SCOPED_TRACE(fmt::format("gate=[{}, {}]", n, f));
      Buffer g = random_tensor({n, f}, seed++, 4.0f), u = random_tensor({n, f}, seed++);
      Buffer o(DType::kF32, {n, f}), o_ref(DType::kF32, {n, f});
      ops::glu_silu(g, u, o.t());
      ops::ref::glu_silu(g, u, o_ref.t());
      EXPECT_ALLCLOSE(o.t(), o_ref.t(), tol::kF32);
    }
  // Saturated gates: the clamped exp must still give ~g·u and ~0, never NaN.
  Buffer g = f32_tensor({-200, -90, 90, 200, -1e30f, 1e30f, 0, 1e-30f, -88, 88});
  Buffer u = f32_tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  Buffer o(DType::kF32, {10}), o_ref(DType::kF32, {10});
  ops::glu_silu(g, u, o.t());
  ops::ref::glu_silu(g, u, o_ref.t());
  EXPECT_ALLCLOSE(o.t(), o_ref.t(), tol::kF32);
}

}  // namespace
}  // namespace mmx::testing
