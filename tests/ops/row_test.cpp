// The row family (ops.h, "row": the sampler's and trainer's passes over one F32 row): hand cases
// for the reference, then the fast path against it over lengths that hit the 8-lane body, the
// tail and both (exact for max / find / top-k, which only compare; the exps within 2 ulp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/ops.h"

namespace mmx::testing {
namespace {

std::vector<float> random_row(int64_t n, uint64_t seed, int n_distinct = 0) {
  std::mt19937 rng{static_cast<uint32_t>(seed)};
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = n_distinct > 0 ? float(int(rng() % unsigned(n_distinct))) : d(rng);  // ties when n_distinct
  return v;
}

TEST(RowRef, ByHand) {
  const std::vector<float> x = {1, 5, -2, 5, 0};
  EXPECT_EQ(ops::ref::row_max(x.data(), 5), 5.0f);
  EXPECT_EQ(ops::ref::row_max(x.data(), 0), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(ops::ref::row_find(x.data(), 5, 5.0f), 1);  // the first of the two
  EXPECT_EQ(ops::ref::row_find(x.data(), 5, 7.0f), 0);
  std::vector<std::pair<float, int32_t>> top;
  ops::ref::row_top_k(x.data(), 5, 3, top);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0], std::make_pair(5.0f, 1));  // tie -> lower id first
  EXPECT_EQ(top[1], std::make_pair(5.0f, 3));
  EXPECT_EQ(top[2], std::make_pair(1.0f, 0));
  std::vector<float> w(5);
  // exp((x - 5) · 0.5): e^-2, 1, e^-3.5, 1, e^-2.5
  const double s = ops::ref::row_exp_sum(x.data(), 5, 5.0f, 0.5f, w.data());
  EXPECT_NEAR(s, std::exp(-2.0) + 2 + std::exp(-3.5) + std::exp(-2.5), 1e-12);
  EXPECT_EQ(w[1], 1.0f);
  EXPECT_DOUBLE_EQ(ops::ref::row_sum_at_least(w.data(), 5, 0.5f), 2.0);
  std::vector<float> e = {0.0f, 1.0f, -100.0f, 100.0f};
  ops::ref::row_exp(e.data(), 4);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_FLOAT_EQ(e[1], float(std::exp(1.0)));
  EXPECT_FLOAT_EQ(e[2], float(std::exp(-87.3)));  // clamped, as the fast path
  EXPECT_FLOAT_EQ(e[3], float(std::exp(88.0)));
}

TEST(Row, FastVsRef) {
  uint64_t seed = 1;
  for (int64_t n : {1, 3, 7, 8, 9, 16, 31, 100, 1000, 4099})
    for (int n_distinct : {0, 5}) {
      SCOPED_TRACE(fmt::format("n={} distinct={}", n, n_distinct));
      const std::vector<float> z = random_row(n, seed++, n_distinct);
      const float mx = ops::row_max(z.data(), n);
      EXPECT_EQ(mx, ops::ref::row_max(z.data(), n));
      for (float v : {mx, z[size_t(n / 2)], 1e9f})
        EXPECT_EQ(ops::row_find(z.data(), n, v), ops::ref::row_find(z.data(), n, v));
      for (int k : {1, 2, 8, 50}) {
        std::vector<std::pair<float, int32_t>> got, want;
        ops::row_top_k(z.data(), n, k, got);
        ops::ref::row_top_k(z.data(), n, k, want);
        std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        EXPECT_EQ(got, want) << "k=" << k;
      }
      for (float inv_t : {1.0f, 0.7f, 5.0f}) {
        std::vector<float> w(static_cast<size_t>(n)), wr(static_cast<size_t>(n));
        const double s = ops::row_exp_sum(z.data(), n, mx, inv_t, w.data());
        const double sr = ops::ref::row_exp_sum(z.data(), n, mx, inv_t, wr.data());
        // ~2 ulp per element (the polynomial), plus the float exponent a = (z - mx) · inv_t the
        // fast path rounds (two roundings of |a| · 2^-24 each, i.e. a relative |a| · 2^-23 in exp(a)).
        for (int64_t i = 0; i < n; ++i) {
          const double a = std::fabs((double(z[size_t(i)]) - double(mx)) * double(inv_t));
          EXPECT_NEAR(w[size_t(i)], wr[size_t(i)], (3e-7 + a * 1.2e-7) * wr[size_t(i)] + 1e-37) << i;
        }
        EXPECT_NEAR(s, sr, 1e-6 * sr);  // the sum is dominated by the terms near the max (a ~ 0)
        for (float t : {0.0f, 1e-3f, 0.5f}) {
          const double a = ops::row_sum_at_least(w.data(), n, t), b = ops::ref::row_sum_at_least(w.data(), n, t);
          EXPECT_NEAR(a, b, double(n / 8 + 8) * 6e-8 * b + 1e-30);  // float lanes: n/8 adds each, 2^-24 apiece
        }
      }
      std::vector<float> e = z, er = z;
      ops::row_exp(e.data(), n);
      ops::ref::row_exp(er.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(e[size_t(i)], er[size_t(i)], 3e-7f * er[size_t(i)]) << i;
    }
}

}  // namespace
}  // namespace mmx::testing
