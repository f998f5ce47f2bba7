// Fast sigmoid router (MiniMax-M2/M3): one pass over the experts keeping a sorted top-k list.
//
// Arithmetic is in double, like the reference: the router is tiny (n × n_experts scalars) and
// doing it in double makes the selection agree exactly with the float64 oracles (ops::ref and
// the numpy reference) instead of flipping on fp32 near-ties. The algorithm differs from the
// reference (insertion into a k-list vs a full stable sort), which is what the tests compare.
//
// Not here: softmax routing (MiniMax-Text-01), the ×2.0 routed scaling and the shared expert of
// M3 (callers apply those).
#include <cmath>
#include <vector>

#include "ops/cpu/cpu.h"

namespace mmx::ops::cpu {

void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights) {
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  const float* lp = logits.f32();
  const float* bp = bias.empty() ? nullptr : bias.f32();
  int32_t* idp = ids.ptr<int32_t>();
  float* wp = weights.f32();
  thread_local std::vector<double> p, sel_score;
  thread_local std::vector<int32_t> sel;
  p.resize(size_t(n_exp));
  sel_score.resize(size_t(k));
  sel.resize(size_t(k));

  for (int64_t t = 0; t < n; ++t) {
    const float* lr = lp + t * n_exp;
    int n_sel = 0;
    for (int64_t e = 0; e < n_exp; ++e) {
      p[size_t(e)] = 1.0 / (1.0 + std::exp(-double(lr[e])));
      const double s = p[size_t(e)] + (bp ? double(bp[e]) : 0.0);
      // Experts arrive in increasing id order, so an equal score goes after the ones already
      // kept: ties resolve to the lower id.
      if (n_sel == k && !(s > sel_score[size_t(k - 1)])) continue;
      int pos = n_sel < k ? n_sel++ : k - 1;
      while (pos > 0 && s > sel_score[size_t(pos - 1)]) {
        sel_score[size_t(pos)] = sel_score[size_t(pos - 1)];
        sel[size_t(pos)] = sel[size_t(pos - 1)];
        --pos;
      }
      sel_score[size_t(pos)] = s;
      sel[size_t(pos)] = int32_t(e);
    }
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p[size_t(sel[size_t(j)])];
    for (int j = 0; j < k; ++j) {
      idp[t * k + j] = sel[size_t(j)];
      wp[t * k + j] = float(p[size_t(sel[size_t(j)])] / sum);
    }
  }
}

}  // namespace mmx::ops::cpu
