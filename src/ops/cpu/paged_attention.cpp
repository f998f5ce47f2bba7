// Fast dense / block-sparse softmax attention over the block-major paged KV cache (contracts in
// ops/ops.h: attention_dense_paged, attention_block_sparse).
//
// Key list. For query i and KV head g the visible blocks in ascending id order (dense: 0..⌊p/B⌋;
// sparse: the selected ids, sorted, so the slot order never matters) form one list of n keys;
// every block but the last is whole, so key t is row t % B of the block at list position t / B.
//
// Splits (flash-decoding). The list is cut into splits of split_len(n) keys (a function of n
// only: at least kMinSplit keys, at most kMaxSplits splits, a multiple of kSub). A task is (query,
// run of KV heads sharing the list, split): dense gives a task all the query's KV heads (cut into
// runs only when there are fewer than 2 tasks per thread), sparse one KV head (its own list). A
// task walks its keys in address order — row t of every KV head of the run, then row t + 1 (a
// page is [B][n_kv_heads][d], so a page's keys are one contiguous run), prefetched kPrefetch keys
// ahead — so each K and V byte is read once per token for the whole GQA group. Per sub-block of
// kSub keys and query head h:
//   1. s[h][t] = scale · q_h·k_t (≤ 6 heads × 2 keys per kernel pass: a K row is widened once
//      for up to 6 heads);
//   2. m' = max(m, max_t s); α = exp(m - m'); p = exp(s - m'); l = α·l + Σ_t p (fixed order);
//   3. o = α·o + Σ_t p_t v_t (register tiles of ≤ 6 heads × 16 channels over kKeyBlock keys).
// A single split normalises o / l into `out` itself; otherwise the splits' (m, l, o) are parked
// and combined per (query, head) in split order: M = max m_c, w_c = exp(m_c - M),
// out = (Σ_c w_c o_c) / (Σ_c w_c l_c). Every number depends only on the key list and the split
// boundaries (functions of n); each head's arithmetic is its own whatever run it is in. So the
// result is bitwise independent of n_threads(), of the other queries of the call (a multi-query
// call == single calls), and dense == sparse with every visible block selected.
//
// Pages are F32 or BF16: a BF16 row is widened to fp32 as it is loaded (u16 -> u32, shift left
// 16), so BF16 pages give the same bits as F32 pages holding the same (rounded) values; the scalar
// tails of head dims not a multiple of 8 use an explicit fma so both instantiations round alike.
//
// Where the time goes (docs/performance.md, "Long context"): with GQA the arithmetic is
// group FMAs per K or V element, so on AVX2 (16 fp32 FMA lanes per cycle) a group of 6 (M2) caps
// one core at ~5.3 B of bf16 K/V per cycle, about half the read ceiling of the test machine;
// group 16 (M3) at ~2 B per cycle. Measured (msa_bench table 1b, 1 thread): ~60 % of the FMA peak
// with the pages in cache, ~1/3 streaming them from DRAM.
//
// Not here: tiling several queries over shared pages in prefill, fp8 KV.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu.h"
#include "ops/cpu/msa.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int64_t kSub = 64;          // keys per online-softmax step (scores stay in L1)
constexpr int64_t kMinSplit = 512;    // keys per split, at least
constexpr int64_t kMaxSplits = 64;    // splits per key list, at most
constexpr int64_t kPrefetch = 16;     // key rows the scan asks for ahead of use
// Keys per P·V block: the accumulator tiles are loaded and stored once per block. A KV head's rows
// sit n_kv_heads·head_dim values apart, so one column chunk of many rows maps to few L1 sets.
// Measured (msa_bench table 1b, 1 thread, M2 / M3 at 8K and 32K): 16 beats 8 by 1-8 % in 8 of 8
// alternating pairs; 32 is within the noise of 16.
constexpr int64_t kKeyBlock = 16;
constexpr int kHeads = 6;             // query heads per score / P·V tile (12 accumulators)
// Parked split partials per batch of queries (floats): bounds the buffer in chunked prefill.
constexpr int64_t kMaxParked = int64_t(1) << 21;

// Number of keys per split for a list of n keys (a multiple of kSub).
inline int64_t split_len(int64_t n) {
  const int64_t want = (n + kMaxSplits - 1) / kMaxSplits;
  return std::max(kMinSplit, (want + kSub - 1) / kSub * kSub);
}
inline int64_t n_splits(int64_t n) { return (n + split_len(n) - 1) / split_len(n); }

// s[h * ns + t] = scale · q_h·k0 and (if k1) s[h * ns + t + 1] = scale · q_h·k1, for h < H.
//   q: H rows of d floats, contiguous.
template <int H, typename T>
inline void score2(const float* q, const T* k0, const T* k1, int64_t d, float scale, float* s,
                   int64_t ns, int64_t t, bool two) {
  __m256 acc[H][2];
#pragma GCC unroll 6
  for (int h = 0; h < H; ++h) acc[h][0] = acc[h][1] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    const __m256 a = load8(k0 + c), b = load8(k1 + c);
#pragma GCC unroll 6
    for (int h = 0; h < H; ++h) {
      const __m256 qv = _mm256_loadu_ps(q + h * d + c);
      acc[h][0] = _mm256_fmadd_ps(qv, a, acc[h][0]);
      acc[h][1] = _mm256_fmadd_ps(qv, b, acc[h][1]);
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
#pragma GCC unroll 6
  for (int h = 0; h < H; h += 2) {
    const bool pair = h + 1 < H;
    __m128 r = hsum4(acc[h][0], acc[h][1], pair ? acc[h + 1][0] : _mm256_setzero_ps(),
                     pair ? acc[h + 1][1] : _mm256_setzero_ps());
    if (c < d) {  // head-dim tail: explicit fma chains (same bits for F32 and BF16 rows)
      alignas(16) float tl[4] = {0, 0, 0, 0};
      for (int u = 0; u < (pair ? 4 : 2); ++u) {
        const float* qh = q + (h + u / 2) * d;
        const T* k = u % 2 ? k1 : k0;
        float a = 0.0f;
        for (int64_t e = c; e < d; ++e) a = std::fma(qh[e], load1(k[e]), a);
        tl[u] = a;
      }
      r = _mm_add_ps(r, _mm_load_ps(tl));
    }
    alignas(16) float o[4];
    _mm_store_ps(o, _mm_mul_ps(r, sc));
    s[h * ns + t] = o[0];
    if (two) s[h * ns + t + 1] = o[1];
    if (pair) {
      s[(h + 1) * ns + t] = o[2];
      if (two) s[(h + 1) * ns + t + 1] = o[3];
    }
  }
}

// o[m][c, c + 8·NV) (+)= Σ_{t in [t0, t1)} p[m][t] · vr[t][c, c + 8·NV) for m < MR.
template <int MR, int NV, typename T>
inline void pv_tile(const float* const* p, const T* const* vr, int64_t t0, int64_t t1, int64_t c,
                    float* const* o, bool accumulate) {
  __m256 acc[MR][NV];
#pragma GCC unroll 6
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u)
      acc[m][u] = accumulate ? _mm256_loadu_ps(o[m] + c + 8 * u) : _mm256_setzero_ps();
  for (int64_t t = t0; t < t1; ++t) {
    __m256 vv[NV];
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u) vv[u] = load8(vr[t] + c + 8 * u);
#pragma GCC unroll 6
    for (int m = 0; m < MR; ++m) {
      const __m256 pm = _mm256_broadcast_ss(p[m] + t);
#pragma GCC unroll 2
      for (int u = 0; u < NV; ++u) acc[m][u] = _mm256_fmadd_ps(pm, vv[u], acc[m][u]);
    }
  }
#pragma GCC unroll 6
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u) _mm256_storeu_ps(o[m] + c + 8 * u, acc[m][u]);
}

template <int MR, typename T>
void pv_heads(const float* const* p, const T* const* vr, int64_t t0, int64_t t1, int64_t d,
              float* const* o, bool accumulate) {
  int64_t c = 0;
  for (; c + 16 <= d; c += 16) pv_tile<MR, 2>(p, vr, t0, t1, c, o, accumulate);
  if (c + 8 <= d) {
    pv_tile<MR, 1>(p, vr, t0, t1, c, o, accumulate);
    c += 8;
  }
  for (; c < d; ++c)
    for (int m = 0; m < MR; ++m) {
      float a = accumulate ? o[m][c] : 0.0f;
      for (int64_t t = t0; t < t1; ++t) a = std::fma(p[m][t], load1(vr[t][c]), a);
      o[m][c] = a;
    }
}

// Every 64-byte line of [p, p + bytes).
template <typename T>
inline void prefetch_span(const T* p, int64_t bytes) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
}

// p[0, n) = exp(p - m) in place; returns Σ p (vector lanes, then the tail, in a fixed order).
inline float exp_sum(float* p, int64_t n, float m) {
  const __m256 mb = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p + j), mb));
    _mm256_storeu_ps(p + j, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = hsum(sv);
  for (; j < n; ++j) sum += (p[j] = exp_scalar(p[j] - m));
  return sum;
}

inline float max_of(const float* p, int64_t n) {
  __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(p + j));
  float m = hmax(mv);
  for (; j < n; ++j) m = std::max(m, p[j]);
  return m;
}

// A key list: n keys; key t is row t % B of list block t / B, whose page is
// bt[blocks ? blocks[t / B] : t / B].
struct KeyList {
  const int32_t* blocks;  // sorted block ids, or nullptr for 0, 1, 2, ...
  int64_t n;
};

// KV heads [g0, g1) of one query over the keys [t0, t1) of their (shared) key list, all their
// query heads (nh = (g1 - g0) · group rows of q / o, contiguous), folded over sub-blocks of kSub
// keys: leaves the running max m[h], sum l[h] and unnormalised output o[h · d ..]. Each key's
// row is walked across the KV heads in address order (a page is [B][n_kv_heads][d], so the keys
// of a page are one contiguous run that the hardware prefetchers stream).
template <typename T>
void attend_split(const float* q, int64_t group, int64_t g0, int64_t g1, const T* kbase,
                  const T* vbase, const int32_t* bt, const KeyList& kl, int64_t B, int64_t row,
                  int64_t page, int64_t t0, int64_t t1, int64_t d, float scale, float* m, float* l,
                  float* o) {
  constexpr int64_t ns = kSub + 16;  // score row stride: an odd number of 64-byte lines
  const int64_t nkv = g1 - g0, nh = nkv * group;
  float* s = scratch(0, size_t(nh * ns));
  const int64_t n_groups = (group + kHeads - 1) / kHeads;  // balanced score groups of <= kHeads
  const T* kr[kSub];
  const T* vr[kSub];
  // key t's row of the first KV head, in values from the pool's start
  const auto offset = [&](int64_t t) {
    const int64_t blk = t / B;
    return int64_t(bt[kl.blocks ? kl.blocks[blk] : int32_t(blk)]) * page + (t % B) * row + g0 * d;
  };
  const int64_t span = nkv * d * int64_t(sizeof(T));  // bytes of a key's row for these heads
  for (int64_t a = t0; a < t1; a += kSub) {
    const int64_t b = std::min(t1, a + kSub), nb = b - a;
    for (int64_t t = a; t < b; ++t) {
      const int64_t off = offset(t);
      kr[t - a] = kbase + off;
      vr[t - a] = vbase + off;
    }
    // 1. scores (the bits of a score do not depend on its head group or key slot)
    for (int64_t t = 0; t < nb; t += 2) {
      const bool two = t + 1 < nb;
      for (int64_t u = a + t + kPrefetch; u < std::min(t1, a + t + kPrefetch + 2); ++u)
        prefetch_span(kbase + offset(u), span);
      for (int64_t g = 0; g < nkv; ++g) {
        const T* k0 = kr[t] + g * d;
        const T* k1 = (two ? kr[t + 1] : kr[t]) + g * d;
        for (int64_t j = 0, h = g * group; j < n_groups; ++j) {
          const int64_t gsz = group / n_groups + (j < group % n_groups ? 1 : 0);
          const float* qh = q + h * d;
          float* sh = s + h * ns;
          switch (gsz) {
            case 6: score2<6>(qh, k0, k1, d, scale, sh, ns, t, two); break;
            case 5: score2<5>(qh, k0, k1, d, scale, sh, ns, t, two); break;
            case 4: score2<4>(qh, k0, k1, d, scale, sh, ns, t, two); break;
            case 3: score2<3>(qh, k0, k1, d, scale, sh, ns, t, two); break;
            case 2: score2<2>(qh, k0, k1, d, scale, sh, ns, t, two); break;
            default: score2<1>(qh, k0, k1, d, scale, sh, ns, t, two); break;
          }
          h += gsz;
        }
      }
    }
    // 2. online softmax step
    const bool first = a == t0;
    for (int64_t h = 0; h < nh; ++h) {
      float* sh = s + h * ns;
      const float mb = max_of(sh, nb);
      const float mn = first ? mb : std::max(m[h], mb);
      const float sum = exp_sum(sh, nb, mn);
      if (first) {
        l[h] = sum;
      } else {
        const float alpha = exp_scalar(m[h] - mn);
        l[h] = l[h] * alpha + sum;
        if (alpha != 1.0f) {
          float* oh = o + h * d;
          const __m256 av = _mm256_set1_ps(alpha);
          int64_t c = 0;
          for (; c + 8 <= d; c += 8) _mm256_storeu_ps(oh + c, _mm256_mul_ps(_mm256_loadu_ps(oh + c), av));
          for (; c < d; ++c) oh[c] *= alpha;
        }
      }
      m[h] = mn;
    }
    // 3. P·V, kKeyBlock keys at a time across the KV heads
    for (int64_t tb = 0; tb < nb; tb += kKeyBlock) {
      const int64_t te = std::min(nb, tb + kKeyBlock);
      const bool acc = !(first && tb == 0);
      for (int64_t u = a + tb + kPrefetch; u < std::min(t1, a + te + kPrefetch); ++u)
        prefetch_span(vbase + offset(u), span);
      for (int64_t g = 0; g < nkv; ++g) {
        const T* vg[kKeyBlock];
        for (int64_t t = tb; t < te; ++t) vg[t - tb] = vr[t] + g * d;
        for (int64_t h0 = 0; h0 < group; h0 += kHeads) {
          const int mr = int(std::min<int64_t>(kHeads, group - h0));
          const float* p[kHeads];
          float* om[kHeads];
          for (int mm = 0; mm < mr; ++mm) {
            p[mm] = s + (g * group + h0 + mm) * ns + tb;
            om[mm] = o + (g * group + h0 + mm) * d;
          }
          const int64_t kn = te - tb;
          switch (mr) {
            case 6: pv_heads<6>(p, vg, 0, kn, d, om, acc); break;
            case 5: pv_heads<5>(p, vg, 0, kn, d, om, acc); break;
            case 4: pv_heads<4>(p, vg, 0, kn, d, om, acc); break;
            case 3: pv_heads<3>(p, vg, 0, kn, d, om, acc); break;
            case 2: pv_heads<2>(p, vg, 0, kn, d, om, acc); break;
            default: pv_heads<1>(p, vg, 0, kn, d, om, acc); break;
          }
        }
      }
    }
  }
}

// o[h] *= 1 / l[h] for h < nh.
inline void normalise(float* o, const float* l, int64_t nh, int64_t d) {
  for (int64_t h = 0; h < nh; ++h) {
    const float inv = 1.0f / l[h];
    const __m256 iv = _mm256_set1_ps(inv);
    float* oh = o + h * d;
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) _mm256_storeu_ps(oh + c, _mm256_mul_ps(_mm256_loadu_ps(oh + c), iv));
    for (; c < d; ++c) oh[c] *= inv;
  }
}

template <typename T>
void attention_paged_t(const Tensor& q, const T* kbase, const T* vbase, const Tensor& k_pages,
                       const Tensor& block_table, const Tensor& positions, const Tensor& selected,
                       float scale, Tensor& out) {
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t B = k_pages.dim(1), n_kvh = k_pages.dim(2), group = n_heads / n_kvh;
  const int64_t row = n_kvh * d, page = B * row;  // values between tokens / pages
  const int32_t* bt = block_table.ptr<int32_t>();
  const int32_t* pos = positions.ptr<int32_t>();
  const bool sparse = selected.ndim != 0;
  const int nt = threads();
  // Units: (query, run of KV heads sharing one key list). Dense: all KV heads of a query share
  // it, and are cut into runs of hc heads only to give every thread work (each head's numbers
  // are its own, so hc never changes a bit); sparse: one KV head per unit (its selected ids,
  // sorted). Each unit is cut into splits of split_len(n) keys: tasks = (unit, split).
  int64_t hc = sparse ? 1 : n_kvh;
  if (!sparse) {
    int64_t n_split_all = 0;
    for (int64_t i = 0; i < n_q; ++i) n_split_all += n_splits(int64_t(pos[i]) + 1);
    while (hc % 2 == 0 && n_split_all * (n_kvh / hc) < 2 * nt) hc /= 2;
  }
  const int64_t per_q = n_kvh / hc, n_units = n_q * per_q;
  // (thread_local: the calling thread's buffers, reused across calls; the workers reach them
  // through these references.)
  static thread_local std::vector<int32_t> sel_buf;
  static thread_local std::vector<KeyList> list_buf;
  static thread_local std::vector<float> park_buf;
  std::vector<int32_t>& sel = sel_buf;
  std::vector<KeyList>& lists = list_buf;
  lists.resize(size_t(n_units));
  if (sparse) {
    const int64_t K = selected.dim(2);
    sel.resize(size_t(n_units * K));
    for (int64_t i = 0; i < n_q; ++i)
      for (int64_t g = 0; g < n_kvh; ++g) {
        const int32_t* sl = selected.ptr<int32_t>() + (g * n_q + i) * K;
        int32_t* dst = sel.data() + (i * n_kvh + g) * K;
        int64_t nb = 0;
        while (nb < K && sl[nb] >= 0) dst[nb] = sl[nb], ++nb;
        std::sort(dst, dst + nb);
        // every listed block but the last (the local one, ⌊p/B⌋) is whole
        lists[size_t(i * n_kvh + g)] = {dst, (nb - 1) * B + (pos[i] - int64_t(dst[nb - 1]) * B + 1)};
      }
  } else {
    for (int64_t u = 0; u < n_units; ++u) lists[size_t(u)] = {nullptr, int64_t(pos[u / per_q]) + 1};
  }
  const int64_t unh = hc * group, part = unh * (d + 2);  // parked floats per split: o, m, l
  for (int64_t u0 = 0; u0 < n_units;) {
    // A batch of units whose parked partials fit kMaxParked (at least one unit).
    int64_t u1 = u0, n_tasks = 0, n_park = 0;
    std::vector<int64_t> task0, park0;  // per unit of the batch: first task / parked slot
    while (u1 < n_units) {
      const int64_t ns = n_splits(lists[size_t(u1)].n);
      if (u1 > u0 && ns > 1 && (n_park + ns) * part > kMaxParked) break;
      task0.push_back(n_tasks);
      park0.push_back(n_park);
      n_tasks += ns;
      n_park += ns > 1 ? ns : 0;
      ++u1;
    }
    task0.push_back(n_tasks);
    if (size_t(n_park * part) > park_buf.size()) park_buf.resize(size_t(n_park * part));
    float* pk = park_buf.data();
#pragma omp parallel num_threads(nt) if (n_tasks > 1)
    {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < n_tasks; ++task) {
        const int64_t r = std::upper_bound(task0.begin(), task0.end(), task) - task0.begin() - 1;
        const int64_t u = u0 + r, c = task - task0[size_t(r)];
        const int64_t i = u / per_q, g0 = (u % per_q) * hc;
        const KeyList& kl = lists[size_t(u)];
        const int64_t S = split_len(kl.n);
        const float* qi = q.f32() + (i * n_heads + g0 * group) * d;
        if (S >= kl.n) {
          float* ml = scratch(1, size_t(2 * unh));
          float* oi = out.f32() + (i * n_heads + g0 * group) * d;
          attend_split(qi, group, g0, g0 + hc, kbase, vbase, bt, kl, B, row, page, 0, kl.n, d, scale,
                       ml, ml + unh, oi);
          normalise(oi, ml + unh, unh, d);
        } else {
          float* slot = pk + (park0[size_t(r)] + c) * part;
          attend_split(qi, group, g0, g0 + hc, kbase, vbase, bt, kl, B, row, page, c * S,
                       std::min(kl.n, (c + 1) * S), d, scale, slot + unh * d, slot + unh * d + unh, slot);
        }
      }
      // combine each unit's parked splits, in split order
#pragma omp for schedule(static)
      for (int64_t r = 0; r < u1 - u0; ++r) {
        const int64_t ns = task0[size_t(r + 1)] - task0[size_t(r)];
        if (ns == 1) continue;
        const int64_t u = u0 + r, i = u / per_q, g0 = (u % per_q) * hc;
        float* oi = out.f32() + (i * n_heads + g0 * group) * d;
        const float* base = pk + park0[size_t(r)] * part;
        for (int64_t h = 0; h < unh; ++h) {
          float M = -std::numeric_limits<float>::infinity();
          for (int64_t c = 0; c < ns; ++c) M = std::max(M, base[c * part + unh * d + h]);
          float L = 0.0f;
          float* oh = oi + h * d;
          for (int64_t c = 0; c < ns; ++c) {
            const float* sl = base + c * part;
            const float w = exp_scalar(sl[unh * d + h] - M);
            L = c == 0 ? w * sl[unh * d + unh + h] : std::fma(w, sl[unh * d + unh + h], L);
            const __m256 wv = _mm256_set1_ps(w);
            const float* src = sl + h * d;
            int64_t e = 0;
            for (; e + 8 <= d; e += 8) {
              const __m256 x = _mm256_loadu_ps(src + e);
              _mm256_storeu_ps(oh + e, c == 0 ? _mm256_mul_ps(wv, x)
                                              : _mm256_fmadd_ps(wv, x, _mm256_loadu_ps(oh + e)));
            }
            for (; e < d; ++e) oh[e] = c == 0 ? w * src[e] : std::fma(w, src[e], oh[e]);
          }
          normalise(oh, &L, 1, d);
        }
      }
    }
    u0 = u1;
  }
}

}  // namespace

void paged_attention(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, const Tensor& selected,
                     float scale, Tensor& out) {
  if (k_pages.dtype == DType::kBF16)
    return attention_paged_t(q, k_pages.ptr<uint16_t>(), v_pages.ptr<uint16_t>(), k_pages,
                             block_table, positions, selected, scale, out);
  attention_paged_t(q, k_pages.f32(), v_pages.f32(), k_pages, block_table, positions, selected,
                    scale, out);
}

}  // namespace mmx::ops::cpu
