// Softmax attention over visibility intervals (kernels.h attention_iv_fwd / attention_iv_bwd):
// tiles of kTile query rows; each tile gathers the union of its rows' visible key intervals
// (SeqVis::intervals), computes S = scale · Q_tile K_Uᵀ over that union only, masks each row to
// its own intervals, and keeps nothing [t, t]: the forward saves the row log-sum-exp, the
// backward recomputes P = exp(S − lse). Work ∝ Σ_tiles rows · |union| ≈ the visible pairs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "train/blas.h"
#include "train/kernels.h"

namespace mmx::train {

using detail::blas;

namespace {

constexpr int64_t kTile = 32;

// One tile's keys: the union U of its rows' intervals, and each row's mask over U.
struct TileKeys {
  std::vector<VisInterval> uni;          // merged, ascending
  std::vector<int64_t> uoff;             // offset of uni[k] in U
  int64_t u = 0;                         // |U|
  std::vector<uint8_t> mask;             // [rows, u]
  std::vector<std::vector<VisInterval>> rows;

  void build(SeqVis vis, int64_t i0, int64_t i1, int64_t t) {
    const int64_t R = i1 - i0;
    rows.resize(size_t(R));
    uni.clear();
    for (int64_t r = 0; r < R; ++r) {
      vis.intervals(i0 + r, t, rows[size_t(r)]);
      uni.insert(uni.end(), rows[size_t(r)].begin(), rows[size_t(r)].end());
    }
    std::sort(uni.begin(), uni.end(), [](const VisInterval& a, const VisInterval& b) { return a.lo < b.lo; });
    size_t m = 0;
    for (size_t k = 0; k < uni.size(); ++k) {
      if (m > 0 && uni[k].lo <= uni[m - 1].hi + 1) uni[m - 1].hi = std::max(uni[m - 1].hi, uni[k].hi);
      else uni[m++] = uni[k];
    }
    uni.resize(m);
    uoff.resize(m);
    u = 0;
    for (size_t k = 0; k < m; ++k) {
      uoff[k] = u;
      u += uni[k].hi - uni[k].lo + 1;
    }
    mask.assign(size_t(R * u), 0);
    for (int64_t r = 0; r < R; ++r)
      for (const VisInterval& iv : rows[size_t(r)]) {
        const size_t k = size_t(std::upper_bound(uni.begin(), uni.end(), iv.lo,
                                                 [](int64_t x, const VisInterval& a) { return x < a.lo; }) -
                                uni.begin() - 1);
        const int64_t at = uoff[k] + (iv.lo - uni[k].lo);
        std::memset(mask.data() + r * u + at, 1, size_t(iv.hi - iv.lo + 1));
      }
  }
  // dst [u, hd] = rows of src (row stride ld, offset already applied) in U order.
  template <class T>
  void gather(const T* src, int64_t ld, int hd, T* dst) const {
    for (size_t k = 0; k < uni.size(); ++k)
      for (int64_t j = uni[k].lo; j <= uni[k].hi; ++j)
        std::memcpy(dst + (uoff[k] + j - uni[k].lo) * hd, src + j * ld, sizeof(T) * size_t(hd));
  }
  // dst rows += src [u, hd] in U order.
  template <class T>
  void scatter_add(const T* src, int hd, T* dst, int64_t ld) const {
    for (size_t k = 0; k < uni.size(); ++k)
      for (int64_t j = uni[k].lo; j <= uni[k].hi; ++j) {
        const T* s = src + (uoff[k] + j - uni[k].lo) * hd;
        T* d = dst + j * ld;
        for (int c = 0; c < hd; ++c) d[c] += s[c];
      }
  }
};

}  // namespace

template <class T>
void attention_iv_fwd(const T* q, const T* k, const T* v, SeqVis vis, int64_t t, int n_heads, int n_kv, int hd,
                      double scale, T* out, T* lse) {
  const int group = n_heads / n_kv;
  const int64_t qs = int64_t(n_heads) * hd, ks = int64_t(n_kv) * hd;
  const int64_t n_tiles = (t + kTile - 1) / kTile;
#pragma omp parallel
  {
    TileKeys tk;
    std::vector<T> kc, vc, s;
#pragma omp for schedule(dynamic, 1)
    for (int64_t job = 0; job < n_tiles * n_kv; ++job) {
      const int kh = int(job % n_kv);
      const int64_t i0 = (job / n_kv) * kTile, i1 = std::min(t, i0 + kTile), R = i1 - i0;
      tk.build(vis, i0, i1, t);
      const int64_t u = tk.u;
      kc.resize(size_t(u * hd));
      vc.resize(kc.size());
      s.resize(size_t(R * u));
      tk.gather(k + int64_t(kh) * hd, ks, hd, kc.data());
      tk.gather(v + int64_t(kh) * hd, ks, hd, vc.data());
      for (int h = kh * group; h < (kh + 1) * group; ++h) {
        blas(false, true, R, u, hd, T(scale), q + i0 * qs + int64_t(h) * hd, qs, kc.data(), hd, T(0), s.data(), u);
        for (int64_t r = 0; r < R; ++r) {
          T* sr = s.data() + r * u;
          const uint8_t* mr = tk.mask.data() + r * u;
          T mx = -INFINITY;
          for (int64_t j = 0; j < u; ++j)
            if (mr[j]) mx = std::max(mx, sr[j]);
          for (int64_t j = 0; j < u; ++j) sr[j] = mr[j] ? sr[j] - mx : T(-80);
          vexp(sr, u);
          T sum = 0;
          for (int64_t j = 0; j < u; ++j) {
            if (!mr[j]) sr[j] = 0;
            sum += sr[j];
          }
          const T inv = T(1) / sum;
          for (int64_t j = 0; j < u; ++j) sr[j] *= inv;
          lse[int64_t(h) * t + i0 + r] = mx + T(std::log(double(sum)));
        }
        blas(false, false, R, hd, u, T(1), s.data(), u, vc.data(), hd, T(0), out + i0 * qs + int64_t(h) * hd, qs);
      }
    }
  }
}

template <class T>
void attention_iv_bwd(const T* dout, const T* q, const T* k, const T* v, SeqVis vis, const T* lse, int64_t t,
                      int n_heads, int n_kv, int hd, double scale, T* dq, T* dk, T* dv) {
  const int group = n_heads / n_kv;
  const int64_t qs = int64_t(n_heads) * hd, ks = int64_t(n_kv) * hd;
  const int64_t n_tiles = (t + kTile - 1) / kTile;
#pragma omp parallel
  {
    TileKeys tk;
    std::vector<T> kc, vc, dkc, dvc, p, dp;
    // A KV head's tiles in one thread: it owns dk/dv of that head.
#pragma omp for schedule(static)
    for (int kh = 0; kh < n_kv; ++kh)
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const int64_t i0 = tile * kTile, i1 = std::min(t, i0 + kTile), R = i1 - i0;
        tk.build(vis, i0, i1, t);
        const int64_t u = tk.u;
        kc.resize(size_t(u * hd));
        vc.resize(kc.size());
        dkc.assign(kc.size(), T(0));
        dvc.assign(kc.size(), T(0));
        p.resize(size_t(R * u));
        dp.resize(p.size());
        tk.gather(k + int64_t(kh) * hd, ks, hd, kc.data());
        tk.gather(v + int64_t(kh) * hd, ks, hd, vc.data());
        for (int h = kh * group; h < (kh + 1) * group; ++h) {
          const T* qh = q + i0 * qs + int64_t(h) * hd;
          const T* doh = dout + i0 * qs + int64_t(h) * hd;
          blas(false, true, R, u, hd, T(scale), qh, qs, kc.data(), hd, T(0), p.data(), u);
          for (int64_t r = 0; r < R; ++r) {
            T* pr = p.data() + r * u;
            const uint8_t* mr = tk.mask.data() + r * u;
            const T l = lse[int64_t(h) * t + i0 + r];
            for (int64_t j = 0; j < u; ++j) pr[j] = mr[j] ? pr[j] - l : T(-80);
            vexp(pr, u);
            for (int64_t j = 0; j < u; ++j)
              if (!mr[j]) pr[j] = 0;
          }
          blas(false, true, R, u, hd, T(1), doh, qs, vc.data(), hd, T(0), dp.data(), u);  // dP
          for (int64_t r = 0; r < R; ++r) {
            const T* pr = p.data() + r * u;
            T* dr = dp.data() + r * u;
            T rowdot = 0;
            for (int64_t j = 0; j < u; ++j) rowdot += pr[j] * dr[j];
            for (int64_t j = 0; j < u; ++j) dr[j] = pr[j] * (dr[j] - rowdot) * T(scale);  // dS
          }
          blas(false, false, R, hd, u, T(1), dp.data(), u, kc.data(), hd, T(1), dq + i0 * qs + int64_t(h) * hd, qs);
          blas(true, false, u, hd, R, T(1), dp.data(), u, qh, qs, T(1), dkc.data(), hd);
          blas(true, false, u, hd, R, T(1), p.data(), u, doh, qs, T(1), dvc.data(), hd);
        }
        tk.scatter_add(dkc.data(), hd, dk + int64_t(kh) * hd, ks);
        tk.scatter_add(dvc.data(), hd, dv + int64_t(kh) * hd, ks);
      }
  }
}

template void attention_iv_fwd<float>(const float*, const float*, const float*, SeqVis, int64_t, int, int, int, double,
                                      float*, float*);
template void attention_iv_fwd<double>(const double*, const double*, const double*, SeqVis, int64_t, int, int, int,
                                       double, double*, double*);
template void attention_iv_bwd<float>(const float*, const float*, const float*, const float*, SeqVis, const float*,
                                      int64_t, int, int, int, double, float*, float*, float*);
template void attention_iv_bwd<double>(const double*, const double*, const double*, const double*, SeqVis,
                                       const double*, int64_t, int, int, int, double, double*, double*, double*);

}  // namespace mmx::train
