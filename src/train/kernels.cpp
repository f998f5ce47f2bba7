// Training kernels (kernels.h), instantiated for float and double. OpenMP over rows, heads or
// columns — never a reduction split over threads, so results are thread-count invariant.
#include "train/kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "ops/ops.h"
#include "train/blas.h"

namespace mmx::train {

void set_n_threads(int n) {
  const int t = n > 0 ? n : omp_get_num_procs();
  ops::set_n_threads(n);
  omp_set_num_threads(t);
  // OpenBLAS runs single-threaded inside our OpenMP regions: its own thread pool and OpenMP's
  // spinning workers fought over the 2 cores (40% of a step in sched_yield, measured with perf).
  openblas_set_num_threads(1);
}

namespace {

std::atomic<double> g_gemm_flops{0.0};
void count(int64_t M, int64_t N, int64_t K) {
  double cur = g_gemm_flops.load(std::memory_order_relaxed);
  const double add = 2.0 * double(M) * double(N) * double(K);
  while (!g_gemm_flops.compare_exchange_weak(cur, cur + add, std::memory_order_relaxed)) {
  }
}

}  // namespace

namespace detail {
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  count(M, N, K);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  count(M, N, K);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}
}  // namespace detail

using detail::blas;

double gemm_flops() { return g_gemm_flops.load(); }
void reset_gemm_flops() { g_gemm_flops.store(0.0); }

// x = exp(x) elementwise (kernels.h): ops::row_exp for float (~2 ulp; libm's exp was 18% of a
// training step), libm for double (the checking path).
void vexp(float* x, int64_t n) { ops::row_exp(x, n); }
void vexp(double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

// ---- gemm ----
// C is cut into fixed blocks of kBlock rows (or columns, whichever dimension is larger), each one
// BLAS call over the full K: the blocking does not depend on the thread count, so neither do the
// bits.
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B, T beta, T* C) {
  if (M == 0 || N == 0) return;
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  constexpr int64_t kBlock = 64;
  if (M * N * std::max<int64_t>(K, 1) < (int64_t(1) << 18) || (M <= kBlock && N <= kBlock)) {
    blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    return;
  }
  if (M >= N) {
    const int64_t nb = (M + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t m0 = b * kBlock, m = std::min(kBlock, M - m0);
      blas(ta, tb, m, N, K, alpha, ta ? A + m0 : A + m0 * K, lda, B, ldb, beta, C + m0 * N, N);
    }
  } else {
    const int64_t nb = (N + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t n0 = b * kBlock, n = std::min(kBlock, N - n0);
      blas(ta, tb, M, n, K, alpha, A, lda, tb ? B + n0 * K : B + n0, ldb, beta, C + n0, N);
    }
  }
}

template <class T>
void linear_fwd(const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* y) {
  gemm<T>(false, true, n, out, in, T(1), x, w, T(0), y);
}

template <class T>
void linear_bwd(const T* dy, const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* dx, T* dw) {
  if (n == 0) return;
  if (dx) gemm<T>(false, false, n, in, out, T(1), dy, w, T(1), dx);
  if (dw) gemm<T>(true, false, out, in, n, T(1), dy, x, T(1), dw);
}

// ---- embedding ----

template <class T>
void embedding_fwd(const T* table, const int32_t* ids, int64_t n, int64_t d, T* out) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) std::memcpy(out + t * d, table + int64_t(ids[t]) * d, sizeof(T) * size_t(d));
}

template <class T>
void embedding_bwd(const T* dout, const int32_t* ids, int64_t n, int64_t d, T* dtable) {
  // Columns split over threads; every column sums its tokens in order.
  constexpr int64_t kCols = 16;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < d; c0 += kCols) {
    const int64_t c1 = std::min(d, c0 + kCols);
    for (int64_t t = 0; t < n; ++t) {
      T* dst = dtable + int64_t(ids[t]) * d;
      const T* src = dout + t * d;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

// ---- RMSNorm ----

template <class T>
void rms_norm_fwd(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y, T* rstd) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const T* xr = x + t * d;
    T ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    const T r = T(1) / std::sqrt(ss / T(d) + T(eps));
    rstd[t] = r;
    T* yr = y + t * d;
    for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * r * w[i];
  }
}

template <class T>
void rms_norm_bwd(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int64_t d, T* dx, T* dw) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const T *xr = x + t * d, *dyr = dy + t * d;
    const T r = rstd[t];
    T dot = 0;  // Σ dy·w·x
    for (int64_t i = 0; i < d; ++i) dot += dyr[i] * w[i] * xr[i];
    const T c = dot * r * r * r / T(d);
    T* dxr = dx + t * d;
    for (int64_t i = 0; i < d; ++i) dxr[i] += r * dyr[i] * w[i] - xr[i] * c;
  }
  if (!dw) return;
  constexpr int64_t kCols = 16;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < d; c0 += kCols) {
    const int64_t c1 = std::min(d, c0 + kCols);
    for (int64_t t = 0; t < n; ++t) {
      const T r = rstd[t];
      for (int64_t c = c0; c < c1; ++c) dw[c] += dy[t * d + c] * x[t * d + c] * r;
    }
  }
}

// ---- RoPE ----

template <class T>
void rope(T* x, const int32_t* pos, int64_t n, int n_heads, int head_dim, int rotary, double theta, bool inverse) {
  const int half = rotary / 2;
  std::vector<double> inv_freq(static_cast<size_t>(std::max(half, 0)));
  for (int i = 0; i < half; ++i) inv_freq[size_t(i)] = std::pow(theta, -2.0 * i / rotary);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      const double a = double(pos[t]) * inv_freq[size_t(i)];
      const T c = T(std::cos(a)), s = T(inverse ? -std::sin(a) : std::sin(a));
      for (int h = 0; h < n_heads; ++h) {
        T* xh = x + (t * n_heads + h) * head_dim;
        const T x0 = xh[i], x1 = xh[i + half];
        xh[i] = x0 * c - x1 * s;
        xh[i + half] = x1 * c + x0 * s;
      }
    }
  }
}

// ---- attention ----
// Per head: S = scale·Q Kᵀ (one GEMM over all t×t pairs, then the visibility mask), row softmax,
// O = P V. Backward per KV head (it owns dk/dv): dP = dO Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP))·scale,
// dQ += dS K, dK += dSᵀ Q, dV += Pᵀ dO. Invisible pairs have P = 0 exactly, hence dS = 0.

namespace {

// Head h's probabilities into ph [t, t] (0 where invisible): the forward's arithmetic, which the
// recomputing backward repeats bit for bit.
template <class T>
void attention_probs(const T* q, const T* k, SeqVis vis, int64_t t, int n_heads, int n_kv, int hd,
                     double scale, int h, T* ph) {
  const int group = n_heads / n_kv;
  const int64_t qs = int64_t(n_heads) * hd, ks = int64_t(n_kv) * hd;  // row strides
  blas(false, true, t, t, hd, T(scale), q + int64_t(h) * hd, qs, k + int64_t(h / group) * hd, ks, T(0), ph, t);
  std::vector<uint8_t> rowbuf(vis.needs_row_buffer() ? size_t(t) : 0);
  for (int64_t i = 0; i < t; ++i) {
    T* pr = ph + i * t;
    const uint8_t* vr = vis.row(i, t, rowbuf.data());
    T mx = -INFINITY;
    for (int64_t j = 0; j < t; ++j)
      if (vr ? vr[j] != 0 : j <= i) mx = std::max(mx, pr[j]);
    for (int64_t j = 0; j < t; ++j) pr[j] -= mx;
    vexp(pr, t);
    T sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      if (!(vr ? vr[j] != 0 : j <= i)) pr[j] = 0;  // invisible: exactly 0
      sum += pr[j];
    }
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < t; ++j) pr[j] *= inv;
  }
}

// Query head h's share of the backward, from its probabilities ph; ds: [t, t] scratch.
template <class T>
void attention_bwd_head(const T* dout, const T* q, const T* k, const T* v, const T* ph, int64_t t, int n_heads,
                        int n_kv, int hd, double scale, int h, T* ds, T* dq, T* dk, T* dv) {
  const int kh = h / (n_heads / n_kv);
  const int64_t qs = int64_t(n_heads) * hd, ks = int64_t(n_kv) * hd;
  const T *kk = k + int64_t(kh) * hd, *vv = v + int64_t(kh) * hd;
  const T *qh = q + int64_t(h) * hd, *doh = dout + int64_t(h) * hd;
  blas(false, true, t, t, hd, T(1), doh, qs, vv, ks, T(0), ds, t);  // dP
  for (int64_t i = 0; i < t; ++i) {
    const T* pr = ph + i * t;
    T* dr = ds + i * t;
    T rowdot = 0;
    for (int64_t j = 0; j < t; ++j) rowdot += pr[j] * dr[j];
    for (int64_t j = 0; j < t; ++j) dr[j] = pr[j] * (dr[j] - rowdot) * T(scale);
  }
  blas(false, false, t, hd, t, T(1), ds, t, kk, ks, T(1), dq + int64_t(h) * hd, qs);
  blas(true, false, t, hd, t, T(1), ds, t, qh, qs, T(1), dk + int64_t(kh) * hd, ks);
  blas(true, false, t, hd, t, T(1), ph, t, doh, qs, T(1), dv + int64_t(kh) * hd, ks);
}

}  // namespace

template <class T>
void attention_fwd(const T* q, const T* k, const T* v, SeqVis vis, int64_t t, int n_heads, int n_kv,
                   int hd, double scale, T* out, T* p) {
  const int group = n_heads / n_kv;
  const int64_t qs = int64_t(n_heads) * hd, ks = int64_t(n_kv) * hd;
#pragma omp parallel
  {
    std::vector<T> scratch(p ? 0 : static_cast<size_t>(t * t));
#pragma omp for schedule(static)
    for (int h = 0; h < n_heads; ++h) {
      T* ph = p ? p + int64_t(h) * t * t : scratch.data();
      attention_probs(q, k, vis, t, n_heads, n_kv, hd, scale, h, ph);
      blas(false, false, t, hd, t, T(1), ph, t, v + int64_t(h / group) * hd, ks, T(0), out + int64_t(h) * hd, qs);
    }
  }
}

template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* p, int64_t t, int n_heads,
                   int n_kv, int hd, double scale, T* dq, T* dk, T* dv) {
  const int group = n_heads / n_kv;
#pragma omp parallel
  {
    std::vector<T> ds(static_cast<size_t>(t * t));
#pragma omp for schedule(static)
    for (int kh = 0; kh < n_kv; ++kh)  // a KV head's query heads in one thread: it owns dk/dv
      for (int h = kh * group; h < (kh + 1) * group; ++h)
        attention_bwd_head(dout, q, k, v, p + int64_t(h) * t * t, t, n_heads, n_kv, hd, scale, h, ds.data(), dq, dk, dv);
  }
}

template <class T>
void attention_bwd_recompute(const T* dout, const T* q, const T* k, const T* v, SeqVis vis, int64_t t,
                             int n_heads, int n_kv, int hd, double scale, T* dq, T* dk, T* dv) {
  const int group = n_heads / n_kv;
#pragma omp parallel
  {
    std::vector<T> ph(static_cast<size_t>(t * t)), ds(ph.size());
#pragma omp for schedule(static)
    for (int kh = 0; kh < n_kv; ++kh)
      for (int h = kh * group; h < (kh + 1) * group; ++h) {
        attention_probs(q, k, vis, t, n_heads, n_kv, hd, scale, h, ph.data());
        attention_bwd_head(dout, q, k, v, ph.data(), t, n_heads, n_kv, hd, scale, h, ds.data(), dq, dk, dv);
      }
  }
}

// ---- gated activations ----

// σ(g) for a block of g: 1 / (1 + exp(−g)).
template <class T>
void sigmoid_block(const T* g, int64_t n, T* s) {
  for (int64_t i = 0; i < n; ++i) s[i] = -g[i];
  vexp(s, n);
  for (int64_t i = 0; i < n; ++i) s[i] = T(1) / (T(1) + s[i]);
}

template <class T>
void glu_silu_fwd(const T* g, const T* u, int64_t n, T* a) {
  constexpr int64_t kB = 512;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += kB) {
    const int64_t m = std::min(kB, n - b);
    sigmoid_block(g + b, m, a + b);
    for (int64_t i = b; i < b + m; ++i) a[i] = g[i] * a[i] * u[i];
  }
}

template <class T>
void glu_silu_bwd(const T* da, const T* g, const T* u, int64_t n, T* dg, T* du) {
  constexpr int64_t kB = 512;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += kB) {
    const int64_t m = std::min(kB, n - b);
    T s[kB];
    sigmoid_block(g + b, m, s);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t k = b + i;
      du[k] += da[k] * g[k] * s[i];
      dg[k] += da[k] * u[k] * s[i] * (T(1) + g[k] * (T(1) - s[i]));
    }
  }
}

// ---- routers ----

template <class T>
void router_sigmoid_fwd(const T* logits, const T* bias, int64_t n, int n_experts, int k, int32_t* ids, T* w, T* p) {
#pragma omp parallel
  {
    std::vector<int> order(static_cast<size_t>(n_experts));
    std::vector<T> score(static_cast<size_t>(n_experts));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      T* pr = p + t * n_experts;
      for (int e = 0; e < n_experts; ++e) {
        pr[e] = T(1) / (T(1) + std::exp(-logits[t * n_experts + e]));
        score[size_t(e)] = pr[e] + (bias ? bias[e] : T(0));
      }
      for (int e = 0; e < n_experts; ++e) order[size_t(e)] = e;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
      });
      T sum = 0;
      for (int j = 0; j < k; ++j) sum += pr[order[size_t(j)]];
      for (int j = 0; j < k; ++j) {
        ids[t * k + j] = order[size_t(j)];
        w[t * k + j] = pr[order[size_t(j)]] / sum;
      }
    }
  }
}

template <class T>
void router_sigmoid_bwd(const T* dw, const int32_t* ids, const T* w, const T* p, int64_t n, int n_experts, int k,
                        T* dlogits) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    // w_j = p_j / S, S = Σ p_sel:  dp_i = (dw_i − Σ_j dw_j w_j) / S;  dlogit_i = dp_i · p_i (1 − p_i)
    T sum = 0, dot = 0;
    for (int j = 0; j < k; ++j) {
      sum += p[t * n_experts + ids[t * k + j]];
      dot += dw[t * k + j] * w[t * k + j];
    }
    for (int j = 0; j < k; ++j) {
      const int e = ids[t * k + j];
      const T pe = p[t * n_experts + e];
      dlogits[t * n_experts + e] += (dw[t * k + j] - dot) / sum * pe * (T(1) - pe);
    }
  }
}

// ---- instantiations ----

#define MMX_TRAIN_INSTANTIATE(T)                                                                                  \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, const T*, T, T*);                    \
  template void linear_fwd<T>(const T*, const T*, int64_t, int64_t, int64_t, T*);                                \
  template void linear_bwd<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*, T*);                  \
  template void embedding_fwd<T>(const T*, const int32_t*, int64_t, int64_t, T*);                                \
  template void embedding_bwd<T>(const T*, const int32_t*, int64_t, int64_t, T*);                                \
  template void rms_norm_fwd<T>(const T*, const T*, int64_t, int64_t, double, T*, T*);                           \
  template void rms_norm_bwd<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, T*, T*);               \
  template void rope<T>(T*, const int32_t*, int64_t, int, int, int, double, bool);                               \
  template void attention_fwd<T>(const T*, const T*, const T*, SeqVis, int64_t, int, int, int, double, T*, \
                                 T*);                                                                            \
  template void attention_bwd_recompute<T>(const T*, const T*, const T*, const T*, SeqVis, int64_t, int, int, \
                                          int, double, T*, T*, T*);                                                \
  template void attention_bwd<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int, int, int, double, \
                                 T*, T*, T*);                                                                    \
  template void glu_silu_fwd<T>(const T*, const T*, int64_t, T*);                                                \
  template void glu_silu_bwd<T>(const T*, const T*, const T*, int64_t, T*, T*);                                  \
  template void router_sigmoid_fwd<T>(const T*, const T*, int64_t, int, int, int32_t*, T*, T*);                  \
  template void router_sigmoid_bwd<T>(const T*, const int32_t*, const T*, const T*, int64_t, int, int, T*);

MMX_TRAIN_INSTANTIATE(float)
MMX_TRAIN_INSTANTIATE(double)

}  // namespace mmx::train
