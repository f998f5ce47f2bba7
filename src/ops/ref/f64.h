// The fp64 forward oracle: the reference ops' math on plain row-major double spans, once. Two
// kinds of caller, and nothing else:
//   * ops::ref (src/ops/ref/*.cpp): the F32-Tensor reference ops widen their inputs, call these
//     and round the results (MMX_OPS=ref; tests/ops compares ops::cpu with them);
//   * the training tests (tests/train/*): the training kernels (src/train/kernels*.cpp, float and
//     double) are compared with these; their backward twins live in train/ref*.h.
// A reference never shares code with what it tests: ops::cpu and the training kernels must not
// call this file. Plain loops in the definition's order, no BLAS, no threads, no tricks.
#pragma once

#include <cstdint>

namespace mmx::ops::ref::f64 {

// y[t, o] = Σ_i x[t, i] · w[o, i] (i ascending).  x: [n, in]; w: [out, in]; y: [n, out].
void linear(const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* y);

// y = x · r · w, r = 1 / sqrt(mean(x²) + eps) per row of d.  x, y: [n, d]; w: [d];
// rstd: [n] the r of each row, or null. Per-head norms are rows of head_dim (n · n_heads rows).
void rms_norm(const double* x, const double* w, int64_t n, int64_t d, double eps, double* y, double* rstd);

// Partial NeoX RoPE of the first `rotary` channels of each head, in place; angle
// pos · theta^(−2i/rotary), negated when inverse (the backward of the forward).
//   x: [n, n_heads, head_dim]; pos: [n].
void rope_neox(double* x, const int32_t* pos, int64_t n, int n_heads, int head_dim, int rotary, double theta,
               bool inverse);

// Softmax GQA attention of n_q queries over n_k keys; query head h reads KV head h / (n_heads / n_kv).
//   q, out: [n_q, n_heads, hd]; k, v: [n_k, n_kv, hd];
//   vis: [n_q, n_k] uint8 (1 = query i sees key j; each query must see one key at least), or
//        null: causal with the queries last, query i sees keys j <= n_k − n_q + i;
//   p: [n_heads, n_q, n_k] the probabilities (0 where invisible), or null.
// s_j = scale · q·k_j; out = Σ_j e_j v_j / Σ_j e_j with e_j = exp(s_j − max s) over visible j.
void attention(const double* q, const double* k, const double* v, const uint8_t* vis, int64_t n_q, int64_t n_k,
               int n_heads, int n_kv, int hd, double scale, double* out, double* p);

// Elementwise over n: a = silu(g) · u = g / (1 + e^−g) · u;  y = x / (1 + e^−x);  y = a / (1 + e^−g).
void glu_silu(const double* g, const double* u, int64_t n, double* a);
void silu(const double* x, int64_t n, double* y);
void mul_sigmoid(const double* a, const double* g, int64_t n, double* y);
// SwiGLU-OAI (spec §5.7): a = (u' + 1) · g' / (1 + e^(−alpha·g')), g' = min(g, limit),
// u' = clamp(u, −limit, limit).
void swiglu_oai(const double* g, const double* u, int64_t n, double alpha, double limit, double* a);

// Sigmoid router (M2/M3): p = sigmoid(logits); ids = top-k of p + bias by a stable sort (ties:
// lower id first); w = p_sel / Σ p_sel (the bias never enters the weights).
//   logits, p: [n, E] (p may be null); bias: [E] or null; ids, w: [n, k].
void route_sigmoid(const double* logits, const double* bias, int64_t n, int n_experts, int k, int32_t* ids,
                   double* w, double* p);
// Softmax router (Text-01 / M1): p = softmax(logits) over all experts; ids = top-k of p (stable
// sort, ties: lower id); w = p_sel / Σ p_sel.  Shapes as route_sigmoid.
void route_softmax(const double* logits, int64_t n, int n_experts, int k, int32_t* ids, double* w, double* p);

}  // namespace mmx::ops::ref::f64
