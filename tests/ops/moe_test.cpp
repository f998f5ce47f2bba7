// moe_route_sigmoid: the reference proven by hand (the bias changes the selection but not the
// weights; ties pick the lower expert id; output in selection order), then the fast router
// against it, ids exactly and weights to fp32 precision, including tie-heavy inputs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void route_both(const Tensor& logits, const Tensor& bias, int k, Buffer* ids, Buffer* w, Buffer* ids_ref,
                Buffer* w_ref) {
  const int64_t n = logits.dim(0);
  *ids = Buffer(DType::kI32, {n, k});
  *w = Buffer(DType::kF32, {n, k});
  *ids_ref = Buffer(DType::kI32, {n, k});
  *w_ref = Buffer(DType::kF32, {n, k});
  ops::moe_route_sigmoid(logits, bias, k, ids->t(), w->t());
  ops::ref::moe_route_sigmoid(logits, bias, k, ids_ref->t(), w_ref->t());
}

TEST(MoeRouteRef, BiasChangesSelectionNotWeights) {
  // logits [2, 1, 0, -1] -> p descending in id. Without bias top-2 = {0, 1}. A bias of +1 on
  // expert 2 puts it first: selection [2, 0], weights from the UNBIASED p renormalised.
  Buffer logits = f32_tensor({2, 1, 0, -1});
  Tensor lt = logits.t().reshape({1, 4});
  Buffer bias = f32_tensor({0, 0, 1, 0});
  Buffer ids(DType::kI32, {1, 2}), w(DType::kF32, {1, 2});
  ops::ref::moe_route_sigmoid(lt, Tensor(), 2, ids.t(), w.t());
  EXPECT_EQ(ids.t().ptr<int32_t>()[0], 0);
  EXPECT_EQ(ids.t().ptr<int32_t>()[1], 1);
  EXPECT_FLOAT_EQ(w.f32()[0], float(sigmoid(2) / (sigmoid(2) + sigmoid(1))));

  ops::ref::moe_route_sigmoid(lt, bias, 2, ids.t(), w.t());
  EXPECT_EQ(ids.t().ptr<int32_t>()[0], 2);
  EXPECT_EQ(ids.t().ptr<int32_t>()[1], 0);
  const double s = sigmoid(0) + sigmoid(2);
  EXPECT_FLOAT_EQ(w.f32()[0], float(sigmoid(0) / s));
  EXPECT_FLOAT_EQ(w.f32()[1], float(sigmoid(2) / s));
}

TEST(MoeRouteRef, TiesPickLowerId) {
  // All logits equal: selection is 0, 1, 2 in that order with equal weights.
  Buffer logits = f32_tensor({0.3f, 0.3f, 0.3f, 0.3f, 0.3f});
  Tensor lt = logits.t().reshape({1, 5});
  Buffer ids(DType::kI32, {1, 3}), w(DType::kF32, {1, 3});
  ops::ref::moe_route_sigmoid(lt, Tensor(), 3, ids.t(), w.t());
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(ids.t().ptr<int32_t>()[j], j);
    EXPECT_FLOAT_EQ(w.f32()[j], 1.0f / 3.0f);
  }
  // A bias that ties experts 3 and 1 above the rest: 1 comes first.
  Buffer bias = f32_tensor({0, 0.5f, 0, 0.5f, 0});
  ops::ref::moe_route_sigmoid(lt, bias, 3, ids.t(), w.t());
  EXPECT_EQ(ids.t().ptr<int32_t>()[0], 1);
  EXPECT_EQ(ids.t().ptr<int32_t>()[1], 3);
  EXPECT_EQ(ids.t().ptr<int32_t>()[2], 0);
  // The fast router agrees on both.
  Buffer i1, w1, i2, w2;
  route_both(lt, bias, 3, &i1, &w1, &i2, &w2);
  EXPECT_TRUE(bitwise_equal(i1.t(), i2.t()));
}

TEST(MoeRouteRef, KEqualsNExperts) {
  Buffer logits = f32_tensor({-1, 3, 0.5f});
  Tensor lt = logits.t().reshape({1, 3});
  Buffer ids(DType::kI32, {1, 3}), w(DType::kF32, {1, 3});
  ops::ref::moe_route_sigmoid(lt, Tensor(), 3, ids.t(), w.t());
  EXPECT_EQ(ids.t().ptr<int32_t>()[0], 1);
  EXPECT_EQ(ids.t().ptr<int32_t>()[1], 2);
  EXPECT_EQ(ids.t().ptr<int32_t>()[2], 0);
  EXPECT_FLOAT_EQ(w.f32()[0] + w.f32()[1] + w.f32()[2], 1.0f);
}

TEST(MoeRoute, FastVsRef) {
  uint64_t seed = 1;
  for (int64_t n : {1, 5, 33})
    for (int64_t e : {4, 32, 256})
      for (int k : {1, 2, 4, 8})
        for (int variant = 0; variant < 3; ++variant) {  // no bias, random bias, tie-heavy
          if (k > e) continue;
          SCOPED_TRACE(fmt::format("logits=[{}, {}] k={} variant={}", n, e, k, variant));
          Buffer logits = random_tensor({n, e}, seed++, 2.0f);
          Buffer bias(DType::kF32, {e});
          if (variant == 1) fill_random(bias.f32(), e, seed++, 0.1f);
          if (variant == 2) {
            // logits from 3 levels, bias from 2: scores collide all the time.
            std::mt19937 rng(uint32_t(seed++));
            for (int64_t i = 0; i < n * e; ++i) logits.f32()[i] = float(int(rng() % 3) - 1);
            for (int64_t i = 0; i < e; ++i) bias.f32()[i] = (rng() % 2) ? 0.25f : 0.0f;
          }
          const Tensor b = variant == 0 ? Tensor() : bias.t();
          Buffer ids, w, ids_ref, w_ref;
          route_both(logits, b, k, &ids, &w, &ids_ref, &w_ref);
          EXPECT_TRUE(bitwise_equal(ids.t(), ids_ref.t()));
          EXPECT_ALLCLOSE(w.t(), w_ref.t(), tol::kF32);
        }
}

}  // namespace
}  // namespace mmx::testing
