// Naive fp64 Text-01 training kernels (ref_lightning.h), written from the math.
#include "train/ref_lightning.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mmx::train::ref {

namespace {
double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// element c of q (w = 0), k (1) or v (2) of token i, head h
double at(const double* qkv, int n_heads, int hd, int64_t i, int h, int w, int c) {
  return qkv[((i * n_heads + h) * 3 + w) * hd + c];
}
double dec(const double* slopes, const int32_t* pos, const uint8_t* vis, int64_t t, int h, int64_t i, int64_t j) {
  const bool seen = vis ? vis[i * t + j] != 0 : j <= i;
  return seen ? std::exp(-slopes[h] * double(std::max(0, pos[i] - pos[j]))) : 0.0;
}
}  // namespace

// o_i = Σ_j dec_ij (q_i·k_j) v_j
void lightning_fwd(const double* qkv, const double* slopes, const int32_t* pos, const uint8_t* vis, int64_t t,
                   int n_heads, int hd, double* out, double* a) {
  for (int h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        double s = 0;
        for (int c = 0; c < hd; ++c) s += at(qkv, n_heads, hd, i, h, 0, c) * at(qkv, n_heads, hd, j, h, 1, c);
        a[(int64_t(h) * t + i) * t + j] = s * dec(slopes, pos, vis, t, h, i, j);
      }
      for (int c = 0; c < hd; ++c) {
        double o = 0;
        for (int64_t j = 0; j < t; ++j) o += a[(int64_t(h) * t + i) * t + j] * at(qkv, n_heads, hd, j, h, 2, c);
        out[(i * n_heads + h) * hd + c] = o;
      }
    }
}

// ∂o_i/∂q_i: Σ_j dec_ij k_j v_jᵀ;  ∂o_i/∂k_j: dec_ij q_i v_jᵀ;  ∂o_i/∂v_j: dec_ij (q_i·k_j)
void lightning_bwd(const double* dout, const double* qkv, const double* slopes, const int32_t* pos,
                   const uint8_t* vis, const double* a, int64_t t, int n_heads, int hd, double* dqkv) {
  for (int h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) {
        const double d = dec(slopes, pos, vis, t, h, i, j);
        if (d == 0) continue;
        double dov = 0;  // do_i · v_j
        for (int c = 0; c < hd; ++c) dov += dout[(i * n_heads + h) * hd + c] * at(qkv, n_heads, hd, j, h, 2, c);
        for (int c = 0; c < hd; ++c) {
          dqkv[((i * n_heads + h) * 3 + 0) * hd + c] += d * dov * at(qkv, n_heads, hd, j, h, 1, c);
          dqkv[((j * n_heads + h) * 3 + 1) * hd + c] += d * dov * at(qkv, n_heads, hd, i, h, 0, c);
          dqkv[((j * n_heads + h) * 3 + 2) * hd + c] += a[(int64_t(h) * t + i) * t + j] * dout[(i * n_heads + h) * hd + c];
        }
      }
}

// d(xσ(x))/dx = σ + xσ(1 − σ)
void silu_bwd(const double* dy, const double* x, int64_t n, double* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * (sig(x[i]) + x[i] * sig(x[i]) * (1 - sig(x[i])));
}

void mul_sigmoid_bwd(const double* dy, const double* a, const double* g, int64_t n, double* da, double* dg) {
  for (int64_t i = 0; i < n; ++i) {
    da[i] += dy[i] * sig(g[i]);
    dg[i] += dy[i] * a[i] * sig(g[i]) * (1 - sig(g[i]));
  }
}

// w_j = p_j / S (selected); p = softmax(l): ∂p_e/∂l_f = p_e (δ_ef − p_f)
void router_softmax_bwd(const double* dw, const int32_t* ids, const double* w, const double* p, int64_t n,
                        int n_experts, int k, double* dlogits) {
  for (int64_t t = 0; t < n; ++t) {
    double S = 0;
    for (int j = 0; j < k; ++j) S += p[t * n_experts + ids[t * k + j]];
    std::vector<double> dp(size_t(n_experts), 0.0);
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) dp[size_t(ids[t * k + i])] += dw[t * k + j] * ((i == j ? 1.0 : 0.0) - w[t * k + j]) / S;
    for (int f = 0; f < n_experts; ++f)
      for (int e = 0; e < n_experts; ++e)
        dlogits[t * n_experts + f] += dp[size_t(e)] * p[t * n_experts + e] * ((e == f ? 1.0 : 0.0) - p[t * n_experts + f]);
  }
}

}  // namespace mmx::train::ref
