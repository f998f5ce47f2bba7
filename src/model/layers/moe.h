// Routed mixture of experts: router matmul (F32 weights) -> ops::moe_route_sigmoid (M2: sigmoid,
// selection-only bias) or ops::moe_route_softmax (Text-01/M1) -> per-expert batched SiLU-GLU FFN ->
// weighted scatter-add. Tokens are grouped by expert so each expert's weights stream once per
// forward, whatever the number of tokens routed to it.
#pragma once

#include "model/layers/mlp.h"
#include "model/phase_times.h"
#include "model/weights.h"
#include "tensor/scratch.h"

namespace mmx::layers {

struct MoeParams {
  int n_experts = 0, n_experts_active = 0;
  int64_t ffn_dim = 0;
  float routed_scaling_factor = 1.0f;
  RouterKind router = RouterKind::kSigmoidBias;
  FfnActParams act;  // expert (and shared expert) activation
  PhaseTimes* phases = nullptr;  // non-null: router and expert time are added here
};

// The MoE parameters a config implies (router kind, scaling, expert activation).
MoeParams moe_params(const ModelConfig& c);

// out = routed_scaling_factor · Σ_sel w_e · expert_e(x) + shared_expert(x) (M3: the shared expert
// is neither scaled nor gated; absent for M2 / Text-01).
// x: [n_tokens, d_model] normed input; out: [n_tokens, d_model] (overwritten).
void moe(const Tensor& x, const MoeWeights& w, const MoeParams& p, int il, Scratch& scratch,
         Tensor& out);

}  // namespace mmx::layers
