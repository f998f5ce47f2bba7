#include "model/layers/mlp.h"

#include "ops/ops.h"

namespace mmx::layers {

void ffn_activation(const Tensor& gate, const Tensor& up, const FfnActParams& p, Tensor& out) {
  if (p.act == FfnAct::kSwigluOai) ops::glu_swiglu_oai(gate, up, p.alpha, p.limit, out);
  else ops::glu_silu(gate, up, out);
}

void mlp(const Tensor& x, const MlpWeights& w, const FfnActParams& p, int slot0, Scratch& s, Tensor& out) {
  const int64_t n = x.dim(0), f = w.gate.n_out();
  Tensor g = s.f32(slot0, {n, f}), u = s.f32(slot0 + 1, {n, f});  // [n, ffn]
  ops::matmul(x, w.gate, g);
  ops::matmul(x, w.up, u);
  ffn_activation(g, u, p, g);
  ops::matmul(g, w.down, out);
}

}  // namespace mmx::layers
