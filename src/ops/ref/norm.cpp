// Reference elementwise and norm ops in fp64: rms_norm, add, glu_silu, silu, mul_sigmoid,
// scale_add.
// Not here: anything vectorized or threaded.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) · weight.  x, y: [n, d]; weight: [d].
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check::rms_norm(x, weight, y);
  const int64_t d = x.dim(-1), n = x.rows();
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x.f32() + t * d;
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * double(xr[i]);
    const double inv = 1.0 / std::sqrt(ss / double(d) + double(eps));
    for (int64_t i = 0; i < d; ++i)  // element i is read before it is written: y may alias x
      y.f32()[t * d + i] = float(double(xr[i]) * inv * double(weight.f32()[i]));
  }
}

void add(Tensor& x, const Tensor& y) {
  check::same_f32(x, y, "add");
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(double(x.f32()[i]) + double(y.f32()[i]));
}

// out = silu(gate) · up.  gate, up, out: [n, f].
void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out) {
  check::same_f32(gate, up, "glu_silu");
  check::same_f32(gate, out, "glu_silu");
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const double g = gate.f32()[i];
    out.f32()[i] = float(g / (1.0 + std::exp(-g)) * double(up.f32()[i]));
  }
}

void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out) {
  check::same_f32(gate, up, "glu_swiglu_oai");
  check::same_f32(gate, out, "glu_swiglu_oai");
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const double g = std::min(double(gate.f32()[i]), double(limit));
    const double u = std::min(std::max(double(up.f32()[i]), -double(limit)), double(limit));
    out.f32()[i] = float((u + 1.0) * g / (1.0 + std::exp(-double(alpha) * g)));
  }
}

void silu(Tensor& x) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.f32()[i];
    x.f32()[i] = float(v / (1.0 + std::exp(-v)));
  }
}

void mul_sigmoid(Tensor& x, const Tensor& gate) {
  check::same_f32(x, gate, "mul_sigmoid");
  for (int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = float(double(x.f32()[i]) / (1.0 + std::exp(-double(gate.f32()[i]))));
}

void scale_add(Tensor& x, float a, const Tensor& y, float b) {
  check::same_f32(x, y, "scale_add");
  for (int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = float(double(a) * x.f32()[i] + double(b) * y.f32()[i]);
}

}  // namespace mmx::ops::ref
