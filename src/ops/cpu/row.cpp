// The row family on the CPU (AVX2): passes over one F32 row, moved here from the sampler so that
// nothing above ops includes the backend's vector helpers (ops/cpu/simd.h). Contracts: ops.h,
// "row". Each vector loop has a scalar tail that computes what a lane would.
// Not here: the fp64 twins (ref/row.cpp), any Tensor-shaped op.
#include <algorithm>
#include <limits>

#include "ops/cpu/simd.h"
#include "ops/ops.h"

namespace mmx::ops {

using cpu::exp_ps;
using cpu::exp_scalar;

float row_max(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  float r = cpu::hmax(m);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

int32_t row_find(const float* x, int64_t n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ)))
      return int32_t(i + __builtin_ctz(unsigned(m)));
  for (; i < n; ++i)
    if (x[i] == v) return int32_t(i);
  return 0;
}

double row_exp_sum(const float* z, int64_t n, float mx, float inv_t, float* w) {
  const __m256 m = _mm256_set1_ps(mx), it = _mm256_set1_ps(inv_t);
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), m), it));
    _mm256_storeu_ps(w + i, e);
    acc = _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)),
                                           _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, acc);
  double s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += (w[i] = exp_scalar((z[i] - mx) * inv_t));
  return s;
}

double row_sum_at_least(const float* w, int64_t n, float t) {
  const __m256 tt = _mm256_set1_ps(t);
  __m256 mass = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(w + i);
    mass = _mm256_add_ps(mass, _mm256_and_ps(_mm256_cmp_ps(x, tt, _CMP_GE_OQ), x));
  }
  double s = cpu::hsum(mass);
  for (; i < n; ++i)
    if (w[i] >= t) s += w[i];
  return s;
}

namespace {
// (z, id) ordered by z descending, ties -> lower id: the reference's total order.
bool by_z_desc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}
}  // namespace

// A min-heap of k, and 8 ids at a time rejected with one compare against its smallest (ids come
// in ascending order, so an equal z later never displaces an earlier one).
void row_top_k(const float* z, int64_t n, int k, std::vector<std::pair<float, int32_t>>& out) {
  const auto worse = by_z_desc;  // as the heap's "less": its top is the worst kept
  out.clear();
  int64_t i = 0;
  for (; i < n && int64_t(out.size()) < k; ++i) out.push_back({z[i], int32_t(i)});
  std::make_heap(out.begin(), out.end(), worse);
  auto offer = [&](int64_t j) {
    if (z[j] > out.front().first) {
      std::pop_heap(out.begin(), out.end(), worse);
      out.back() = {z[j], int32_t(j)};
      std::push_heap(out.begin(), out.end(), worse);
    }
  };
  for (; i < n && (i & 7); ++i) offer(i);
  for (; i + 8 <= n; i += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(z + i), _mm256_set1_ps(out.front().first), _CMP_GT_OQ));
    if (m)
      for (int j = 0; j < 8; ++j)
        if (m >> j & 1) offer(i + j);
  }
  for (; i < n; ++i) offer(i);
}

void row_exp(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp_ps(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) x[i] = exp_scalar(x[i]);
}

}  // namespace mmx::ops
