// Naive fp64 twins of kernels_lightning.h (plain loops over the definitions): the masked one-block
// lightning form (no inference twin: ops::ref::attention_lightning is the causal recurrence) and
// the backward passes. The SiLU, output-gate and softmax-router forwards are ops/ref/f64.h's.
#pragma once

#include <cstdint>

namespace mmx::train::ref {

void lightning_fwd(const double* qkv, const double* slopes, const int32_t* pos, const uint8_t* vis, int64_t t,
                   int n_heads, int hd, double* out, double* a);
void lightning_bwd(const double* dout, const double* qkv, const double* slopes, const int32_t* pos,
                   const uint8_t* vis, const double* a, int64_t t, int n_heads, int hd, double* dqkv);
void silu_bwd(const double* dy, const double* x, int64_t n, double* dx);
void mul_sigmoid_bwd(const double* dy, const double* a, const double* g, int64_t n, double* da, double* dg);
void router_softmax_bwd(const double* dw, const int32_t* ids, const double* w, const double* p, int64_t n,
                        int n_experts, int k, double* dlogits);

}  // namespace mmx::train::ref
