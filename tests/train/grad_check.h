// Test helpers of the training-kernel tests: seeded random vectors, a closeness check with one
// failure message, and central finite differences. Test-only; shares nothing with src/train.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mmx::train {

using V = std::vector<double>;

inline V randn(size_t n, uint64_t seed, double sd = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, sd);
  V v(n);
  for (double& x : v) x = d(rng);
  return v;
}
inline std::vector<float> to_f(const V& v) { return std::vector<float>(v.begin(), v.end()); }
inline V to_d(const std::vector<float>& v) { return V(v.begin(), v.end()); }

// |got − want| ≤ atol + rtol · max|want| for every element.
inline void expect_close(const V& got, const V& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mx = 0, worst = 0;
  size_t at = 0;
  for (double w : want) mx = std::max(mx, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": non-finite at " << i;
    const double d = std::fabs(got[i] - want[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, atol + rtol * mx) << what << ": max|diff| " << worst << " at " << at << " (got " << got[at]
                                     << ", want " << want[at] << "), max|want| " << mx;
}

// Central finite differences of a scalar function of x.
inline V fd_grad(const std::function<double(const V&)>& L, V x, double h = 1e-5) {
  V g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = L(x);
    x[i] = x0 - h;
    const double lm = L(x);
    x[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}
inline double dot(const V& a, const V& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace mmx::train
