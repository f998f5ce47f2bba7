// Reference sigmoid router (MiniMax-M2/M3): the fp64 oracle's (f64.h: p = sigmoid(logits), order
// experts by p + bias descending by a stable sort, take the first k, weight each by p / sum of the
// selected p; the bias never enters the weights) on F32 tensors.
// Not here: softmax routing (Text-01), routed scaling factors, shared experts.
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

// logits: [n, n_experts]; bias: [n_experts] or empty; ids: [n, k] I32; weights: [n, k] F32.
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights) {
  check::moe_route_sigmoid(logits, bias, k, ids, weights);
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  const std::vector<double> b = bias.empty() ? std::vector<double>() : widen(bias.f32(), n_exp);
  std::vector<double> w(static_cast<size_t>(n * k));
  f64::route_sigmoid(widen(logits.f32(), n * n_exp).data(), bias.empty() ? nullptr : b.data(), n, int(n_exp), k,
                     ids.ptr<int32_t>(), w.data(), nullptr);
  narrow(w, weights.f32());
}

}  // namespace mmx::ops::ref
