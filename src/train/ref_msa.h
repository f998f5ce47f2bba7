// The naive fp64 oracle of the M3 training kernels (train/kernels_msa.h): the same contracts,
// plain loops, no BLAS, no threads. Written from the math and from reference/torch_models.py,
// not from kernels_msa.cpp. The MSA forms here work on one packed sequence with a visibility mask
// (ops::ref's MSA ops are paged and causal): the selection and the KL are defined here, the
// block-sparse attention is the oracle's f64::attention over allowed(g, i); the per-head RMSNorm
// and SwiGLU-OAI forwards are ops/ref/f64.h's (rms_norm over n · n_heads rows, swiglu_oai).
#pragma once

#include <cstdint>

namespace mmx::train::ref {

void rms_norm_heads_bwd(const double* dy, const double* x, const double* w, const double* rstd, int64_t n,
                        int n_heads, int64_t d, double* dx, double* dw);
void swiglu_oai_bwd(const double* da, const double* g, const double* u, int64_t n, double alpha, double limit,
                    double* dg, double* du);
void msa_index_scores(const double* iq, const double* ik, int64_t t, int G, int di, double* z);
void msa_index_scores_bwd(const double* dz, const double* iq, const double* ik, int64_t t, int G, int di,
                          double* diq, double* dik);
// pos: [t] row positions or null (= 0..t−1); a key's MSA block is pos[j] / block (kernels_msa.h).
void msa_select(const double* z, const uint8_t* vis, const int32_t* pos, int64_t t, int G, int block, int K,
                int32_t* sel);
void msa_attention_fwd(const double* q, const double* k, const double* v, const uint8_t* vis, const int32_t* pos,
                       const int32_t* sel, int64_t t, int n_heads, int G, int hd, int block, int K, double scale, double* out,
                       double* p);
void msa_attention_bwd(const double* dout, const double* q, const double* k, const double* v, const double* p,
                       int64_t t, int n_heads, int G, int hd, double scale, double* dq, double* dk, double* dv);
double msa_index_kl(const double* z, const double* p, const uint8_t* vis, const int32_t* pos, const int32_t* sel,
                    const uint8_t* rows,
                    int64_t t, int n_heads, int G, int block, int K, double zscale, double grad_scale, double* dz);

}  // namespace mmx::train::ref
