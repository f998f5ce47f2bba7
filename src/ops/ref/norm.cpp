// Reference elementwise and norm ops in fp64: rms_norm, add, glu_silu, glu_swiglu_oai, silu,
// mul_sigmoid (the fp64 oracle's, f64.h, on F32 tensors), scale_add.
// Not here: anything vectorized or threaded.
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) · weight.  x, y: [n, d]; weight: [d].
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check::rms_norm(x, weight, y);
  const int64_t d = x.dim(-1), n = x.rows();
  std::vector<double> out(static_cast<size_t>(n * d));
  f64::rms_norm(widen(x.f32(), n * d).data(), widen(weight.f32(), d).data(), n, d, double(eps), out.data(), nullptr);
  narrow(out, y.f32());  // y may alias x: x was read whole first
}

void add(Tensor& x, const Tensor& y) {
  check::same_f32(x, y, "add");
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(double(x.f32()[i]) + double(y.f32()[i]));
}

// out = silu(gate) · up.  gate, up, out: [n, f].
void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out) {
  check::same_f32(gate, up, "glu_silu");
  check::same_f32(gate, out, "glu_silu");
  const int64_t n = gate.numel();
  std::vector<double> a(static_cast<size_t>(n));
  f64::glu_silu(widen(gate.f32(), n).data(), widen(up.f32(), n).data(), n, a.data());
  narrow(a, out.f32());
}

void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out) {
  check::same_f32(gate, up, "glu_swiglu_oai");
  check::same_f32(gate, out, "glu_swiglu_oai");
  const int64_t n = gate.numel();
  std::vector<double> a(static_cast<size_t>(n));
  f64::swiglu_oai(widen(gate.f32(), n).data(), widen(up.f32(), n).data(), n, double(alpha), double(limit), a.data());
  narrow(a, out.f32());
}

void silu(Tensor& x) {
  const int64_t n = x.numel();
  std::vector<double> y(static_cast<size_t>(n));
  f64::silu(widen(x.f32(), n).data(), n, y.data());
  narrow(y, x.f32());
}

void mul_sigmoid(Tensor& x, const Tensor& gate) {
  check::same_f32(x, gate, "mul_sigmoid");
  const int64_t n = x.numel();
  std::vector<double> y(static_cast<size_t>(n));
  f64::mul_sigmoid(widen(x.f32(), n).data(), widen(gate.f32(), n).data(), n, y.data());
  narrow(y, x.f32());
}

void scale_add(Tensor& x, float a, const Tensor& y, float b) {
  check::same_f32(x, y, "scale_add");
  for (int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = float(double(a) * x.f32()[i] + double(b) * y.f32()[i]);
}

}  // namespace mmx::ops::ref
