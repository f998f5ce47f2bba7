// Training kernels (kernels.h), instantiated for float and double. OpenMP over rows, heads or
// columns — never a reduction split over threads, so results are thread-count invariant.
#include "train/kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "ops/ops.h"

namespace mmx::train {

void set_n_threads(int n) {
  const int t = n > 0 ? n : omp_get_num_procs();
  ops::set_n_threads(n);
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

// ---- gemm ----

template <>
void gemm<float>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B,
                 float beta, float* C) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, ta ? int(M) : int(K), B, tb ? int(K) : int(N), beta, C, int(N));
}
template <>
void gemm<double>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, const double* B,
                  double beta, double* C) {
  if (M == 0 || N == 0) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, ta ? int(M) : int(K), B, tb ? int(K) : int(N), beta, C, int(N));
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

template <class T>
void attention_fwd(const T* q, const T* k, const T* v, const uint8_t* vis, int64_t t, int n_heads, int n_kv,
                   int hd, double scale, T* out, T* p) {
  const int group = n_heads / n_kv;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < n_heads; ++h) {
    const int kh = h / group;
    for (int64_t i = 0; i < t; ++i) {
      T* pr = p + (int64_t(h) * t + i) * t;
      const T* qi = q + (i * n_heads + h) * hd;
      T mx = -INFINITY;
      for (int64_t j = 0; j < t; ++j) {
        const bool seen = vis ? vis[i * t + j] != 0 : j <= i;
        if (!seen) {
          pr[j] = -INFINITY;
          continue;
        }
        const T* kj = k + (j * n_kv + kh) * hd;
        T s = 0;
        for (int c = 0; c < hd; ++c) s += qi[c] * kj[c];
        pr[j] = s * T(scale);
        mx = std::max(mx, pr[j]);
      }
      T sum = 0;
      for (int64_t j = 0; j < t; ++j) {
        pr[j] = pr[j] == -INFINITY ? T(0) : std::exp(pr[j] - mx);
        sum += pr[j];
      }
      const T inv = T(1) / sum;
      T* o = out + (i * n_heads + h) * hd;
      std::fill(o, o + hd, T(0));
      for (int64_t j = 0; j < t; ++j) {
        pr[j] *= inv;
        if (pr[j] == T(0)) continue;
        const T* vj = v + (j * n_kv + kh) * hd;
        for (int c = 0; c < hd; ++c) o[c] += pr[j] * vj[c];
      }
    }
  }
}

template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* p, int64_t t, int n_heads,
                   int n_kv, int hd, double scale, T* dq, T* dk, T* dv) {
  const int group = n_heads / n_kv;
  // One thread per KV head: it owns dk/dv of that head and dq of its query heads.
#pragma omp parallel
  {
    std::vector<T> ds(static_cast<size_t>(t));
#pragma omp for schedule(static)
    for (int kh = 0; kh < n_kv; ++kh) {
      for (int h = kh * group; h < (kh + 1) * group; ++h) {
        for (int64_t i = 0; i < t; ++i) {
          const T* pr = p + (int64_t(h) * t + i) * t;
          const T* doi = dout + (i * n_heads + h) * hd;
          // dP_ij = do_i·v_j; dS_ij = P_ij (dP_ij − Σ_j P dP)
          T rowdot = 0;
          for (int64_t j = 0; j < t; ++j) {
            if (pr[j] == T(0)) {
              ds[size_t(j)] = 0;
              continue;
            }
            const T* vj = v + (j * n_kv + kh) * hd;
            T dpij = 0;
            for (int c = 0; c < hd; ++c) dpij += doi[c] * vj[c];
            ds[size_t(j)] = dpij;
            rowdot += pr[j] * dpij;
          }
          const T* qi = q + (i * n_heads + h) * hd;
          T* dqi = dq + (i * n_heads + h) * hd;
          for (int64_t j = 0; j < t; ++j) {
            if (pr[j] == T(0)) continue;
            const T dsij = pr[j] * (ds[size_t(j)] - rowdot) * T(scale);
            const T* kj = k + (j * n_kv + kh) * hd;
            T* dkj = dk + (j * n_kv + kh) * hd;
            T* dvj = dv + (j * n_kv + kh) * hd;
            for (int c = 0; c < hd; ++c) {
              dqi[c] += dsij * kj[c];
              dkj[c] += dsij * qi[c];
              dvj[c] += pr[j] * doi[c];
            }
          }
        }
      }
    }
  }
}

// ---- gated activations ----

template <class T>
void glu_silu_fwd(const T* g, const T* u, int64_t n, T* a) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = g[i] / (T(1) + std::exp(-g[i])) * u[i];
}

template <class T>
void glu_silu_bwd(const T* da, const T* g, const T* u, int64_t n, T* dg, T* du) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T s = T(1) / (T(1) + std::exp(-g[i]));
    du[i] += da[i] * g[i] * s;
    dg[i] += da[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
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

// ---- loss ----

template <class T>
double cross_entropy(const T* logits, const int32_t* targets, int64_t n, int64_t vocab, double grad_scale,
                     T* dlogits) {
  std::vector<double> row_loss(size_t(n), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const T* l = logits + t * vocab;
    T* dl = dlogits ? dlogits + t * vocab : nullptr;
    if (targets[t] < 0) {
      if (dl) std::fill(dl, dl + vocab, T(0));
      continue;
    }
    T mx = l[0];
    for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, l[i]);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(l[i] - mx));
    const double lse = double(mx) + std::log(sum);
    row_loss[size_t(t)] = lse - double(l[targets[t]]);
    if (dl) {
      for (int64_t i = 0; i < vocab; ++i) dl[i] = T(std::exp(double(l[i]) - lse) * grad_scale);
      dl[targets[t]] -= T(grad_scale);
    }
  }
  double total = 0;
  for (double x : row_loss) total += x;
  return total;
}

// ---- instantiations ----

#define MMX_TRAIN_INSTANTIATE(T)                                                                                  \
  template void linear_fwd<T>(const T*, const T*, int64_t, int64_t, int64_t, T*);                                \
  template void linear_bwd<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*, T*);                  \
  template void embedding_fwd<T>(const T*, const int32_t*, int64_t, int64_t, T*);                                \
  template void embedding_bwd<T>(const T*, const int32_t*, int64_t, int64_t, T*);                                \
  template void rms_norm_fwd<T>(const T*, const T*, int64_t, int64_t, double, T*, T*);                           \
  template void rms_norm_bwd<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, T*, T*);               \
  template void rope<T>(T*, const int32_t*, int64_t, int, int, int, double, bool);                               \
  template void attention_fwd<T>(const T*, const T*, const T*, const uint8_t*, int64_t, int, int, int, double, T*, \
                                 T*);                                                                            \
  template void attention_bwd<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int, int, int, double, \
                                 T*, T*, T*);                                                                    \
  template void glu_silu_fwd<T>(const T*, const T*, int64_t, T*);                                                \
  template void glu_silu_bwd<T>(const T*, const T*, const T*, int64_t, T*, T*);                                  \
  template void router_sigmoid_fwd<T>(const T*, const T*, int64_t, int, int, int32_t*, T*, T*);                  \
  template void router_sigmoid_bwd<T>(const T*, const int32_t*, const T*, const T*, int64_t, int, int, T*);      \
  template double cross_entropy<T>(const T*, const int32_t*, int64_t, int64_t, double, T*);

MMX_TRAIN_INSTANTIATE(float)
MMX_TRAIN_INSTANTIATE(double)

}  // namespace mmx::train
