// Dense gated MLP: y = down(act(gate(x), up(x))). M3's first layers (width 12288) and its shared
// expert (3072) use it with SwiGLU-OAI; the routed experts of layers/moe share the activation.
#pragma once

#include "model/config.h"
#include "model/weights.h"
#include "tensor/scratch.h"

namespace mmx::layers {

struct FfnActParams {
  FfnAct act = FfnAct::kSiluGlu;
  float alpha = 1.702f, limit = 7.0f;  // SwiGLU-OAI only
};

// act(gate, up) -> out, all [n, f] F32.
void ffn_activation(const Tensor& gate, const Tensor& up, const FfnActParams& p, Tensor& out);

// x: [n_tokens, d_model]; out: [n_tokens, d_model] (overwritten). `slot0` picks the scratch slots
// (so the MoE's shared expert and a dense layer do not share buffers with their caller).
void mlp(const Tensor& x, const MlpWeights& w, const FfnActParams& p, int slot0, Scratch& s, Tensor& out);

}  // namespace mmx::layers
