// moe_route_softmax (Text-01 / M1 router, spec §3.6): the reference proven by hand (known
// softmax weights, ties to the lower expert id, overflow-free with huge logits), then the fast
// router against it: ids exactly, weights to fp32 precision, over n_experts × k, including
// tie-heavy inputs; selected weights sum to 1 and come in descending order.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

struct Routed {
  Buffer ids, w;
};

Routed route(bool fast, const Tensor& logits, int k) {
  const int64_t n = logits.dim(0);
  Routed r{Buffer(DType::kI32, {n, k}), Buffer(DType::kF32, {n, k})};
  if (fast) ops::moe_route_softmax(logits, k, r.ids.t(), r.w.t());
  else ops::ref::moe_route_softmax(logits, k, r.ids.t(), r.w.t());
  return r;
}

int32_t id_at(const Routed& r, int64_t i) { return r.ids.t().ptr<int32_t>()[i]; }

TEST(MoeSoftmaxRef, KnownWeights) {
  // logits ln 1, ln 2, ln 3, ln 4 -> p ∝ 1 : 2 : 3 : 4. Top-2 = experts 3, 2 with weights
  // 4/7, 3/7; top-1 = expert 3 with weight 1; top-4 = 3, 2, 1, 0 with 4, 3, 2, 1 / 10.
  Buffer logits = f32_tensor({0.0f, float(std::log(2.0)), float(std::log(3.0)), float(std::log(4.0))});
  const Tensor lt = logits.t().reshape({1, 4});
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    Routed r2 = route(fast, lt, 2);
    EXPECT_EQ(id_at(r2, 0), 3);
    EXPECT_EQ(id_at(r2, 1), 2);
    EXPECT_NEAR(r2.w.f32()[0], 4.0 / 7.0, 1e-6);
    EXPECT_NEAR(r2.w.f32()[1], 3.0 / 7.0, 1e-6);
    Routed r1 = route(fast, lt, 1);
    EXPECT_EQ(id_at(r1, 0), 3);
    EXPECT_EQ(r1.w.f32()[0], 1.0f);
    Routed r4 = route(fast, lt, 4);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(id_at(r4, j), 3 - j);
      EXPECT_NEAR(r4.w.f32()[j], (4.0 - j) / 10.0, 1e-6);
    }
  }
}

TEST(MoeSoftmaxRef, TiesPickLowerId) {
  // All equal: experts 0, 1, 2 with weight 1/3 each. Ties among the best: 1, 2, 4 of
  // [1, 3, 3, 2, 3] in that order; with k = 4 the next is expert 3 (logit 2).
  Buffer flat = f32_tensor({0.3f, 0.3f, 0.3f, 0.3f, 0.3f});
  Buffer some = f32_tensor({1, 3, 3, 2, 3});
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    Routed a = route(fast, flat.t().reshape({1, 5}), 3);
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(id_at(a, j), j);
      EXPECT_FLOAT_EQ(a.w.f32()[j], 1.0f / 3.0f);
    }
    Routed b = route(fast, some.t().reshape({1, 5}), 4);
    const int32_t want[] = {1, 2, 4, 3};
    for (int j = 0; j < 4; ++j) EXPECT_EQ(id_at(b, j), want[j]) << j;
    const double e = std::exp(-1.0);  // p(expert 3) / p(expert 1)
    EXPECT_NEAR(b.w.f32()[0], 1.0 / (3.0 + e), 1e-6);
    EXPECT_NEAR(b.w.f32()[3], e / (3.0 + e), 1e-6);
  }
}

TEST(MoeSoftmaxRef, HugeLogitsDoNotOverflow) {
  // exp(1000) overflows; the max subtraction keeps it finite: weights 1/(1+e^-1), e^-1/(1+e^-1).
  Buffer logits = f32_tensor({-1000.0f, 1000.0f, 999.0f, -5.0f});
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    Routed r = route(fast, logits.t().reshape({1, 4}), 2);
    EXPECT_EQ(id_at(r, 0), 1);
    EXPECT_EQ(id_at(r, 1), 2);
    const double e = std::exp(-1.0);
    EXPECT_NEAR(r.w.f32()[0], 1.0 / (1.0 + e), 1e-6);
    EXPECT_NEAR(r.w.f32()[1], e / (1.0 + e), 1e-6);
  }
}

// Fast vs ref on `logits` [n, n_exp]: identical ids, weights within fp32 rounding, each row's
// weights descending and summing to 1.
void check_grid_case(const Tensor& logits, int k) {
  const int64_t n = logits.dim(0);
  Routed f = route(true, logits, k), r = route(false, logits, k);
  EXPECT_TRUE(bitwise_equal(f.ids.t(), r.ids.t()));
  EXPECT_ALLCLOSE(f.w.t(), r.w.t(), tol::kF32);
  for (int64_t t = 0; t < n; ++t) {
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      const float w = f.w.f32()[t * k + j];
      sum += w;
      EXPECT_GT(w, 0.0f);
      if (j > 0) {
        EXPECT_LE(w, f.w.f32()[t * k + j - 1]) << "row " << t;
      }
    }
    // k fp32 roundings of values <= 1 plus one division: a few ulp of 1.
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << t;
  }
}

TEST(MoeSoftmax, FastVsRefGrid) {
  uint64_t seed = 300;
  for (int64_t n_exp : {4, 32, 256})
    for (int k : {1, 2, 8}) {
      if (k > n_exp) continue;
      SCOPED_TRACE(fmt::format("n_experts={} k={}", n_exp, k));
      // Router logits of a real layer are O(1)-O(10): scale 3.
      Buffer logits = random_tensor({33, n_exp}, seed += 5, 3.0f);
      check_grid_case(logits, k);
    }
}

TEST(MoeSoftmax, TieHeavyGrid) {
  // Logits drawn from 4 values: many exact ties at and across the selection boundary.
  std::mt19937_64 rng(77);
  std::uniform_int_distribution<int> pick(0, 3);
  const float values[] = {-1.0f, 0.25f, 0.5f, 2.0f};
  for (int64_t n_exp : {4, 32, 256})
    for (int k : {1, 2, 8}) {
      if (k > n_exp) continue;
      SCOPED_TRACE(fmt::format("n_experts={} k={}", n_exp, k));
      Buffer logits(DType::kF32, {20, n_exp});
      for (int64_t i = 0; i < 20 * n_exp; ++i) logits.f32()[i] = values[pick(rng)];
      check_grid_case(logits, k);
    }
}

}  // namespace
}  // namespace mmx::testing
