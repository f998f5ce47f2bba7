// rope_neox: the reference proven by hand (position 0 is the identity, a constructed 90-degree
// rotation, a 1-radian rotation, pass-through channels, norm preservation), then the fast path
// against it over heads, head_dim, rotary_dim, theta and positions up to 2^20.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

TEST(RopeRef, PositionZeroIsIdentity) {
  Buffer x = random_tensor({1, 3, 16}, 1);
  Buffer y = copy_of(x);
  Buffer pos = i32_tensor({0});
  ops::ref::rope_neox(y.t(), pos, 8, 1e4);
  EXPECT_TRUE(bitwise_equal(x.t(), y.t()));
  Buffer z = copy_of(x);
  ops::rope_neox(z.t(), pos, 8, 1e4);
  EXPECT_TRUE(bitwise_equal(x.t(), z.t()));
}

TEST(RopeRef, HandRotations) {
  // rotary_dim 4, half 2: f_0 = 1, f_1 = theta^(-1/2). theta = (2/pi)^2 makes f_1 = pi/2, so at
  // position 1 pair (1, 3) turns by exactly 90 degrees: y1 = -x3, y3 = x1; pair (0, 2) turns by
  // 1 radian. Channels 4, 5 pass through.
  const double theta = std::pow(2.0 / std::numbers::pi, 2.0);
  Buffer x(DType::kF32, {1, 1, 6});
  const float xv[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  for (int i = 0; i < 6; ++i) x.f32()[i] = xv[i];
  Buffer pos = i32_tensor({1});
  ops::ref::rope_neox(x.t(), pos, 4, theta);
  const float* y = x.f32();
  EXPECT_NEAR(y[1], -4.0f, 1e-6);
  EXPECT_NEAR(y[3], 2.0f, 1e-6);
  EXPECT_FLOAT_EQ(y[0], float(1.0 * std::cos(1.0) - 3.0 * std::sin(1.0)));
  EXPECT_FLOAT_EQ(y[2], float(3.0 * std::cos(1.0) + 1.0 * std::sin(1.0)));
  EXPECT_EQ(y[4], 5.0f);
  EXPECT_EQ(y[5], 6.0f);
}

TEST(RopeRef, PreservesPairNormsAndPassThrough) {
  Buffer x = random_tensor({4, 2, 12}, 3);
  Buffer y = copy_of(x);
  Buffer pos = i32_tensor({0, 5, 1000, 123456});
  ops::ref::rope_neox(y.t(), pos, 8, 5e6);
  for (int64_t r = 0; r < 8; ++r) {
    const float* a = x.f32() + r * 12;
    const float* b = y.f32() + r * 12;
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(std::hypot(a[i], a[i + 4]), std::hypot(b[i], b[i + 4]), 1e-5);
    for (int i = 8; i < 12; ++i) EXPECT_EQ(a[i], b[i]);
  }
}

struct RopeCase {
  int64_t n, n_heads, head_dim;
  int rotary_dim;
  double theta;
  std::string name() const {
    return fmt::format("x=[{}, {}, {}] rotary_dim={} theta={}", n, n_heads, head_dim, rotary_dim, theta);
  }
};

TEST(Rope, FastVsRef) {
  const RopeCase cases[] = {
      {1, 1, 2, 2, 1e4},     {3, 2, 8, 4, 1e4},       {5, 3, 128, 64, 5e6}, {4, 4, 20, 12, 1e7},
      {2, 1, 64, 0, 1e4},    {7, 6, 128, 128, 1e4},   {1, 48, 128, 64, 5e6}, {9, 2, 40, 34, 10.0},
      {33, 8, 128, 64, 5e6}, {2, 5, 256, 96, 1e6},
  };
  uint64_t seed = 10;
  for (const RopeCase& c : cases) {
    SCOPED_TRACE(c.name());
    Buffer x = random_tensor({c.n, c.n_heads, c.head_dim}, seed++);
    Buffer pos(DType::kI32, {c.n});
    std::mt19937 rng(uint32_t(seed++));
    for (int64_t t = 0; t < c.n; ++t)
      pos.t().ptr<int32_t>()[t] = t == 0 ? 0 : int32_t(rng() % (1u << (4 * (t % 6))));
    Buffer y = copy_of(x), y_ref = copy_of(x);
    ops::rope_neox(y.t(), pos, c.rotary_dim, c.theta);
    ops::ref::rope_neox(y_ref.t(), pos, c.rotary_dim, c.theta);
    EXPECT_ALLCLOSE(y.t(), y_ref.t(), tol::kF32);
  }
}

}  // namespace
}  // namespace mmx::testing
