// Naive fp64 training kernels (ref.h). Written from the math, not from kernels.cpp: backward
// passes are derived in the comments, loops are the definitions.
#include "train/ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mmx::train::ref {

// y_to = Σ_i x_ti w_oi  =>  dx_ti = Σ_o dy_to w_oi;  dw_oi = Σ_t dy_to x_ti
void linear_bwd(const double* dy, const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* dx,
                double* dw) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        if (dx) dx[t * in + i] += dy[t * out + o] * w[o * in + i];
        if (dw) dw[o * in + i] += dy[t * out + o] * x[t * in + i];
      }
}

void embedding_fwd(const double* table, const int32_t* ids, int64_t n, int64_t d, double* out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c) out[t * d + c] = table[int64_t(ids[t]) * d + c];
}

void embedding_bwd(const double* dout, const int32_t* ids, int64_t n, int64_t d, double* dtable) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c) dtable[int64_t(ids[t]) * d + c] += dout[t * d + c];
}

// y_i = x_i r w_i, r = (Σx²/d + eps)^(-1/2), dr/dx_j = −r³ x_j / d
//   dx_j = Σ_i dy_i w_i (δ_ij r + x_i dr/dx_j) = dy_j w_j r − x_j r³/d Σ_i dy_i w_i x_i
void rms_norm_bwd(const double* dy, const double* x, const double* w, const double* rstd, int64_t n, int64_t d,
                  double* dx, double* dw) {
  for (int64_t t = 0; t < n; ++t) {
    const double r = rstd[t];
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += dy[t * d + i] * w[i] * x[t * d + i];
    for (int64_t j = 0; j < d; ++j) {
      dx[t * d + j] += dy[t * d + j] * w[j] * r - x[t * d + j] * r * r * r / double(d) * dot;
      if (dw) dw[j] += dy[t * d + j] * x[t * d + j] * r;
    }
  }
}

// o_i = Σ_j P_ij v_j, P_i = softmax(s_i), s_ij = scale q_i·k_j:
//   dv_j += Σ_i P_ij do_i;  dP_ij = do_i·v_j;  ds_ij = P_ij (dP_ij − Σ_l P_il dP_il)
//   dq_i += scale Σ_j ds_ij k_j;  dk_j += scale Σ_i ds_ij q_i
void attention_bwd(const double* dout, const double* q, const double* k, const double* v, const double* p,
                   int64_t t, int n_heads, int n_kv, int hd, double scale, double* dq, double* dk, double* dv) {
  const int group = n_heads / n_kv;
  std::vector<double> dp(static_cast<size_t>(t));
  for (int h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < t; ++i) {
      const double* pr = p + (int64_t(h) * t + i) * t;
      const int64_t kv = h / group;
      double rowdot = 0;
      for (int64_t j = 0; j < t; ++j) {
        dp[size_t(j)] = 0;
        for (int c = 0; c < hd; ++c) dp[size_t(j)] += dout[(i * n_heads + h) * hd + c] * v[(j * n_kv + kv) * hd + c];
        rowdot += pr[j] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < t; ++j) {
        const double ds = pr[j] * (dp[size_t(j)] - rowdot);
        for (int c = 0; c < hd; ++c) {
          dv[(j * n_kv + kv) * hd + c] += pr[j] * dout[(i * n_heads + h) * hd + c];
          dq[(i * n_heads + h) * hd + c] += scale * ds * k[(j * n_kv + kv) * hd + c];
          dk[(j * n_kv + kv) * hd + c] += scale * ds * q[(i * n_heads + h) * hd + c];
        }
      }
    }
}

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// a = g σ(g) u:  du = da g σ(g);  dg = da u (σ(g) + g σ(g)(1 − σ(g)))
void glu_silu_bwd(const double* da, const double* g, const double* u, int64_t n, double* dg, double* du) {
  for (int64_t i = 0; i < n; ++i) {
    const double s = sigmoid(g[i]);
    du[i] += da[i] * g[i] * s;
    dg[i] += da[i] * u[i] * (s + g[i] * s * (1 - s));
  }
}

// w_j = p_j / S:  ∂w_j/∂p_i = (δ_ij − w_j) / S  (i, j selected);  ∂p/∂logit = p (1 − p)
void router_sigmoid_bwd(const double* dw, const int32_t* ids, const double* w, const double* p, int64_t n,
                        int n_experts, int k, double* dlogits) {
  for (int64_t t = 0; t < n; ++t) {
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += p[t * n_experts + ids[t * k + j]];
    for (int i = 0; i < k; ++i) {
      double dp = 0;
      for (int j = 0; j < k; ++j) dp += dw[t * k + j] * ((i == j ? 1.0 : 0.0) - w[t * k + j]) / sum;
      const double pi = p[t * n_experts + ids[t * k + i]];
      dlogits[t * n_experts + ids[t * k + i]] += dp * pi * (1 - pi);
    }
  }
}

double cross_entropy(const double* logits, const int32_t* targets, int64_t n, int64_t vocab, double grad_scale,
                     double* dlogits) {
  double total = 0;
  for (int64_t t = 0; t < n; ++t) {
    const double* l = logits + t * vocab;
    if (targets[t] < 0) {
      if (dlogits)
        for (int64_t i = 0; i < vocab; ++i) dlogits[t * vocab + i] = 0;
      continue;
    }
    double mx = l[0], sum = 0;
    for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, l[i]);
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(l[i] - mx);
    total += mx + std::log(sum) - l[targets[t]];
    if (dlogits)
      for (int64_t i = 0; i < vocab; ++i)
        dlogits[t * vocab + i] = (std::exp(l[i] - mx) / sum - (i == targets[t] ? 1.0 : 0.0)) * grad_scale;
  }
  return total;
}

}  // namespace mmx::train::ref
