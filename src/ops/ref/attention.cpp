// Reference causal GQA softmax attention, fp64: for each query and head, every score, the
// softmax and the weighted sum of V are computed in double, straight from the definition.
// Not here: blocking, threads, or any trick (no online softmax).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// q, out: [n_q, n_heads, head_dim]; k, v: [n_kv, n_kv_heads, head_dim].
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out) {
  check::attention_softmax(q, k, v, pos0, out);
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2), n_kv_heads = k.dim(1);
  const int64_t group = n_heads / n_kv_heads;
  auto at = [](const Tensor& t, int64_t a, int64_t b, int64_t c) {  // t[a, b, c]
    return double(t.f32()[(a * t.dim(1) + b) * t.dim(2) + c]);
  };
  for (int64_t i = 0; i < n_q; ++i) {
    const int64_t n_keys = pos0 + i + 1;  // keys 0..pos0+i are visible
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kvh = h / group;
      std::vector<double> s(static_cast<size_t>(n_keys));
      for (int64_t j = 0; j < n_keys; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += at(q, i, h, c) * at(k, j, kvh, c);
        s[size_t(j)] = double(scale) * dot;
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0.0;
      for (double& e : s) sum += (e = std::exp(e - m));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < n_keys; ++j) acc += s[size_t(j)] * at(v, j, kvh, c);
        out.f32()[(i * n_heads + h) * d + c] = float(acc / sum);
      }
    }
  }
}

}  // namespace mmx::ops::ref
