// Fast paged-attention / MSA ops over the block-major paged KV cache (contracts in ops/ops.h).
//
// msa_index_select, per chunk of up to kQueryChunk queries:
//   1. block scores S[row][b] for every row = (query, index head): tasks = (tile of kRowTile rows)
//      × (run of kBlockChunk blocks); a task walks each of its pages 4 keys at a time and, per
//      pair of rows, takes 2 × 4 dots (8 vector accumulators, one hadd tree for 4 dots) and a
//      masked running max (keys j > p of the partial local block -> -inf). The page's 4 key rows
//      stay in L1 while every row of the tile uses them, so a page is streamed once per task.
//      This O(T_k) scan is the indexer's whole cost at decode (64 MiB of index keys at 128K).
//   2. selection per row: one pass over the non-local blocks keeping the K-1 best in a small
//      sorted array (insertion, most blocks rejected by one compare against the current worst);
//      the order is (score desc, block id asc), the same as the reference's stable sort.
//   A block's score is a max of per-key dots, each computed the same way whatever task, slot or
//   lane it lands in, so the result is bitwise independent of the thread count and tiling.
//
// The paged attention itself (dense and block-sparse) is in cpu/paged_attention.cpp.
//
// KV and index-key pages are F32 or BF16 (the KV cache's dtype): every kernel that reads a page
// row is a template on the row's element type, and a BF16 row is widened to fp32 as it is loaded
// (8 at a time: u16 -> u32, shift left 16; scalar tails likewise), so the F32 instantiation is the
// plain code and BF16 pages give the same bits as F32 pages holding the same (rounded) values
// (the scalar tails of head dims not a multiple of 8 use an explicit fma, so that both
// instantiations round alike whatever the compiler would contract).
//
// Index-key pages may also be F8 E4M3 (the release's compact form, 128 B per token): a row is
// widened through fp16 (simd.h: the value · 2^-8, exact) and the queries carry the 2^8, so E4M3
// pages too give the bits of F32 pages holding the same values (score_blocks).
#include "ops/cpu/msa.h"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int64_t kQueryChunk = 64;  // queries whose block scores are held at once
constexpr int64_t kRowTile = 8;      // (query, index head) rows per scoring task
constexpr int64_t kBlockChunk = 16;  // blocks per scoring task

inline float hmax4(__m128 v) {
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// out[r] = [q[r]·k[0], q[r]·k[1], q[r]·k[2], q[r]·k[3]] for r < R; all vectors of length d
// (k: page rows, F32 or BF16).
template <int R, typename KT>
inline void dots4(const float* const* q, const KT* const* k, int64_t d, __m128* out) {
  __m256 acc[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) acc[r][u] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    __m256 kv[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) kv[u] = load8(k[u] + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 qv = _mm256_loadu_ps(q[r] + c);
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) acc[r][u] = _mm256_fmadd_ps(qv, kv[u], acc[r][u]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    out[r] = hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    if (c < d) {
      alignas(16) float t[4];
      for (int u = 0; u < 4; ++u) {
        float s = 0.0f;
        for (int64_t e = c; e < d; ++e) s = std::fma(q[r][e], load1(k[u][e]), s);  // same for F32/BF16
        t[u] = s;
      }
      out[r] = _mm_add_ps(out[r], _mm_load_ps(t));
    }
  }
}

// ---- indexer ----

// S[r * nb + b] for rows r in [r0, r1) and blocks b in [b0, b1) of one query chunk.
//   q[r]: the row's index query; lim0[r] = p_r (absolute position of the row's query).
template <typename T>
void score_blocks(const float* const* q, const int64_t* pos, int64_t r0, int64_t r1, int64_t b0,
                  int64_t b1, const T* ik, const int32_t* bt, int64_t B, int64_t d,
                  int64_t nb, float* S) {
  const __m128 neg_inf = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  // E4M3 keys are widened without their 2^8 (simd.h: fp16 holds e4m3 · 2^-8) and the tile's
  // queries carry it instead: fma(2^8 q, 2^-8 k, acc) is fma(q, k, acc) exactly (power-of-two
  // scalings of finite values), one multiply per query element instead of one per key element.
  constexpr bool kF8 = std::is_same_v<T, uint8_t>;
  const float* qr[kRowTile];  // the rows' queries as the dots read them
  float* wide = nullptr;      // kF8: 4 widened key rows, then the scaled queries
  for (int64_t r = r0; r < r1; ++r) qr[r - r0] = q[r];
  if constexpr (kF8) {
    wide = scratch(0, size_t((4 + kRowTile) * d));
    for (int64_t r = r0; r < r1; ++r) {
      float* s = wide + (4 + (r - r0)) * d;
      for (int64_t c = 0; c < d; ++c) s[c] = q[r][c] * kF8Unscale;
      qr[r - r0] = s;
    }
  }
  for (int64_t b = b0; b < b1; ++b) {
    int64_t act[kRowTile], lim[kRowTile];
    int n_act = 0;
    int64_t nk = 0;  // keys of the block that some row sees
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t l = pos[r] - b * B;  // the row sees rows 0..l of this block
      if (l < 0) {
        S[r * nb + b] = -std::numeric_limits<float>::infinity();
        continue;
      }
      act[n_act] = r;
      lim[n_act++] = l;
      nk = std::max(nk, std::min(B, l + 1));
    }
    if (n_act == 0) continue;
    __m128 run[kRowTile];
    for (int a = 0; a < n_act; ++a) run[a] = neg_inf;
    const T* page = ik + int64_t(bt[b]) * B * d;
    // E4M3 rows are widened 4 at a time into an L1-resident copy that every row pair of the tile
    // reads (widening inside dots4 would redo it per pair).
    for (int64_t k0 = 0; k0 < nk; k0 += 4) {
      const T* kp[4];
      alignas(16) float idx[4];
      for (int u = 0; u < 4; ++u) {
        const int64_t kk = std::min(k0 + u, nk - 1);  // a repeated key does not change a max
        kp[u] = page + kk * d;
        idx[u] = float(kk);
      }
      const __m128 iv = _mm_load_ps(idx);
      auto fold = [&](int a, __m128 o) {
        if (lim[a] < k0 + 3)  // some of these 4 keys are in the row's future
          o = _mm_blendv_ps(o, neg_inf, _mm_cmpgt_ps(iv, _mm_set1_ps(float(lim[a]))));
        run[a] = _mm_max_ps(run[a], o);
      };
      const auto rows = [&](const auto* const* k) {  // every active row against the 4 keys k
        int a = 0;
        for (; a + 2 <= n_act; a += 2) {
          const float* qq[2] = {qr[act[a] - r0], qr[act[a + 1] - r0]};
          __m128 o[2];
          dots4<2>(qq, k, d, o);
          fold(a, o[0]);
          fold(a + 1, o[1]);
        }
        if (a < n_act) {
          const float* qq[1] = {qr[act[a] - r0]};
          __m128 o[1];
          dots4<1>(qq, k, d, o);
          fold(a, o[0]);
        }
      };
      if constexpr (kF8) {
        const float* kw[4];
        for (int u = 0; u < 4; ++u) {
          float* w = wide + u * d;
          int64_t c = 0;
          for (; c + 16 <= d; c += 16) {
            __m256 lo, hi;
            f8x16_to_f32_unscaled(kp[u] + c, &lo, &hi);
            _mm256_storeu_ps(w + c, lo);
            _mm256_storeu_ps(w + c + 8, hi);
          }
          for (; c < d; ++c) w[c] = f8_to_f32_unscaled(kp[u][c]);
          kw[u] = w;
        }
        rows(kw);
      } else {
        rows(kp);
      }
    }
    for (int a = 0; a < n_act; ++a) S[act[a] * nb + b] = hmax4(run[a]);
  }
}

// selected row out[0, K) from the scores s[0, nvis) (block nvis-1 is the local one).
void select_row(const float* s, int64_t nvis, int64_t K, int32_t* out) {
  if (nvis <= K) {
    for (int64_t b = 0; b < K; ++b) out[b] = b < nvis ? int32_t(b) : -1;
    return;
  }
  // top K-1 of blocks 0..nvis-2, sorted by (score desc, id asc). Blocks arrive in ascending id
  // order, so a newcomer beats an equal score only if it is strictly greater.
  int64_t n = 0;
  float top_s[64];
  int32_t top_id[64];
  float* ts = top_s;
  int32_t* ti = top_id;
  std::vector<float> big_s;
  std::vector<int32_t> big_i;
  if (K - 1 > 64) {
    big_s.resize(size_t(K - 1));
    big_i.resize(size_t(K - 1));
    ts = big_s.data();
    ti = big_i.data();
  }
  const int64_t cap = K - 1;
  if (cap > 0)
    for (int64_t b = 0; b + 1 < nvis; ++b) {
      const float v = s[b];
      if (n == cap && !(v > ts[n - 1])) continue;
      int64_t t = n < cap ? n++ : cap - 1;  // the slot freed at the end (the worst drops out)
      while (t > 0 && ts[t - 1] < v) {
        ts[t] = ts[t - 1];
        ti[t] = ti[t - 1];
        --t;
      }
      ts[t] = v;
      ti[t] = int32_t(b);
    }
  for (int64_t a = 0; a < cap; ++a) out[a] = ti[a];
  out[cap] = int32_t(nvis - 1);
}

}  // namespace

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected) {
  const int64_t n_q = iq.dim(0), G = iq.dim(1), d = iq.dim(2), B = ik_pages.dim(1);
  const int64_t K = selected.dim(2);
  const int32_t* bt = block_table.ptr<int32_t>();
  const int32_t* pos = positions.ptr<int32_t>();
  const DType ikt = ik_pages.dtype;  // F32, BF16 or F8 E4M3 (check.cpp)
  const int nt = threads();
  std::vector<float> S;
  std::vector<const float*> q;
  std::vector<int64_t> rpos;
  for (int64_t i0 = 0; i0 < n_q; i0 += kQueryChunk) {
    const int64_t i1 = std::min(n_q, i0 + kQueryChunk), n_rows = (i1 - i0) * G;
    int64_t nb = 0;  // blocks some query of the chunk sees
    q.resize(size_t(n_rows));
    rpos.resize(size_t(n_rows));
    for (int64_t i = i0; i < i1; ++i) {
      nb = std::max<int64_t>(nb, pos[i] / B + 1);
      for (int64_t g = 0; g < G; ++g) {
        q[size_t((i - i0) * G + g)] = iq.f32() + (i * G + g) * d;
        rpos[size_t((i - i0) * G + g)] = pos[i];
      }
    }
    S.resize(size_t(n_rows * nb));
    const int64_t n_rt = (n_rows + kRowTile - 1) / kRowTile;
    const int64_t n_bc = (nb + kBlockChunk - 1) / kBlockChunk;
    const int64_t n_tasks = n_rt * n_bc;
    const bool par = n_tasks > 1 && n_rows * nb * B * d >= (int64_t(1) << 16);
#pragma omp parallel num_threads(nt) if (par)
    {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < n_tasks; ++task) {
        const int64_t rt = task / n_bc, bc = task % n_bc;
        const int64_t r0 = rt * kRowTile, r1 = std::min(n_rows, r0 + kRowTile);
        const int64_t b0 = bc * kBlockChunk, b1 = std::min(nb, b0 + kBlockChunk);
        if (ikt == DType::kBF16)
          score_blocks(q.data(), rpos.data(), r0, r1, b0, b1, ik_pages.ptr<uint16_t>(), bt, B, d, nb, S.data());
        else if (ikt == DType::kF8E4M3)
          score_blocks(q.data(), rpos.data(), r0, r1, b0, b1, ik_pages.ptr<uint8_t>(), bt, B, d, nb, S.data());
        else
          score_blocks(q.data(), rpos.data(), r0, r1, b0, b1, ik_pages.f32(), bt, B, d, nb, S.data());
      }
#pragma omp for schedule(static)
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t i = i0 + r / G, g = r % G;
        select_row(S.data() + r * nb, pos[i] / B + 1, K,
                   selected.ptr<int32_t>() + (g * n_q + i) * K);
      }
    }
  }
}

void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, const Tensor& selected, float scale, int top_n,
                         Tensor& recall, Tensor& coverage) {
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t B = k_pages.dim(1), n_kvh = k_pages.dim(2), group = n_heads / n_kvh;
  const int64_t K = selected.dim(2), row = n_kvh * d, page = B * row;
  const int32_t* bt = block_table.ptr<int32_t>();
  const int32_t* pos = positions.ptr<int32_t>();
  const bool bf16 = k_pages.dtype == DType::kBF16;
  const float* kf = bf16 ? nullptr : k_pages.f32();
  const uint16_t* k16 = bf16 ? k_pages.ptr<uint16_t>() : nullptr;
  const int64_t n_tasks = n_q * n_kvh;
  const int nt = threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (n_tasks > 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t i = task / n_kvh, g = task % n_kvh, p = pos[i], nvis = p / B + 1;
    std::vector<double> kd(static_cast<size_t>(d));  // key j, widened to double
    std::vector<double> s(size_t(group * (p + 1)));  // [group][p + 1] scaled logits, fp64
    for (int64_t j = 0; j <= p; ++j) {
      const int64_t at = int64_t(bt[j / B]) * page + (j % B) * row + g * d;
      for (int64_t c = 0; c < d; ++c)
        kd[size_t(c)] = bf16 ? double(load1(k16[at + c])) : double(kf[at + c]);
      const double* kj = kd.data();
      for (int64_t h = 0; h < group; ++h) {
        const float* qh = q.f32() + (i * n_heads + g * group + h) * d;
        double a[4] = {0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 4 <= d; c += 4)
          for (int u = 0; u < 4; ++u) a[u] += double(qh[c + u]) * kj[c + u];
        for (; c < d; ++c) a[0] += double(qh[c]) * kj[c];
        s[size_t(h * (p + 1) + j)] = double(scale) * ((a[0] + a[1]) + (a[2] + a[3]));
      }
    }
    std::vector<double> mass(size_t(nvis), 0.0);
    for (int64_t h = 0; h < group; ++h) {
      double* sh = s.data() + h * (p + 1);
      const double m = *std::max_element(sh, sh + p + 1);
      double sum = 0.0;
      for (int64_t j = 0; j <= p; ++j) sum += (sh[j] = std::exp(sh[j] - m));
      for (int64_t j = 0; j <= p; ++j) mass[size_t(j / B)] += sh[j] / sum / double(group);
    }
    std::vector<int32_t> order(static_cast<size_t>(nvis));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return mass[size_t(a)] > mass[size_t(b)]; });
    const int64_t n_top = std::min<int64_t>(top_n, nvis);
    std::vector<char> in_top(size_t(nvis), 0);
    for (int64_t t = 0; t < n_top; ++t) in_top[size_t(order[size_t(t)])] = 1;
    const int32_t* sel = selected.ptr<int32_t>() + (g * n_q + i) * K;
    int64_t hits = 0;
    double cov = 0.0;
    for (int64_t a = 0; a < K && sel[a] >= 0; ++a) {
      hits += in_top[size_t(sel[a])];
      cov += mass[size_t(sel[a])];
    }
    recall.f32()[g * n_q + i] = float(double(hits) / double(n_top));
    coverage.f32()[g * n_q + i] = float(cov);
  }
}

}  // namespace mmx::ops::cpu
