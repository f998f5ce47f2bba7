// Reference row family in fp64 (contracts: ops.h, "row"): plain loops, written for obviousness.
// Not here: anything vectorized.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/ops.h"

namespace mmx::ops::ref {

float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

int32_t row_find(const float* x, int64_t n, float v) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == v) return int32_t(i);
  return 0;
}

double row_exp_sum(const float* z, int64_t n, float mx, float inv_t, float* w) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    // The fast path clamps the exponent to [-87.3, 88] (ops.h, row_exp).
    const double a = std::clamp((double(z[i]) - double(mx)) * double(inv_t), -87.3, 88.0);
    w[i] = float(std::exp(a));
    s += std::exp(a);
  }
  return s;
}

double row_sum_at_least(const float* w, int64_t n, float t) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    if (w[i] >= t) s += double(w[i]);
  return s;
}

void row_top_k(const float* z, int64_t n, int k, std::vector<std::pair<float, int32_t>>& out) {
  out.clear();
  for (int64_t i = 0; i < n; ++i) out.push_back({z[i], int32_t(i)});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  out.resize(size_t(std::min<int64_t>(k, n)));
}

void row_exp(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = float(std::exp(std::clamp(double(x[i]), -87.3, 88.0)));
}

}  // namespace mmx::ops::ref
