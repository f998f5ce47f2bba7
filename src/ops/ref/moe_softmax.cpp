// Reference softmax router (MiniMax-Text-01 / M1, spec §3.6): the fp64 oracle's (f64.h: p =
// softmax(logits) over all experts, the k largest by a stable sort, lower id first on ties, each
// weighted by p / sum of the selected p) on F32 tensors.
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

// logits: [n, n_experts]; ids: [n, k] I32; weights: [n, k] F32.
void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights) {
  check::moe_route_softmax(logits, k, ids, weights);
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  std::vector<double> w(static_cast<size_t>(n * k));
  f64::route_softmax(widen(logits.f32(), n * n_exp).data(), n, int(n_exp), k, ids.ptr<int32_t>(), w.data(), nullptr);
  narrow(w, weights.f32());
}

}  // namespace mmx::ops::ref
