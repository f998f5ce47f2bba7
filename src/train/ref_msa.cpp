// Naive fp64 M3 training kernels (ref_msa.h). Written from the math (spec §5.5-5.7) and from
// reference/torch_models.py, not from kernels_msa.cpp: loops are the definitions, backward passes
// are derived in the comments.
#include "train/ref_msa.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ref/f64.h"
#include "train/ref.h"

namespace mmx::train::ref {

namespace {

bool sees(const uint8_t* vis, int64_t t, int64_t i, int64_t j) { return vis ? vis[i * t + j] != 0 : j <= i; }

// Row j's position (pos null: j).
int64_t at(const int32_t* pos, int64_t j) { return pos ? pos[j] : j; }

// Is key j in allowed(g, i)? Its block is its position / block.
bool allowed(const uint8_t* vis, const int32_t* pos, const int32_t* sel, int64_t t, int g, int64_t i, int64_t j,
             int block, int K) {
  if (!sees(vis, t, i, j)) return false;
  const int32_t* s = sel + (int64_t(g) * t + i) * K;
  for (int a = 0; a < K; ++a)
    if (s[a] == at(pos, j) / block) return true;
  return false;
}

}  // namespace

// Per head vector: y_c = x_c r w_c => dx_c = dy_c w_c r − x_c r³/d Σ_e dy_e w_e x_e; dw_c += dy_c x_c r.
void rms_norm_heads_bwd(const double* dy, const double* x, const double* w, const double* rstd, int64_t n,
                        int n_heads, int64_t d, double* dx, double* dw) {
  for (int64_t t = 0; t < n; ++t)
    for (int h = 0; h < n_heads; ++h) {
      const int64_t o = (t * n_heads + h) * d;
      const double r = rstd[t * n_heads + h];
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += dy[o + c] * w[c] * x[o + c];
      for (int64_t c = 0; c < d; ++c) {
        dx[o + c] += dy[o + c] * w[c] * r - x[o + c] * r * r * r / double(d) * dot;
        if (dw) dw[c] += dy[o + c] * x[o + c] * r;
      }
    }
}

// a = (u'+1) g' σ(α g'); d/dg' [g' σ(α g')] = σ + α g' σ (1 − σ); d/du' = g' σ.
// g' = min(g, L) passes the gradient where g <= L; u' = clamp(u) where −L <= u <= L (torch).
void swiglu_oai_bwd(const double* da, const double* g, const double* u, int64_t n, double alpha, double limit,
                    double* dg, double* du) {
  for (int64_t i = 0; i < n; ++i) {
    const double gc = g[i] > limit ? limit : g[i];
    const double uc = u[i] > limit ? limit : u[i] < -limit ? -limit : u[i];
    const double s = 1.0 / (1.0 + std::exp(-alpha * gc));
    if (!(g[i] > limit)) dg[i] += da[i] * (uc + 1.0) * (s + alpha * gc * s * (1.0 - s));
    if (!(u[i] > limit) && !(u[i] < -limit)) du[i] += da[i] * gc * s;
  }
}

void msa_index_scores(const double* iq, const double* ik, int64_t t, int G, int di, double* z) {
  for (int g = 0; g < G; ++g)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) {
        double s = 0;
        for (int c = 0; c < di; ++c) s += iq[(i * G + g) * di + c] * ik[j * di + c];
        z[(int64_t(g) * t + i) * t + j] = s;
      }
}

// z_gij = Σ_c iq_igc ik_jc => diq_igc = Σ_j dz_gij ik_jc; dik_jc = Σ_{g,i} dz_gij iq_igc
void msa_index_scores_bwd(const double* dz, const double* iq, const double* ik, int64_t t, int G, int di,
                          double* diq, double* dik) {
  for (int g = 0; g < G; ++g)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) {
        const double w = dz[(int64_t(g) * t + i) * t + j];
        for (int c = 0; c < di; ++c) {
          diq[(i * G + g) * di + c] += w * ik[j * di + c];
          dik[j * di + c] += w * iq[(i * G + g) * di + c];
        }
      }
}

// torch_models.py M3Model._msa_select: pooled block max over visible keys, candidates = blocks
// before the local one with a finite max, a stable sort by score desc (ties: lower id first), the
// first K − 1 finite ones, then the local block.
void msa_select(const double* z, const uint8_t* vis, const int32_t* pos, int64_t t, int G, int block, int K,
                int32_t* sel) {
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int g = 0; g < G; ++g)
    for (int64_t i = 0; i < t; ++i) {
      const int64_t local = at(pos, i) / block;
      std::vector<double> S(size_t(local), ninf);
      for (int64_t j = 0; j < t; ++j) {
        const int64_t b = at(pos, j) / block;
        if (b < local && sees(vis, t, i, j)) S[size_t(b)] = std::max(S[size_t(b)], z[(int64_t(g) * t + i) * t + j]);
      }
      std::vector<int32_t> order;
      for (int64_t b = 0; b < local; ++b) order.push_back(int32_t(b));
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return S[size_t(a)] > S[size_t(b)]; });
      std::vector<int32_t> ids;
      for (int32_t b : order)
        if (int(ids.size()) < K - 1 && std::isfinite(S[size_t(b)])) ids.push_back(b);
      ids.push_back(int32_t(local));
      for (int a = 0; a < K; ++a) sel[(int64_t(g) * t + i) * K + a] = a < int(ids.size()) ? ids[size_t(a)] : -1;
    }
}

// The oracle's softmax attention (ops/ref/f64.h) of each query head over allowed(g, i), one head
// at a time: q of head h, k and v of its group g.
void msa_attention_fwd(const double* q, const double* k, const double* v, const uint8_t* vis, const int32_t* pos,
                       const int32_t* sel, int64_t t, int n_heads, int G, int hd, int block, int K, double scale, double* out,
                       double* p) {
  const int grp = n_heads / G;
  const size_t th = static_cast<size_t>(t * hd);
  std::vector<uint8_t> mask(static_cast<size_t>(t * t));
  std::vector<double> qh(th), kg(th), vg(th), oh(th);
  for (int h = 0; h < n_heads; ++h) {
    const int g = h / grp;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) mask[size_t(i * t + j)] = allowed(vis, pos, sel, t, g, i, j, block, K);
    for (int64_t i = 0; i < t; ++i)
      for (int c = 0; c < hd; ++c) {
        qh[size_t(i * hd + c)] = q[(i * n_heads + h) * hd + c];
        kg[size_t(i * hd + c)] = k[(i * G + g) * hd + c];
        vg[size_t(i * hd + c)] = v[(i * G + g) * hd + c];
      }
    ops::ref::f64::attention(qh.data(), kg.data(), vg.data(), mask.data(), t, t, 1, 1, hd, scale, oh.data(),
                             p + int64_t(h) * t * t);
    for (int64_t i = 0; i < t; ++i)
      for (int c = 0; c < hd; ++c) out[(i * n_heads + h) * hd + c] = oh[size_t(i * hd + c)];
  }
}

// The attention backward given p (0 outside allowed ⇒ no gradient there): ref::attention_bwd
// with the G groups as the KV heads.
void msa_attention_bwd(const double* dout, const double* q, const double* k, const double* v, const double* p,
                       int64_t t, int n_heads, int G, int hd, double scale, double* dq, double* dk, double* dv) {
  attention_bwd(dout, q, k, v, p, t, n_heads, G, hd, scale, dq, dk, dv);
}

// KL(t ‖ s) = Σ_j t_j log t_j − Σ_j t_j log s_j, log s_j = l_j − log Σ_allowed exp(l), l = zscale·z;
// ∂/∂l_j = −t_j + s_j Σ_m t_m = s_j − t_j (Σ t = 1); ∂/∂z = zscale · (s − t).
double msa_index_kl(const double* z, const double* p, const uint8_t* vis, const int32_t* pos, const int32_t* sel,
                    const uint8_t* rows,
                    int64_t t, int n_heads, int G, int block, int K, double zscale, double grad_scale, double* dz) {
  const int grp = n_heads / G;
  double total = 0;
  for (int g = 0; g < G; ++g)
    for (int64_t i = 0; i < t; ++i) {
      if (rows && !rows[i]) continue;
      const double* zr = z + (int64_t(g) * t + i) * t;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < t; ++j)
        if (allowed(vis, pos, sel, t, g, i, j, block, K)) mx = std::max(mx, zscale * zr[j]);
      double sum = 0;
      for (int64_t j = 0; j < t; ++j)
        if (allowed(vis, pos, sel, t, g, i, j, block, K)) sum += std::exp(zscale * zr[j] - mx);
      for (int64_t j = 0; j < t; ++j) {
        if (!allowed(vis, pos, sel, t, g, i, j, block, K)) continue;
        double tj = 0;
        for (int h = g * grp; h < (g + 1) * grp; ++h) tj += p[(int64_t(h) * t + i) * t + j];
        tj /= grp;
        const double log_s = zscale * zr[j] - mx - std::log(sum);
        if (tj > 0) total += tj * std::log(tj);
        total -= tj * log_s;
        if (dz) dz[(int64_t(g) * t + i) * t + j] += grad_scale * zscale * (std::exp(log_s) - tj);
      }
    }
  return total;
}

}  // namespace mmx::train::ref
