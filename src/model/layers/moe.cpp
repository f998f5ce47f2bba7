#include "model/layers/moe.h"

#include <cstring>

#include "model/trace.h"
#include "ops/ops.h"

namespace mmx::layers {

namespace {
enum Slot { kLogits = 200, kIds, kWeights, kCount, kFill, kRows, kScale, kXe, kGate, kUp, kAct, kYe,
            kShared, kSharedMlp };
}

MoeParams moe_params(const ModelConfig& c) {
  MoeParams p;
  p.n_experts = c.n_experts;
  p.n_experts_active = c.n_experts_active;
  p.ffn_dim = c.ffn_dim;
  p.routed_scaling_factor = c.routed_scaling_factor;
  p.router = c.router;
  p.act = {c.ffn_act, c.swiglu_alpha, c.swiglu_limit};
  return p;
}

void moe(const Tensor& x, const MoeWeights& w, const MoeParams& p, int il, Scratch& s, Tensor& out) {
  const int64_t n = x.dim(0), d = x.dim(1), f = p.ffn_dim;
  const int k = p.n_experts_active;

  PhaseScope router_time(p.phases, Phase::kRouter);
  Tensor logits = s.f32(kLogits, {n, p.n_experts});  // [n, n_experts]
  ops::matmul(x, w.gate, logits);
  Tensor ids = s.i32(kIds, {n, k});                 // [n, k] expert ids
  Tensor weights = s.f32(kWeights, {n, k});         // [n, k] renormalised unbiased probabilities
  if (p.router == RouterKind::kSoftmax) ops::moe_route_softmax(logits, k, ids, weights);
  else ops::moe_route_sigmoid(logits, w.bias, k, ids, weights);
  trace(logits, "router_logits", il);
  trace(weights, "router_weights", il);

  // Bucket (token, weight) pairs by expert; ascending expert id, then token order.
  // count[e]..count[e+1] is expert e's range in rows/scale (a prefix sum over expert loads).
  int32_t* count = s.i32(kCount, {p.n_experts + 1}).ptr<int32_t>();
  int32_t* fill = s.i32(kFill, {p.n_experts}).ptr<int32_t>();
  std::memset(count, 0, sizeof(int32_t) * (p.n_experts + 1));
  const int32_t* idp = ids.ptr<int32_t>();
  for (int64_t i = 0; i < n * k; ++i) {
    MMX_CHECK(idp[i] >= 0 && idp[i] < p.n_experts, "router id {}", idp[i]);
    ++count[idp[i] + 1];
  }
  for (int e = 0; e < p.n_experts; ++e) count[e + 1] += count[e];
  Tensor rows = s.i32(kRows, {n * k});     // [n*k] token index per slot, grouped by expert
  Tensor scale = s.f32(kScale, {n * k});   // [n*k] routing weight per slot
  std::memcpy(fill, count, sizeof(int32_t) * p.n_experts);
  const float* wp = weights.f32();
  for (int64_t t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int e = idp[t * k + j];
      rows.ptr<int32_t>()[fill[e]] = int32_t(t);
      scale.f32()[fill[e]] = wp[t * k + j] * p.routed_scaling_factor;
      ++fill[e];
    }

  router_time.stop();
  PhaseScope expert_time(p.phases, Phase::kExperts);
  std::memset(out.data, 0, out.size_bytes());
  for (int e = 0; e < p.n_experts; ++e) {
    const int64_t b = count[e], m = count[e + 1] - count[e];
    if (m == 0) continue;
    const ExpertWeights& ew = w.experts[e];
    const Tensor rows_e = rows.rows_range(b, b + m);
    const Tensor scale_e = scale.rows_range(b, b + m);
    Tensor xe = s.f32(kXe, {m, d});  // [m, d_model] gathered inputs
    Tensor g = s.f32(kGate, {m, f}), u = s.f32(kUp, {m, f}), a = s.f32(kAct, {m, f});
    Tensor ye = s.f32(kYe, {m, d});  // [m, d_model]
    ops::rows_gather(x, rows_e, xe);
    ops::matmul(xe, ew.w1, g);
    ops::matmul(xe, ew.w3, u);
    ffn_activation(g, u, p.act, a);
    ops::matmul(a, ew.w2, ye);
    ops::rows_scatter_add(ye, rows_e, scale_e, out);
  }
  if (!w.shared.gate.w.empty()) {
    Tensor sh = s.f32(kShared, {n, d});  // [n, d_model]
    mlp(x, w.shared, p.act, kSharedMlp, s, sh);
    trace(sh, "shared_expert_out", il);
    ops::add(out, sh);
  }
}

}  // namespace mmx::layers
