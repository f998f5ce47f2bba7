// Reference partial NeoX RoPE, fp64 throughout (angles, cos/sin, and the rotation itself).
// Not here: other RoPE layouts or scalings.
#include <cmath>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// x: [n, n_heads, head_dim], in place on channels [0, rotary_dim); positions: [n] I32.
void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta) {
  check::rope_neox(x, positions, rotary_dim);
  const int64_t n = x.dim(0), n_heads = x.dim(1), head_dim = x.dim(2);
  const int half = rotary_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    const double p = positions.ptr<int32_t>()[t];
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x.f32() + (t * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double a = p * std::pow(theta, -2.0 * i / double(rotary_dim));
        const double x0 = v[i], x1 = v[i + half];
        v[i] = float(x0 * std::cos(a) - x1 * std::sin(a));
        v[i + half] = float(x1 * std::cos(a) + x0 * std::sin(a));
      }
    }
  }
}

}  // namespace mmx::ops::ref
