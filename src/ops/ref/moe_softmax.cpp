// Reference softmax router (MiniMax-Text-01 / M1, spec §3.6), fp64, by full stable sort:
// p = softmax(logits) over all experts, take the k largest (lower id first on ties), weight each
// by p / sum of the selected p.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// logits: [n, n_experts]; ids: [n, k] I32; weights: [n, k] F32.
void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights) {
  check::moe_route_softmax(logits, k, ids, weights);
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.f32() + t * n_exp;
    const double mx = *std::max_element(l, l + n_exp);
    std::vector<double> p(static_cast<size_t>(n_exp));
    double z = 0;
    for (int64_t e = 0; e < n_exp; ++e) z += p[size_t(e)] = std::exp(double(l[e]) - mx);
    for (double& x : p) x /= z;
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p[size_t(order[size_t(j)])];
    for (int j = 0; j < k; ++j) {
      ids.ptr<int32_t>()[t * k + j] = order[size_t(j)];
      weights.f32()[t * k + j] = float(p[size_t(order[size_t(j)])] / sum);
    }
  }
}

}  // namespace mmx::ops::ref
