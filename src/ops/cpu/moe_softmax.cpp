// Fast softmax router (MiniMax-Text-01 / M1): softmax is monotonic, so the top-k of p are the
// top-k logits (partial selection, lower id first on ties); the renormalised weights are the
// softmax over the selected logits alone, exp(l_e - l_max) / Σ_sel exp(l_s - l_max), in fp32.
#include <cmath>

#include "ops/cpu/cpu.h"

namespace mmx::ops::cpu {

void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights) {
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.f32() + t * n_exp;
    int32_t* id = ids.ptr<int32_t>() + t * k;
    float* w = weights.f32() + t * k;
    // Insertion into a descending list of k: strict > keeps the lower id ahead on ties.
    int m = 0;
    for (int32_t e = 0; e < n_exp; ++e) {
      if (m == k && !(l[e] > l[id[k - 1]])) continue;
      int j = m < k ? m++ : k - 1;
      while (j > 0 && l[e] > l[id[j - 1]]) {
        id[j] = id[j - 1];
        --j;
      }
      id[j] = e;
    }
    const float mx = l[id[0]];
    float z = 0;
    for (int j = 0; j < k; ++j) z += w[j] = std::exp(l[id[j]] - mx);
    for (int j = 0; j < k; ++j) w[j] /= z;
  }
}

}  // namespace mmx::ops::cpu
