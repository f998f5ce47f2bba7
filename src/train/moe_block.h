// The routed-expert block of the training graphs (graph_moe.cpp: M2, Text-01 / M1; graph_m3.cpp):
//   logits = x·Gateᵀ;  router → top-k ids and weights w (M2/M3: sigmoid, selection-only bias;
//   Text-01: softmax over all experts);  out_r = rs · Σ_j w_rj · expert_ids(r,j)(x_r)
// with experts w2 · act(w1·x, w3·x) (SwiGLU, or SwiGLU-OAI for M3), evaluated per expert over its
// slots (ascending expert id, then token order, as model/layers/moe.cpp), and the output summed
// per row in rank order (deterministic, thread-count invariant). A shared expert stays with the
// caller. One MoeBlock per layer holds that layer's saved activations; the backward's scratch
// (MoeScratch) is shared by the layers of a graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/params.h"

namespace mmx::train {

struct MoeSpec {
  int n_experts = 0, k = 0;       // experts, experts per token
  int64_t d = 0, f = 0;           // d_model, expert width
  RouterKind router = RouterKind::kSigmoidBias;
  bool routing_bias = true;       // sigmoid router: the routing bias (TensorRole::kRouterBias) present
  double routed_scaling = 1.0;    // rs
  FfnAct act = FfnAct::kSiluGlu;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;  // SwiGLU-OAI (the config's decimals)
};

// One MoE layer's router, routing bias and routed experts by checkpoint name (model/schema.h).
struct MoeTensors {
  std::string router, bias;             // bias: "" when the config has none
  std::vector<std::string> w1, w2, w3;  // [E] gate, down, up
};
MoeTensors moe_tensors(const ModelConfig& c, int il);

template <class T>
struct MoeScratch {
  std::vector<T> dye, dxe, da, dg, du, dlogits, dw;
  void reserve(const MoeSpec& s, int64_t max_rows);
};

template <class T>
class MoeBlock {
 public:
  MoeBlock(const MoeSpec& s, int64_t max_rows);
  // out [n, d] is WRITTEN; loads [E] += tokens routed to each expert; `t` names the tensors.
  void forward(ParamSet<T>& P, const MoeTensors& t, const T* x, int64_t n, T* out, int64_t* loads);
  // dx [n, d] += d out/d x · dout; parameter gradients accumulate. x: the forward's input.
  void backward(ParamSet<T>& P, const MoeTensors& t, const T* x, const T* dout, int64_t n, T* dx,
                MoeScratch<T>& s) const;

 private:
  void act_fwd(const T* g, const T* u, int64_t m, T* a) const;
  void act_bwd(const T* da, const T* g, const T* u, int64_t m, T* dg, T* du) const;

  MoeSpec s_;
  std::vector<T> logits_, probs_, w_;              // [n,E] [n,E] [n,k]
  std::vector<int32_t> ids_;                       // [n,k]
  std::vector<int32_t> count_;                     // [E+1] slot ranges per expert (prefix sums)
  std::vector<int32_t> slot_row_, slot_j_, slot_of_;  // [n*k]: row and rank of a slot; slot of (row, rank)
  std::vector<T> xe_, g_, u_, a_, ye_;             // [n*k, d] [n*k, f] ×3 [n*k, d]
};

}  // namespace mmx::train
