// Row-wise and elementwise fast ops: rms_norm, add, glu_silu, silu, mul_sigmoid, scale_add
// (AVX2; OpenMP only for big inputs).
//
// rms_norm's sum of squares is one fixed-order fp32 reduction per row (4 vector accumulators,
// then a horizontal sum), done by one thread; so results never depend on the thread count.
// Not here: norms with a bias or a mean (none in the MiniMax families).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t(1) << 15;
constexpr int64_t kChunk = int64_t(1) << 14;  // elements per task of a flat elementwise op
}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  const int64_t d = x.dim(-1), n = x.rows();
  const float* xp = x.f32();
  const float* wp = weight.f32();
  float* yp = y.f32();
#pragma omp parallel for schedule(static) num_threads(threads()) if (n * d >= kParallelMin && n > 1)
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = xp + t * d;
    float* yr = yp + t * d;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= d; i += 32)
      for (int j = 0; j < 4; ++j) {
        const __m256 v = _mm256_loadu_ps(xr + i + 8 * j);
        a[j] = _mm256_fmadd_ps(v, v, a[j]);
      }
    for (; i + 8 <= d; i += 8) {
      const __m256 v = _mm256_loadu_ps(xr + i);
      a[0] = _mm256_fmadd_ps(v, v, a[0]);
    }
    float ss = hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
    for (; i < d; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / float(d) + eps);
    const __m256 iv = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= d; i += 8)
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), iv),
                                             _mm256_loadu_ps(wp + i)));
    for (; i < d; ++i) yr[i] = xr[i] * inv * wp[i];
  }
}

void add(Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  float* xp = x.f32();
  const float* yp = y.f32();
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(threads()) if (n >= kParallelMin)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    int64_t i = c * kChunk;
    for (; i + 8 <= end; i += 8)
      _mm256_storeu_ps(xp + i, _mm256_add_ps(_mm256_loadu_ps(xp + i), _mm256_loadu_ps(yp + i)));
    for (; i < end; ++i) xp[i] += yp[i];
  }
}

void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t n = gate.numel();
  const float* gp = gate.f32();
  const float* up_p = up.f32();
  float* op = out.f32();
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
#pragma omp parallel for schedule(static) num_threads(threads()) if (n >= kParallelMin)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    int64_t i = c * kChunk;
    for (; i + 8 <= end; i += 8) {
      const __m256 g = _mm256_loadu_ps(gp + i);
      const __m256 e = exp_ps(_mm256_xor_ps(g, sign));  // exp(-g)
      const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
      _mm256_storeu_ps(op + i, _mm256_mul_ps(s, _mm256_loadu_ps(up_p + i)));
    }
    for (; i < end; ++i) op[i] = gp[i] / (1.0f + exp_scalar(-gp[i])) * up_p[i];
  }
}

// Runs f(i0, i1) over [0, n) in kChunk pieces, in parallel for big n. Elementwise only.
template <class F>
static void for_chunks(int64_t n, F f) {
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(threads()) if (n >= kParallelMin)
  for (int64_t c = 0; c < n_chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}

void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out) {
  const float* gp = gate.f32();
  const float* up_p = up.f32();
  float* op = out.f32();
  for_chunks(gate.numel(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = std::min(gp[i], limit);
      const float u = std::min(std::max(up_p[i], -limit), limit);
      op[i] = (u + 1.0f) * g / (1.0f + exp_scalar(-alpha * g));
    }
  });
}

void silu(Tensor& x) {
  float* p = x.f32();
  for_chunks(x.numel(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) p[i] = p[i] / (1.0f + exp_scalar(-p[i]));
  });
}

void mul_sigmoid(Tensor& x, const Tensor& gate) {
  float* p = x.f32();
  const float* g = gate.f32();
  for_chunks(x.numel(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) p[i] = p[i] / (1.0f + exp_scalar(-g[i]));
  });
}

void scale_add(Tensor& x, float a, const Tensor& y, float b) {
  float* p = x.f32();
  const float* q = y.f32();
  for_chunks(x.numel(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) p[i] = a * p[i] + b * q[i];
  });
}

}  // namespace mmx::ops::cpu
