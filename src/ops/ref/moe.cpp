// Reference sigmoid router (MiniMax-M2/M3), fp64, by full stable sort: p = sigmoid(logits),
// order experts by p + bias descending (std::stable_sort keeps lower ids first on ties), take
// the first k, weight each by p / sum of the selected p (the bias never enters the weights).
// Not here: softmax routing (Text-01), routed scaling factors, shared experts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// logits: [n, n_experts]; bias: [n_experts] or empty; ids: [n, k] I32; weights: [n, k] F32.
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights) {
  check::moe_route_sigmoid(logits, bias, k, ids, weights);
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> p(static_cast<size_t>(n_exp)), score(static_cast<size_t>(n_exp));
    for (int64_t e = 0; e < n_exp; ++e) {
      p[size_t(e)] = 1.0 / (1.0 + std::exp(-double(logits.f32()[t * n_exp + e])));
      score[size_t(e)] = p[size_t(e)] + (bias.empty() ? 0.0 : double(bias.f32()[e]));
    }
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return score[size_t(a)] > score[size_t(b)]; });
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p[size_t(order[size_t(j)])];
    for (int j = 0; j < k; ++j) {
      ids.ptr<int32_t>()[t * k + j] = order[size_t(j)];
      weights.f32()[t * k + j] = float(p[size_t(order[size_t(j)])] / sum);
    }
  }
}

}  // namespace mmx::ops::ref
