#include "testing/allclose.h"

#include <fmt/format.h>

#include <cmath>

namespace mmx::testing {

namespace {
std::string index_str(const Tensor& t, int64_t flat) {
  std::vector<int64_t> idx(t.ndim);
  for (int d = t.ndim - 1; d >= 0; --d) {
    idx[d] = flat % t.shape[d];
    flat /= t.shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}
}  // namespace

::testing::AssertionResult allclose(const float* got, const float* want, const Tensor& shape_of,
                                    Tol tol) {
  const int64_t n = shape_of.numel();
  int64_t n_bad = 0, n_nonfinite = 0, worst = -1;
  double worst_diff = -1, err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = got[i], r = want[i];
    if (!std::isfinite(a) || !std::isfinite(r)) {
      ++n_nonfinite;
      if (worst < 0) worst = i;
      continue;
    }
    const double d = std::fabs(a - r);
    err2 += d * d;
    ref2 += r * r;
    if (d > tol.atol + tol.rtol * std::fabs(r)) ++n_bad;
    if (d > worst_diff) {
      worst_diff = d;
      worst = i;
    }
  }
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  if (n_bad == 0 && n_nonfinite == 0 && nmse <= tol.max_nmse) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format(
             "max|diff|={:.3g} at {} (got {:.6g}, want {:.6g}); {}/{} outside atol={:.3g} "
             "rtol={:.3g}; nmse={:.3g} (max {:.3g}); NaN/Inf: {}",
             worst_diff, worst >= 0 ? index_str(shape_of, worst) : "-", worst >= 0 ? got[worst] : 0.f,
             worst >= 0 ? want[worst] : 0.f, n_bad, n, tol.atol, tol.rtol, nmse, tol.max_nmse,
             n_nonfinite ? std::to_string(n_nonfinite) : std::string("none"));
}

::testing::AssertionResult allclose(const Tensor& got, const Tensor& want, Tol tol) {
  if (got.numel() != want.numel())
    return ::testing::AssertionFailure()
           << "shape mismatch: got " << got.shape_str() << " want " << want.shape_str();
  return allclose(got.f32(), want.f32(), got, tol);
}

void fill_random(float* p, int64_t n, uint64_t seed, float stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
}

Buffer random_tensor(std::initializer_list<int64_t> dims, uint64_t seed, float stddev) {
  Buffer b(DType::kF32, dims);
  fill_random(b.f32(), b.t().numel(), seed, stddev);
  return b;
}

}  // namespace mmx::testing
