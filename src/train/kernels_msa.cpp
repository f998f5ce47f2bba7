// M3 training kernels (kernels_msa.h), instantiated for float and double. OpenMP over rows or
// (group, row) pairs, never a reduction split over threads: thread-count invariant.
//
// The block-sparse attention is evaluated as dense masked attention (train/kernels.h
// attention_fwd) per GQA group with the group's allowed(g, i) mask: at training lengths of a few
// hundred tokens the t×t form is cheap, and the probabilities it saves (exactly 0 outside the
// selection) make the backward the ordinary attention_bwd.
#include "train/kernels_msa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "train/kernels.h"

namespace mmx::train {

// ---- per-head RMSNorm: the row-wise kernel over n · n_heads rows of d ----

template <class T>
void rms_norm_heads_fwd(const T* x, const T* w, int64_t n, int n_heads, int64_t d, double eps, T* y, T* rstd) {
  rms_norm_fwd<T>(x, w, n * n_heads, d, eps, y, rstd);
}

template <class T>
void rms_norm_heads_bwd(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int n_heads, int64_t d, T* dx,
                        T* dw) {
  rms_norm_bwd<T>(dy, x, w, rstd, n * n_heads, d, dx, dw);
}

// ---- SwiGLU-OAI ----

template <class T>
void swiglu_oai_fwd(const T* g, const T* u, int64_t n, double alpha, double limit, T* a) {
  const T al = T(alpha), lim = T(limit);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T gc = std::min(g[i], lim), uc = std::min(std::max(u[i], -lim), lim);
    const T s = T(1) / (T(1) + std::exp(-al * gc));
    a[i] = (uc + T(1)) * gc * s;
  }
}

// a = (u'+1)·g'·σ(αg'):  ∂a/∂g' = (u'+1)·σ·(1 + αg'(1 − σ));  ∂a/∂u' = g'σ
template <class T>
void swiglu_oai_bwd(const T* da, const T* g, const T* u, int64_t n, double alpha, double limit, T* dg, T* du) {
  const T al = T(alpha), lim = T(limit);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T gc = std::min(g[i], lim), uc = std::min(std::max(u[i], -lim), lim);
    const T s = T(1) / (T(1) + std::exp(-al * gc));
    if (g[i] <= lim) dg[i] += da[i] * (uc + T(1)) * s * (T(1) + al * gc * (T(1) - s));
    if (u[i] >= -lim && u[i] <= lim) du[i] += da[i] * gc * s;
  }
}

// ---- index scores ----

template <class T>
void msa_index_scores(const T* iq, const T* ik, int64_t t, int G, int di, T* z) {
#pragma omp parallel for schedule(static) collapse(2)
  for (int g = 0; g < G; ++g)
    for (int64_t i = 0; i < t; ++i) {
      const T* q = iq + (i * G + g) * di;
      T* zr = z + (int64_t(g) * t + i) * t;
      for (int64_t j = 0; j < t; ++j) {
        const T* kk = ik + j * di;
        T s = 0;
        for (int c = 0; c < di; ++c) s += q[c] * kk[c];
        zr[j] = s;
      }
    }
}

template <class T>
void msa_index_scores_bwd(const T* dz, const T* iq, const T* ik, int64_t t, int G, int di, T* diq, T* dik) {
  // diq: one (i, g) row per iteration, keys in order.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < t; ++i)
    for (int g = 0; g < G; ++g) {
      const T* dr = dz + (int64_t(g) * t + i) * t;
      T* dq = diq + (i * G + g) * di;
      for (int64_t j = 0; j < t; ++j) {
        const T w = dr[j];
        if (w == T(0)) continue;
        const T* kk = ik + j * di;
        for (int c = 0; c < di; ++c) dq[c] += w * kk[c];
      }
    }
  // dik: one key row per iteration, (g, i) in order.
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < t; ++j) {
    T* dk = dik + j * di;
    for (int g = 0; g < G; ++g)
      for (int64_t i = 0; i < t; ++i) {
        const T w = dz[(int64_t(g) * t + i) * t + j];
        if (w == T(0)) continue;
        const T* q = iq + (i * G + g) * di;
        for (int c = 0; c < di; ++c) dk[c] += w * q[c];
      }
  }
}

// ---- selection ----

namespace {
// Key j of query row i (from SeqVis::row: null = causal).
inline bool visible(const uint8_t* vr, int64_t i, int64_t j) { return vr ? vr[j] != 0 : j <= i; }
// The MSA block of row j: its position / B (pos null: the row index is the position).
inline int64_t key_block(const int32_t* pos, int64_t j, int block) { return (pos ? pos[j] : j) / block; }
}  // namespace

int64_t msa_n_blocks(const int32_t* pos, int64_t t, int block) {
  if (!pos) return (t + block - 1) / block;
  int64_t mx = 0;
  for (int64_t j = 0; j < t; ++j) mx = std::max<int64_t>(mx, pos[j]);
  return mx / block + 1;
}

template <class T>
void msa_select(const T* z, SeqVis vis, const int32_t* pos, int64_t t, int G, int block, int K, int32_t* sel) {
  const int64_t nb = msa_n_blocks(pos, t, block);
#pragma omp parallel
  {
    std::vector<double> S(static_cast<size_t>(nb));
    std::vector<int32_t> cand;
    std::vector<uint8_t> rowbuf(vis.needs_row_buffer() ? size_t(t) : 0);
#pragma omp for schedule(static) collapse(2)
    for (int g = 0; g < G; ++g)
      for (int64_t i = 0; i < t; ++i) {
        const uint8_t* vr = vis.row(i, t, rowbuf.data());
        const T* zr = z + (int64_t(g) * t + i) * t;
        const int64_t local = key_block(pos, i, block);
        std::fill(S.begin(), S.begin() + local, -std::numeric_limits<double>::infinity());
        for (int64_t j = 0; j < t; ++j) {
          if (!visible(vr, i, j)) continue;
          const int64_t b = key_block(pos, j, block);
          if (b < local) S[size_t(b)] = std::max(S[size_t(b)], double(zr[j]));
        }
        cand.clear();
        for (int64_t b = 0; b < local; ++b)
          if (std::isfinite(S[size_t(b)])) cand.push_back(int32_t(b));
        const size_t keep = std::min(cand.size(), size_t(std::max(K - 1, 0)));
        std::partial_sort(cand.begin(), cand.begin() + keep, cand.end(), [&](int32_t a, int32_t b) {
          return S[size_t(a)] > S[size_t(b)] || (S[size_t(a)] == S[size_t(b)] && a < b);
        });
        int32_t* out = sel + (int64_t(g) * t + i) * K;
        size_t n = 0;
        for (; n < keep; ++n) out[n] = cand[n];
        out[n++] = int32_t(local);
        for (; n < size_t(K); ++n) out[n] = -1;
      }
  }
}

void msa_allowed(SeqVis vis, const int32_t* pos, const int32_t* sel, int64_t t, int G, int block, int K,
                 uint8_t* allowed) {
  const int64_t nb = msa_n_blocks(pos, t, block);
#pragma omp parallel
  {
    std::vector<uint8_t> on(static_cast<size_t>(nb));
    std::vector<uint8_t> rowbuf(vis.needs_row_buffer() ? size_t(t) : 0);
#pragma omp for schedule(static) collapse(2)
    for (int g = 0; g < G; ++g)
      for (int64_t i = 0; i < t; ++i) {
        const uint8_t* vr = vis.row(i, t, rowbuf.data());
        std::fill(on.begin(), on.end(), uint8_t(0));
        const int32_t* s = sel + (int64_t(g) * t + i) * K;
        for (int a = 0; a < K && s[a] >= 0; ++a) on[size_t(s[a])] = 1;
        uint8_t* ar = allowed + (int64_t(g) * t + i) * t;
        for (int64_t j = 0; j < t; ++j) ar[j] = uint8_t(visible(vr, i, j) && on[size_t(key_block(pos, j, block))]);
      }
  }
}

// ---- block-sparse attention ----

template <class T>
void msa_attention_fwd(const T* q, const T* k, const T* v, SeqVis vis, const int32_t* pos, const int32_t* sel,
                       int64_t t, int n_heads, int G, int hd, int block, int K, double scale, T* out, T* p) {
  const int grp = n_heads / G;
  std::vector<uint8_t> allowed(static_cast<size_t>(G * t * t));
  msa_allowed(vis, pos, sel, t, G, block, K, allowed.data());
  // One group at a time: its heads, K and V packed contiguous, then dense masked attention.
  std::vector<T> qg(static_cast<size_t>(t * grp * hd)), kg(static_cast<size_t>(t * hd)), vg(kg.size()),
      og(qg.size());
  for (int g = 0; g < G; ++g) {
    for (int64_t i = 0; i < t; ++i) {
      std::memcpy(qg.data() + i * grp * hd, q + (i * n_heads + int64_t(g) * grp) * hd, sizeof(T) * size_t(grp * hd));
      std::memcpy(kg.data() + i * hd, k + (i * G + g) * hd, sizeof(T) * size_t(hd));
      std::memcpy(vg.data() + i * hd, v + (i * G + g) * hd, sizeof(T) * size_t(hd));
    }
    attention_fwd<T>(qg.data(), kg.data(), vg.data(), allowed.data() + int64_t(g) * t * t, t, grp, 1, hd, scale,
                     og.data(), p + int64_t(g) * grp * t * t);
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(out + (i * n_heads + int64_t(g) * grp) * hd, og.data() + i * grp * hd, sizeof(T) * size_t(grp * hd));
  }
}

template <class T>
void msa_attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* p, int64_t t, int n_heads,
                       int G, int hd, double scale, T* dq, T* dk, T* dv) {
  attention_bwd<T>(dout, q, k, v, p, t, n_heads, G, hd, scale, dq, dk, dv);
}

// ---- indexer KL ----
// With l_j = zscale·z_j over allowed j, s = softmax(l), Σ teacher = 1:
//   KL = Σ t_j log t_j − Σ t_j l_j + logsumexp(l);  ∂KL/∂l_j = s_j − t_j.

template <class T>
double msa_index_kl(const T* z, const T* p, SeqVis vis, const int32_t* pos, const int32_t* sel, const uint8_t* rows,
                    int64_t t, int n_heads, int G, int block, int K, double zscale, double grad_scale, T* dz) {
  const int grp = n_heads / G;
  std::vector<uint8_t> allowed(static_cast<size_t>(G * t * t));
  msa_allowed(vis, pos, sel, t, G, block, K, allowed.data());
  std::vector<double> row_kl(static_cast<size_t>(G * t), 0.0);
#pragma omp parallel
  {
    std::vector<double> tch(static_cast<size_t>(t)), ls(static_cast<size_t>(t));
#pragma omp for schedule(static) collapse(2)
    for (int g = 0; g < G; ++g)
      for (int64_t i = 0; i < t; ++i) {
        if (rows && !rows[i]) continue;
        const uint8_t* ar = allowed.data() + (int64_t(g) * t + i) * t;
        const T* zr = z + (int64_t(g) * t + i) * t;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < t; ++j)
          if (ar[j]) mx = std::max(mx, zscale * double(zr[j]));
        double sum = 0;
        for (int64_t j = 0; j < t; ++j)
          if (ar[j]) sum += std::exp(zscale * double(zr[j]) - mx);
        const double lse = mx + std::log(sum);
        double kl = 0;
        for (int64_t j = 0; j < t; ++j) {
          if (!ar[j]) continue;
          double tj = 0;
          for (int r = 0; r < grp; ++r) tj += double(p[(int64_t(g * grp + r) * t + i) * t + j]);
          tj /= double(grp);
          tch[size_t(j)] = tj;
          ls[size_t(j)] = zscale * double(zr[j]) - lse;
          if (tj > 0) kl += tj * (std::log(tj) - ls[size_t(j)]);
        }
        row_kl[size_t(g * t + i)] = kl;
        if (!dz) continue;
        T* dr = dz + (int64_t(g) * t + i) * t;
        for (int64_t j = 0; j < t; ++j)
          if (ar[j]) dr[j] += T(grad_scale * zscale * (std::exp(ls[size_t(j)]) - tch[size_t(j)]));
      }
  }
  double total = 0;
  for (double x : row_kl) total += x;
  return total;
}

// ---- instantiations ----

#define MMX_TRAIN_MSA_INSTANTIATE(T)                                                                              \
  template void rms_norm_heads_fwd<T>(const T*, const T*, int64_t, int, int64_t, double, T*, T*);               \
  template void rms_norm_heads_bwd<T>(const T*, const T*, const T*, const T*, int64_t, int, int64_t, T*, T*);   \
  template void swiglu_oai_fwd<T>(const T*, const T*, int64_t, double, double, T*);                             \
  template void swiglu_oai_bwd<T>(const T*, const T*, const T*, int64_t, double, double, T*, T*);               \
  template void msa_index_scores<T>(const T*, const T*, int64_t, int, int, T*);                                 \
  template void msa_index_scores_bwd<T>(const T*, const T*, const T*, int64_t, int, int, T*, T*);               \
  template void msa_select<T>(const T*, SeqVis, const int32_t*, int64_t, int, int, int, int32_t*);       \
  template void msa_attention_fwd<T>(const T*, const T*, const T*, SeqVis, const int32_t*, const int32_t*,  \
                                     int64_t, int,                                                            \
                                     int, int, int, int, double, T*, T*);                                       \
  template void msa_attention_bwd<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int, int, int,  \
                                     double, T*, T*, T*);                                                       \
  template double msa_index_kl<T>(const T*, const T*, SeqVis, const int32_t*, const int32_t*,             \
                                  const uint8_t*, int64_t,                                                 \
                                  int, int, int, int, double, double, T*);

MMX_TRAIN_MSA_INSTANTIATE(float)
MMX_TRAIN_MSA_INSTANTIATE(double)

}  // namespace mmx::train
