// Reference lightning attention: the token-by-token recurrence of spec §3.5 in fp64 — the
// definition every faster evaluation (blockwise prefill, decode) is tested against.
//   S_h(t) = λ_h S_h(t-1) + k_h(t)ᵀ v_h(t);  o_h(t) = q_h(t) S_h(t);  λ_h = exp(-slopes[h])
#include <cmath>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

void attention_lightning(const Tensor& qkv, const Tensor& slopes, int /*block*/, Tensor& state,
                         Tensor& out) {
  check::attention_lightning(qkv, slopes, state, out);
  const int64_t n = qkv.dim(0), n_heads = qkv.dim(1), d = qkv.dim(3);
  for (int64_t h = 0; h < n_heads; ++h) {
    const double lambda = std::exp(-double(slopes.f32()[h]));
    float* sf = state.f32() + h * d * d;  // [d_k, d_v]
    std::vector<double> s(sf, sf + d * d);
    for (int64_t t = 0; t < n; ++t) {
      const float* q = qkv.f32() + ((t * n_heads + h) * 3 + 0) * d;
      const float* k = q + d;
      const float* v = q + 2 * d;
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j) s[i * d + j] = lambda * s[i * d + j] + double(k[i]) * v[j];
      float* o = out.f32() + (t * n_heads + h) * d;
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += double(q[i]) * s[i * d + j];
        o[j] = float(acc);
      }
    }
    for (int64_t i = 0; i < d * d; ++i) sf[i] = float(s[i]);
  }
}

}  // namespace mmx::ops::ref
