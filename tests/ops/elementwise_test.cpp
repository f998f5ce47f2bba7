// silu, mul_sigmoid, scale_add, glu_swiglu_oai: the reference on hand-derived values, the fast
// paths against it over widths that cover chunk tails and the parallel threshold.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

const int64_t kSizes[] = {1, 7, 33, 1000, (int64_t(1) << 15) + 5, int64_t(1) << 17};

TEST(ElementwiseRef, Hand) {
  Buffer x = f32_tensor({0, 1, -2});
  ops::ref::silu(x.t());
  EXPECT_EQ(x.f32()[0], 0.0f);
  EXPECT_FLOAT_EQ(x.f32()[1], float(1.0 / (1.0 + std::exp(-1.0))));
  EXPECT_FLOAT_EQ(x.f32()[2], float(-2.0 / (1.0 + std::exp(2.0))));

  Buffer y = f32_tensor({2, 2, 2}), g = f32_tensor({0, 100, -100});
  ops::ref::mul_sigmoid(y.t(), g);
  EXPECT_EQ(y.f32()[0], 1.0f);
  EXPECT_FLOAT_EQ(y.f32()[1], 2.0f);
  EXPECT_NEAR(y.f32()[2], 0.0f, 1e-30);

  Buffer a = f32_tensor({1, 2}), b = f32_tensor({10, 20});
  ops::ref::scale_add(a.t(), 3.0f, b, 0.5f);  // 3·a + 0.5·b
  EXPECT_EQ(a.f32()[0], 8.0f);
  EXPECT_EQ(a.f32()[1], 16.0f);
}

// SwiGLU-OAI (spec §5.7): g = min(g, 7); u = clamp(u, -7, 7); (u + 1) · g · sigmoid(1.702 g).
TEST(SwigluOaiRef, Hand) {
  Buffer g = f32_tensor({0, 1, 10, -3, 2}), u = f32_tensor({5, 0, 1, 2, -20});
  Buffer o(DType::kF32, {5});
  ops::ref::glu_swiglu_oai(g, u, 1.702f, 7.0f, o.t());
  auto sig = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  EXPECT_EQ(o.f32()[0], 0.0f);                                            // g = 0
  EXPECT_FLOAT_EQ(o.f32()[1], float(1.0 * 1.0 * sig(1.702)));             // u + 1 = 1
  EXPECT_FLOAT_EQ(o.f32()[2], float(2.0 * 7.0 * sig(1.702 * 7.0)));       // gate clamped to 7
  EXPECT_FLOAT_EQ(o.f32()[3], float(3.0 * -3.0 * sig(1.702 * -3.0)));     // no lower gate clamp
  EXPECT_FLOAT_EQ(o.f32()[4], float(-6.0 * 2.0 * sig(1.702 * 2.0)));      // up clamped to -7
}

TEST(Elementwise, FastVsRef) {
  uint64_t seed = 7;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(fmt::format("n={}", n));
    Buffer x = random_tensor({n}, seed++, 6.0f), g = random_tensor({n}, seed++, 6.0f);
    Buffer x2 = random_tensor({n}, seed - 2, 6.0f);  // same values as x
    ops::silu(x.t());
    ops::ref::silu(x2.t());
    EXPECT_ALLCLOSE(x.t(), x2.t(), tol::kF32);
    ops::mul_sigmoid(x.t(), g);
    ops::ref::mul_sigmoid(x2.t(), g);
    EXPECT_ALLCLOSE(x.t(), x2.t(), tol::kF32);
    ops::scale_add(x.t(), 3.5565588f, g, 1.0f);
    ops::ref::scale_add(x2.t(), 3.5565588f, g, 1.0f);
    EXPECT_ALLCLOSE(x.t(), x2.t(), tol::kF32);
    Buffer u = random_tensor({n}, seed++, 10.0f), o(DType::kF32, {n}), o_ref(DType::kF32, {n});
    ops::glu_swiglu_oai(g, u, 1.702f, 7.0f, o.t());
    ops::ref::glu_swiglu_oai(g, u, 1.702f, 7.0f, o_ref.t());
    EXPECT_ALLCLOSE(o.t(), o_ref.t(), tol::kF32);
  }
}

}  // namespace
}  // namespace mmx::testing
