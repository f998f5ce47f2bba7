// Fast lightning attention (spec §3.5). PLACEHOLDER: token-by-token fp32 recurrence; the
// blockwise prefill and the vectorized decode replace it.
#include <cmath>

#include "ops/cpu/cpu.h"

namespace mmx::ops::cpu {

void lightning_attention(const Tensor& qkv, const Tensor& slopes, int /*block*/, Tensor& state,
                         Tensor& out) {
  const int64_t n = qkv.dim(0), n_heads = qkv.dim(1), d = qkv.dim(3);
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t h = 0; h < n_heads; ++h) {
    const float lambda = std::exp(-slopes.f32()[h]);
    float* s = state.f32() + h * d * d;
    for (int64_t t = 0; t < n; ++t) {
      const float* q = qkv.f32() + ((t * n_heads + h) * 3) * d;
      const float* k = q + d;
      const float* v = q + 2 * d;
      float* o = out.f32() + (t * n_heads + h) * d;
      for (int64_t j = 0; j < d; ++j) o[j] = 0;
      for (int64_t i = 0; i < d; ++i) {
        float* si = s + i * d;
        for (int64_t j = 0; j < d; ++j) {
          si[j] = lambda * si[j] + k[i] * v[j];
          o[j] += q[i] * si[j];
        }
      }
    }
  }
}

}  // namespace mmx::ops::cpu
