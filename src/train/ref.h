// The naive fp64 backward twins of the training kernels (kernels.h): the same contracts, written
// for obviousness — plain loops, no BLAS, no threads, no saved-state shortcuts. The forward twins
// are the one fp64 forward oracle shared with inference, ops/ref/f64.h (linear, rms_norm,
// rope_neox, attention, glu_silu, route_sigmoid); only what has no inference twin stays here (the
// backward passes, the embedding gather, the loss). Tests compare the float and double kernels
// with both over a shape grid, and check these backward functions against central finite
// differences of the f64 forward functions.
#pragma once

#include <cstdint>

namespace mmx::train::ref {

void linear_bwd(const double* dy, const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* dx,
                double* dw);
void embedding_fwd(const double* table, const int32_t* ids, int64_t n, int64_t d, double* out);
void embedding_bwd(const double* dout, const int32_t* ids, int64_t n, int64_t d, double* dtable);
void rms_norm_bwd(const double* dy, const double* x, const double* w, const double* rstd, int64_t n, int64_t d,
                  double* dx, double* dw);
void attention_bwd(const double* dout, const double* q, const double* k, const double* v, const double* p,
                   int64_t t, int n_heads, int n_kv, int hd, double scale, double* dq, double* dk, double* dv);
void glu_silu_bwd(const double* da, const double* g, const double* u, int64_t n, double* dg, double* du);
void router_sigmoid_bwd(const double* dw, const int32_t* ids, const double* w, const double* p, int64_t n,
                        int n_experts, int k, double* dlogits);
double cross_entropy(const double* logits, const int32_t* targets, int64_t n, int64_t vocab, double grad_scale,
                     double* dlogits);

}  // namespace mmx::train::ref
