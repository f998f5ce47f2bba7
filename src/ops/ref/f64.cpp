// The fp64 forward oracle (f64.h): each op straight from its definition.
#include "ops/ref/f64.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace mmx::ops::ref::f64 {

void linear(const double* x, const double* w, int64_t n, int64_t in, int64_t out, double* y) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[t * in + i] * w[o * in + i];
      y[t * out + o] = acc;
    }
}

void rms_norm(const double* x, const double* w, int64_t n, int64_t d, double eps, double* y, double* rstd) {
  for (int64_t t = 0; t < n; ++t) {
    const double* xr = x + t * d;
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
    if (rstd) rstd[t] = inv;
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = xr[i] * inv * w[i];  // xr[i] read first: y may alias x
  }
}

void rope_neox(double* x, const int32_t* pos, int64_t n, int n_heads, int head_dim, int rotary, double theta,
               bool inverse) {
  const int half = rotary / 2;
  for (int64_t t = 0; t < n; ++t) {
    const double p = pos[t];
    for (int h = 0; h < n_heads; ++h) {
      double* v = x + (t * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        double a = p * std::pow(theta, -2.0 * i / double(rotary));
        if (inverse) a = -a;
        const double x0 = v[i], x1 = v[i + half];
        v[i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
      }
    }
  }
}

void attention(const double* q, const double* k, const double* v, const uint8_t* vis, int64_t n_q, int64_t n_k,
               int n_heads, int n_kv, int hd, double scale, double* out, double* p) {
  const int group = n_heads / n_kv;
  const int64_t off = n_k - n_q;  // causal: query i is at key position off + i
  std::vector<double> e(static_cast<size_t>(n_k));
  for (int64_t i = 0; i < n_q; ++i)
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      auto seen = [&](int64_t j) { return vis ? vis[i * n_k + j] != 0 : j <= off + i; };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n_k; ++j) {
        if (!seen(j)) continue;
        double dot = 0.0;
        for (int c = 0; c < hd; ++c) dot += q[(i * n_heads + h) * hd + c] * k[(j * n_kv + kvh) * hd + c];
        e[size_t(j)] = scale * dot;
        m = std::max(m, e[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n_k; ++j)
        if (seen(j)) sum += (e[size_t(j)] = std::exp(e[size_t(j)] - m));
      for (int c = 0; c < hd; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < n_k; ++j)
          if (seen(j)) acc += e[size_t(j)] * v[(j * n_kv + kvh) * hd + c];
        out[(i * n_heads + h) * hd + c] = acc / sum;
      }
      if (p)
        for (int64_t j = 0; j < n_k; ++j) p[(int64_t(h) * n_q + i) * n_k + j] = seen(j) ? e[size_t(j)] / sum : 0.0;
    }
}

void glu_silu(const double* g, const double* u, int64_t n, double* a) {
  for (int64_t i = 0; i < n; ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
}

void silu(const double* x, int64_t n, double* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0 + std::exp(-x[i]));
}

void mul_sigmoid(const double* a, const double* g, int64_t n, double* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] / (1.0 + std::exp(-g[i]));
}

void swiglu_oai(const double* g, const double* u, int64_t n, double alpha, double limit, double* a) {
  for (int64_t i = 0; i < n; ++i) {
    const double gc = std::min(g[i], limit);
    const double uc = std::min(std::max(u[i], -limit), limit);
    a[i] = (uc + 1.0) * gc / (1.0 + std::exp(-alpha * gc));
  }
}

namespace {

// ids, w of one row from its probabilities p [E] and selection scores [E]: stable sort by score
// descending (lower id first on ties), the first k, w = p / Σ p over them.
void top_k(const double* p, const std::vector<double>& score, int n_experts, int k, int32_t* ids, double* w) {
  std::vector<int32_t> order(static_cast<size_t>(n_experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[size_t(a)] > score[size_t(b)]; });
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += p[order[size_t(j)]];
  for (int j = 0; j < k; ++j) {
    ids[j] = order[size_t(j)];
    w[j] = p[order[size_t(j)]] / sum;
  }
}

}  // namespace

void route_sigmoid(const double* logits, const double* bias, int64_t n, int n_experts, int k, int32_t* ids,
                   double* w, double* p) {
  std::vector<double> pr(static_cast<size_t>(n_experts)), score(pr.size());
  for (int64_t t = 0; t < n; ++t) {
    for (int e = 0; e < n_experts; ++e) {
      pr[size_t(e)] = 1.0 / (1.0 + std::exp(-logits[t * n_experts + e]));
      score[size_t(e)] = pr[size_t(e)] + (bias ? bias[e] : 0.0);
    }
    top_k(pr.data(), score, n_experts, k, ids + t * k, w + t * k);
    if (p) std::copy(pr.begin(), pr.end(), p + t * n_experts);
  }
}

void route_softmax(const double* logits, int64_t n, int n_experts, int k, int32_t* ids, double* w, double* p) {
  std::vector<double> pr(static_cast<size_t>(n_experts));
  for (int64_t t = 0; t < n; ++t) {
    const double* l = logits + t * n_experts;
    const double mx = *std::max_element(l, l + n_experts);
    double z = 0.0;
    for (int e = 0; e < n_experts; ++e) z += pr[size_t(e)] = std::exp(l[e] - mx);
    for (double& x : pr) x /= z;
    top_k(pr.data(), pr, n_experts, k, ids + t * k, w + t * k);
    if (p) std::copy(pr.begin(), pr.end(), p + t * n_experts);
  }
}

}  // namespace mmx::ops::ref::f64
