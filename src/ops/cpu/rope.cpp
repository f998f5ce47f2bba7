// Fast partial NeoX RoPE: per token, cos/sin of p·f_i are computed in double (as ops.h asks) and
// rounded to f32 once, then applied to every head with AVX2.
//
// Not here: interleaved (GPT-J) RoPE, scaling variants (YaRN, NTK) — MiniMax uses neither.
#include <omp.h>

#include <cmath>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta) {
  const int64_t n = x.dim(0), n_heads = x.dim(1), head_dim = x.dim(2);
  const int half = rotary_dim / 2;
  const int32_t* pos = positions.ptr<int32_t>();
  float* xp = x.f32();
  // f_i = theta^(-2i/rotary_dim); identical to the reference's expression.
  constexpr int kMaxHalf = 512;
  MMX_CHECK(half <= kMaxHalf, "rope_neox: rotary_dim {} > {}", rotary_dim, 2 * kMaxHalf);
  double freq[kMaxHalf];
  for (int i = 0; i < half; ++i) freq[i] = std::pow(theta, -2.0 * i / double(rotary_dim));

#pragma omp parallel for schedule(static) num_threads(threads()) if (n > 1 && n * n_heads * head_dim >= (1 << 15))
  for (int64_t t = 0; t < n; ++t) {
    float cos_t[kMaxHalf], sin_t[kMaxHalf];
    for (int i = 0; i < half; ++i) {
      const double a = double(pos[t]) * freq[i];
      cos_t[i] = float(std::cos(a));
      sin_t[i] = float(std::sin(a));
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* lo = xp + (t * n_heads + h) * head_dim;
      float* hi = lo + half;
      int i = 0;
      for (; i + 8 <= half; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
        const __m256 a = _mm256_loadu_ps(lo + i), b = _mm256_loadu_ps(hi + i);
        _mm256_storeu_ps(lo + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(hi + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
      }
      for (; i < half; ++i) {
        const float a = lo[i], b = hi[i];
        lo[i] = a * cos_t[i] - b * sin_t[i];
        hi[i] = b * cos_t[i] + a * sin_t[i];
      }
    }
  }
}

}  // namespace mmx::ops::cpu
