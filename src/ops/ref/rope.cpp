// Reference partial NeoX RoPE: the fp64 oracle's (f64.h; angles, cos/sin and the rotation in
// double) on an F32 tensor. Not here: other RoPE layouts or scalings.
#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

// x: [n, n_heads, head_dim], in place on channels [0, rotary_dim); positions: [n] I32.
void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta) {
  check::rope_neox(x, positions, rotary_dim);
  const int64_t n = x.dim(0), n_heads = x.dim(1), head_dim = x.dim(2);
  std::vector<double> v = widen(x.f32(), n * n_heads * head_dim);
  f64::rope_neox(v.data(), positions.ptr<int32_t>(), n, int(n_heads), int(head_dim), rotary_dim, theta, false);
  narrow(v, x.f32());
}

}  // namespace mmx::ops::ref
