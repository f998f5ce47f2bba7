// The naive fp64 oracle of every training kernel (kernels.h): the same contracts, written for
// obviousness — plain loops, no BLAS, no threads, no saved-state shortcuts. Tests compare the
// float and double kernels with these over a shape grid, and check these backward functions
// against central finite differences of these forward functions.
#pragma once

#include <cstdint>

namespace mmx::train::ref {

void linear_fwd(const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* y);
void linear_bwd(const double* dy, const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* dx,
                double* dw);
void embedding_fwd(const double* table, const int32_t* ids, int64_t n, int64_t d, double* out);
void embedding_bwd(const double* dout, const int32_t* ids, int64_t n, int64_t d, double* dtable);
void rms_norm_fwd(const double* x, const double* w, int64_t n, int64_t d, double eps, double* y, double* rstd);
void rms_norm_bwd(const double* dy, const double* x, const double* w, const double* rstd, int64_t n, int64_t d,
                  double* dx, double* dw);
void rope(double* x, const int32_t* pos, int64_t n, int n_heads, int head_dim, int rotary, double theta,
          bool inverse);
void attention_fwd(const double* q, const double* k, const double* v, const uint8_t* vis, int64_t t, int n_heads,
                   int n_kv, int hd, double scale, double* out, double* p);
void attention_bwd(const double* dout, const double* q, const double* k, const double* v, const double* p,
                   int64_t t, int n_heads, int n_kv, int hd, double scale, double* dq, double* dk, double* dv);
void glu_silu_fwd(const double* g, const double* u, int64_t n, double* a);
void glu_silu_bwd(const double* da, const double* g, const double* u, int64_t n, double* dg, double* du);
void router_sigmoid_fwd(const double* logits, const double* bias, int64_t n, int n_experts, int k, int32_t* ids,
                        double* w, double* p);
void router_sigmoid_bwd(const double* dw, const int32_t* ids, const double* w, const double* p, int64_t n,
                        int n_experts, int k, double* dlogits);
double cross_entropy(const double* logits, const int32_t* targets, int64_t n, int64_t vocab, double grad_scale,
                     double* dlogits);

}  // namespace mmx::train::ref
