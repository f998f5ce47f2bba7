// Text-01 / M1 training kernels (kernels_lightning.h), float and double.
#include "train/kernels_lightning.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace mmx::train {

namespace {

void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, A, int(lda), B, int(ldb), beta, C, int(ldc));
}
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// a[i, j] *= decay_ij = λ^(p_i − p_j) (0 where invisible), with λ^d from a table over the
// sequence's position range (t² libm exps per head were most of a Text-01 step).
template <class T>
void apply_decay(T* a, double s, const int32_t* pos, SeqVis vis, int64_t t) {
  int32_t lo = pos[0], hi = pos[0];
  for (int64_t i = 1; i < t; ++i) lo = std::min(lo, pos[i]), hi = std::max(hi, pos[i]);
  std::vector<T> pw(static_cast<size_t>(hi - lo) + 1);
  for (size_t d = 0; d < pw.size(); ++d) pw[d] = T(std::exp(-s * double(d)));
  std::vector<uint8_t> rowbuf(vis.needs_row_buffer() ? size_t(t) : 0);
  for (int64_t i = 0; i < t; ++i) {
    const uint8_t* vr = vis.row(i, t, rowbuf.data());
    for (int64_t j = 0; j < t; ++j) {
      const bool seen = vr ? vr[j] != 0 : j <= i;
      a[i * t + j] = seen ? a[i * t + j] * pw[size_t(std::max(0, pos[i] - pos[j]))] : T(0);
    }
  }
}

}  // namespace

template <class T>
void lightning_fwd(const T* qkv, const double* slopes, const int32_t* pos, SeqVis vis, int64_t t,
                   int n_heads, int hd, T* out, T* a) {
  const int64_t rs = int64_t(n_heads) * 3 * hd, os = int64_t(n_heads) * hd;  // row strides
#pragma omp parallel for schedule(static)
  for (int h = 0; h < n_heads; ++h) {
    const T* q = qkv + int64_t(h) * 3 * hd;
    T* ah = a + int64_t(h) * t * t;
    blas(false, true, t, t, hd, q, rs, q + hd, rs, T(0), ah, t);  // q_i · k_j
    apply_decay(ah, slopes[h], pos, vis, t);
    blas(false, false, t, hd, t, ah, t, q + 2 * hd, rs, T(0), out + int64_t(h) * hd, os);  // Σ_j a_ij v_j
  }
}

template <class T>
void lightning_bwd(const T* dout, const T* qkv, const double* slopes, const int32_t* pos, SeqVis vis,
                   const T* a, int64_t t, int n_heads, int hd, T* dqkv) {
  const int64_t rs = int64_t(n_heads) * 3 * hd, os = int64_t(n_heads) * hd;
#pragma omp parallel
  {
    std::vector<T> da(static_cast<size_t>(t * t));
#pragma omp for schedule(static)
    for (int h = 0; h < n_heads; ++h) {
      const T* q = qkv + int64_t(h) * 3 * hd;
      const T* doh = dout + int64_t(h) * hd;
      T* dq = dqkv + int64_t(h) * 3 * hd;
      // dA_ij = (do_i · v_j) · decay_ij;  dq_i += Σ_j dA_ij k_j;  dk_j += Σ_i dA_ij q_i;  dv_j += Σ_i a_ij do_i
      blas(false, true, t, t, hd, doh, os, q + 2 * hd, rs, T(0), da.data(), t);
      apply_decay(da.data(), slopes[h], pos, vis, t);
      blas(false, false, t, hd, t, da.data(), t, q + hd, rs, T(1), dq, rs);
      blas(true, false, t, hd, t, da.data(), t, q, rs, T(1), dq + hd, rs);
      blas(true, false, t, hd, t, a + int64_t(h) * t * t, t, doh, os, T(1), dq + 2 * hd, rs);
    }
  }
}

template <class T>
void silu_fwd(const T* x, int64_t n, T* y) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
}

template <class T>
void silu_bwd(const T* dy, const T* x, int64_t n, T* dx) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T s = sigmoid(x[i]);
    dx[i] += dy[i] * s * (T(1) + x[i] * (T(1) - s));
  }
}

template <class T>
void mul_sigmoid_fwd(const T* a, const T* g, int64_t n, T* y) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * sigmoid(g[i]);
}

template <class T>
void mul_sigmoid_bwd(const T* dy, const T* a, const T* g, int64_t n, T* da, T* dg) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T s = sigmoid(g[i]);
    da[i] += dy[i] * s;
    dg[i] += dy[i] * a[i] * s * (T(1) - s);
  }
}

template <class T>
void router_softmax_fwd(const T* logits, int64_t n, int n_experts, int k, int32_t* ids, T* w, T* p) {
#pragma omp parallel
  {
    std::vector<int> order(static_cast<size_t>(n_experts));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      const T* l = logits + t * n_experts;
      T* pr = p + t * n_experts;
      T mx = l[0], sum = 0;
      for (int e = 1; e < n_experts; ++e) mx = std::max(mx, l[e]);
      for (int e = 0; e < n_experts; ++e) sum += pr[e] = std::exp(l[e] - mx);
      for (int e = 0; e < n_experts; ++e) pr[e] /= sum;
      for (int e = 0; e < n_experts; ++e) order[size_t(e)] = e;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); });
      T sel = 0;
      for (int j = 0; j < k; ++j) sel += pr[order[size_t(j)]];
      for (int j = 0; j < k; ++j) {
        ids[t * k + j] = order[size_t(j)];
        w[t * k + j] = pr[order[size_t(j)]] / sel;
      }
    }
  }
}

template <class T>
void router_softmax_bwd(const T* dw, const int32_t* ids, const T* w, const T* p, int64_t n, int n_experts, int k,
                        T* dlogits) {
#pragma omp parallel
  {
    std::vector<T> dp(static_cast<size_t>(n_experts));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      const T* pr = p + t * n_experts;
      // w_j = p_j / S over the selected: dp_i = (dw_i − Σ_j dw_j w_j) / S (selected i, else 0);
      // softmax: dlogit_e = p_e (dp_e − Σ_f p_f dp_f)
      std::fill(dp.begin(), dp.end(), T(0));
      T sum = 0, dot = 0;
      for (int j = 0; j < k; ++j) {
        sum += pr[ids[t * k + j]];
        dot += dw[t * k + j] * w[t * k + j];
      }
      for (int j = 0; j < k; ++j) dp[size_t(ids[t * k + j])] = (dw[t * k + j] - dot) / sum;
      T pdp = 0;
      for (int e = 0; e < n_experts; ++e) pdp += pr[e] * dp[size_t(e)];
      for (int e = 0; e < n_experts; ++e) dlogits[t * n_experts + e] += pr[e] * (dp[size_t(e)] - pdp);
    }
  }
}

// --- Blockwise through the decayed state (kernels_lightning.h) ----------------------------------
// Per head, λ = e^(−slope), blocks [t0, t0 + n) with local rows r, c; S_b = Σ_{j<t0} λ^(t0−j) k_j v_jᵀ:
//   O_b = (Q_b K_bᵀ ⊙ D) V_b + diag(λ^r) Q_b S_b,    D_rc = λ^(r−c) (c ≤ r), else 0
//   S_{b+1} = λ^n S_b + (diag(λ^(n−c)) K_b)ᵀ V_b
namespace {

template <class T>
struct BlockScratch {
  std::vector<T> pw, a, da, qd, kd, tmp;  // λ^0..λ^B; [B, B] ×2; [B, hd] ×3
  BlockScratch(double slope, int block, int hd)
      : pw(static_cast<size_t>(block) + 1), a(static_cast<size_t>(block) * block), da(a.size()),
        qd(static_cast<size_t>(block) * hd), kd(qd.size()), tmp(qd.size()) {
    for (size_t d = 0; d < pw.size(); ++d) pw[d] = T(std::exp(-slope * double(d)));
  }
  // m[r][c] *= D_rc over an [n, n] block.
  void decay(T* m, int64_t n) const {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < n; ++c) m[r * n + c] = c <= r ? m[r * n + c] * pw[size_t(r - c)] : T(0);
  }
  // dst[r] = λ^(e(r)) · src[r] over n rows of hd (src row stride ld).
  template <class F>
  void scale_rows(const T* src, int64_t ld, int64_t n, int hd, F e, T* dst) const {
    for (int64_t r = 0; r < n; ++r)
      for (int k = 0; k < hd; ++k) dst[r * hd + k] = pw[size_t(e(r))] * src[r * ld + k];
  }
};

}  // namespace

template <class T>
void lightning_block_fwd(const T* qkv, const double* slopes, int64_t t, int n_heads, int hd, int block, T* out,
                         T* states) {
  const int64_t rs = int64_t(n_heads) * 3 * hd, os = int64_t(n_heads) * hd, nb = lightning_n_blocks(t, block);
  const int64_t hh = int64_t(hd) * hd;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < n_heads; ++h) {
    BlockScratch<T> w(slopes[h], block, hd);
    std::vector<T> cur(static_cast<size_t>(hh), T(0));
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t t0 = b * block, n = std::min<int64_t>(block, t - t0);
      const T* q = qkv + t0 * rs + int64_t(h) * 3 * hd;
      const T *k = q + hd, *v = q + 2 * hd;
      T* o = out + t0 * os + int64_t(h) * hd;
      std::copy(cur.begin(), cur.end(), states + (int64_t(h) * nb + b) * hh);
      blas(false, true, n, n, hd, q, rs, k, rs, T(0), w.a.data(), n);
      w.decay(w.a.data(), n);
      blas(false, false, n, hd, n, w.a.data(), n, v, rs, T(0), o, os);
      w.scale_rows(q, rs, n, hd, [](int64_t r) { return r; }, w.qd.data());
      blas(false, false, n, hd, hd, w.qd.data(), hd, cur.data(), hd, T(1), o, os);
      w.scale_rows(k, rs, n, hd, [n](int64_t c) { return n - c; }, w.kd.data());
      for (T& x : cur) x *= w.pw[size_t(n)];
      blas(true, false, hd, hd, n, w.kd.data(), hd, v, rs, T(1), cur.data(), hd);
    }
  }
}

template <class T>
void lightning_block_bwd(const T* dout, const T* qkv, const double* slopes, const T* states, int64_t t, int n_heads,
                         int hd, int block, T* dqkv) {
  const int64_t rs = int64_t(n_heads) * 3 * hd, os = int64_t(n_heads) * hd, nb = lightning_n_blocks(t, block);
  const int64_t hh = int64_t(hd) * hd;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < n_heads; ++h) {
    BlockScratch<T> w(slopes[h], block, hd);
    std::vector<T> ds(static_cast<size_t>(hh), T(0));  // d loss / d S_{b+1}
    for (int64_t b = nb - 1; b >= 0; --b) {
      const int64_t t0 = b * block, n = std::min<int64_t>(block, t - t0);
      const T* q = qkv + t0 * rs + int64_t(h) * 3 * hd;
      const T *k = q + hd, *v = q + 2 * hd, *sb = states + (int64_t(h) * nb + b) * hh;
      const T* dov = dout + t0 * os + int64_t(h) * hd;
      T* dq = dqkv + t0 * rs + int64_t(h) * 3 * hd;
      T *dk = dq + hd, *dv = dq + 2 * hd;
      // Through S_{b+1} = λ^n S_b + Kdᵀ V:  dV += Kd dS;  dK[c] += λ^(n−c) (V dSᵀ)[c]
      w.scale_rows(k, rs, n, hd, [n](int64_t c) { return n - c; }, w.kd.data());
      blas(false, false, n, hd, hd, w.kd.data(), hd, ds.data(), hd, T(1), dv, rs);
      blas(false, true, n, hd, hd, v, rs, ds.data(), hd, T(0), w.tmp.data(), hd);
      for (int64_t c = 0; c < n; ++c)
        for (int x = 0; x < hd; ++x) dk[c * rs + x] += w.pw[size_t(n - c)] * w.tmp[size_t(c * hd + x)];
      // Inter-block O += diag(λ^r) Q S_b:  dQ[r] += λ^r (dO S_bᵀ)[r];  dS_b = λ^n dS + Qdᵀ dO
      blas(false, true, n, hd, hd, dov, os, sb, hd, T(0), w.tmp.data(), hd);
      for (int64_t r = 0; r < n; ++r)
        for (int x = 0; x < hd; ++x) dq[r * rs + x] += w.pw[size_t(r)] * w.tmp[size_t(r * hd + x)];
      w.scale_rows(q, rs, n, hd, [](int64_t r) { return r; }, w.qd.data());
      for (T& x : ds) x *= w.pw[size_t(n)];
      blas(true, false, hd, hd, n, w.qd.data(), hd, dov, os, T(1), ds.data(), hd);
      // Intra-block: A = QKᵀ ⊙ D, dA = dO Vᵀ ⊙ D;  dQ += dA K;  dK += dAᵀ Q;  dV += Aᵀ dO
      blas(false, true, n, n, hd, q, rs, k, rs, T(0), w.a.data(), n);
      w.decay(w.a.data(), n);
      blas(false, true, n, n, hd, dov, os, v, rs, T(0), w.da.data(), n);
      w.decay(w.da.data(), n);
      blas(false, false, n, hd, n, w.da.data(), n, k, rs, T(1), dq, rs);
      blas(true, false, n, hd, n, w.da.data(), n, q, rs, T(1), dk, rs);
      blas(true, false, n, hd, n, w.a.data(), n, dov, os, T(1), dv, rs);
    }
  }
}

#define MMX_LIGHTNING_INSTANTIATE(T)                                                                             \
  template void lightning_fwd<T>(const T*, const double*, const int32_t*, SeqVis, int64_t, int, int, T*, \
                                 T*);                                                                           \
  template void lightning_bwd<T>(const T*, const T*, const double*, const int32_t*, SeqVis, const T*,    \
                                 int64_t, int, int, T*);                                                        \
  template void lightning_block_fwd<T>(const T*, const double*, int64_t, int, int, int, T*, T*);               \
  template void lightning_block_bwd<T>(const T*, const T*, const double*, const T*, int64_t, int, int, int, T*); \
  template void silu_fwd<T>(const T*, int64_t, T*);                                                             \
  template void silu_bwd<T>(const T*, const T*, int64_t, T*);                                                   \
  template void mul_sigmoid_fwd<T>(const T*, const T*, int64_t, T*);                                            \
  template void mul_sigmoid_bwd<T>(const T*, const T*, const T*, int64_t, T*, T*);                              \
  template void router_softmax_fwd<T>(const T*, int64_t, int, int, int32_t*, T*, T*);                           \
  template void router_softmax_bwd<T>(const T*, const int32_t*, const T*, const T*, int64_t, int, int, T*);

MMX_LIGHTNING_INSTANTIATE(float)
MMX_LIGHTNING_INSTANTIATE(double)

}  // namespace mmx::train
