// Fast causal GQA softmax attention over a contiguous KV cache (contract in ops.h).
//
// One task = (query i, a block of KV heads). Keys are walked in address order across all heads
// of the block, since one key's row [n_kv_heads, head_dim] is contiguous (4 KiB, one page, for
// M2) while one head's rows are a page apart. Decode splits the KV heads over the threads;
// prefill gives each task all heads. Per query head g of KV head h:
//   1. scores[g][j] = scale · q_g·k_j for the causal range j <= pos0 + i  (AVX2 dots);
//   2. two-pass softmax in fp32: max, then exp (vector polynomial) and a fixed-order sum;
//   3. out_g = (sum_j p_gj v_j) / sum_j p_gj: register-tiled over blocks of kKeyBlock keys when
//      V is cache-sized, key-major (each V row read once, in order) when it streams from DRAM.
//      Both are the same fp32 FMA chain over j per output element, so they agree bitwise.
// Every (query, head) output is computed by one thread in a fixed order, so the result is
// bitwise independent of the thread count and of how heads are grouped into tasks.
//
// Not here: paged KV (the cache is a contiguous [n_kv, n_kv_heads, head_dim] view), masks other
// than causal, splitting one query's keys over threads (flash-decoding).
#include <omp.h>

#include <algorithm>
#include <cfloat>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kGroup = 4;           // query heads per dot-product pass (accumulators in registers)
constexpr int kPvKeys = 4;          // keys per key-major P·V step (FMAs per output load/store)
constexpr int64_t kKeyBlock = 64;   // keys per V block of the tiled P·V
constexpr int kPvHeads = 6;         // heads per P·V tile (6 × 16 floats = 12 accumulators)
// Above this many bytes of V rows (all KV heads; 1024 keys of M2), V comes from DRAM and the
// key-major walk wins. The choice depends on the shape only, never on the thread count.
constexpr int64_t kKeyMajorBytes = int64_t(4) << 20;
constexpr int64_t kMaxGroup = 64;   // query heads handled per P·V call

// s[g * s_stride] = scale · dot(q[g], kj) for g < GB; q[g], kj: [d].
template <int GB>
inline void score_dots(const float* const* q, const float* kj, int64_t d, float scale, float* s,
                       int64_t s_stride) {
  __m256 a0[GB], a1[GB];
#pragma GCC unroll 8
  for (int g = 0; g < GB; ++g) a0[g] = a1[g] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= d; c += 16) {
    const __m256 k0 = _mm256_loadu_ps(kj + c), k1 = _mm256_loadu_ps(kj + c + 8);
#pragma GCC unroll 8
    for (int g = 0; g < GB; ++g) {
      a0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + c), k0, a0[g]);
      a1[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + c + 8), k1, a1[g]);
    }
  }
  if (c + 8 <= d) {
    const __m256 k0 = _mm256_loadu_ps(kj + c);
#pragma GCC unroll 8
    for (int g = 0; g < GB; ++g) a0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + c), k0, a0[g]);
    c += 8;
  }
#pragma GCC unroll 8
  for (int g = 0; g < GB; ++g) {
    float r = hsum(_mm256_add_ps(a0[g], a1[g]));
    for (int64_t e = c; e < d; ++e) r += q[g][e] * kj[e];
    s[g * s_stride] = r * scale;
  }
}


// o_m[0, d) (+)= sum_{j in [j0, j0 + KB)} p_m[j] · vj[0, d) for m < n_m (query heads sharing
// one KV head); vj = v + j·v_stride. Key-major: the KB rows are read once each, in order (they
// sit a page apart per head, so walking them one head-chunk at a time would defeat the hardware
// prefetchers), and each o chunk is loaded and stored once per KB keys.
template <int KB>
inline void pv_keys(const float* const* p, int64_t n_m, const float* v, int64_t v_stride, int64_t j0,
                    int64_t d, float* const* o, bool accumulate) {
  const float* vr[KB];
#pragma GCC unroll 8
  for (int u = 0; u < KB; ++u) vr[u] = v + (j0 + u) * v_stride;
  for (int64_t m = 0; m < n_m; ++m) {
    __m256 pb[KB];
#pragma GCC unroll 8
    for (int u = 0; u < KB; ++u) pb[u] = _mm256_broadcast_ss(p[m] + j0 + u);
    float* om = o[m];
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
      __m256 acc = accumulate ? _mm256_loadu_ps(om + c) : _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int u = 0; u < KB; ++u) acc = _mm256_fmadd_ps(pb[u], _mm256_loadu_ps(vr[u] + c), acc);
      _mm256_storeu_ps(om + c, acc);
    }
    for (; c < d; ++c) {
      float a = accumulate ? om[c] : 0.0f;
#pragma GCC unroll 8
      for (int u = 0; u < KB; ++u) a += p[m][j0 + u] * vr[u][c];
      om[c] = a;
    }
  }
}

// o_m[c, c + 8·NV) (+)= sum_{j in [j0, j1)} p_m[j] · v(j)[c, c + 8·NV) for m < MR heads;
// v(j) = v + j·v_stride. A small GEMM tile (P[MR, keys] · V[keys, 8·NV]): MR·NV independent
// accumulators, per key NV loads of V, MR broadcasts of P.
template <int MR, int NV>
inline void pv_tile(const float* const* p, const float* v, int64_t v_stride, int64_t j0,
                    int64_t j1, int64_t c, float* const* o, bool accumulate) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u)
      acc[m][u] = accumulate ? _mm256_loadu_ps(o[m] + c + 8 * u) : _mm256_setzero_ps();
  for (int64_t j = j0; j < j1; ++j) {
    const float* vj = v + j * v_stride + c;
    __m256 vv[NV];
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) vv[u] = _mm256_loadu_ps(vj + 8 * u);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m256 pm = _mm256_broadcast_ss(p[m] + j);
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) acc[m][u] = _mm256_fmadd_ps(pm, vv[u], acc[m][u]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) _mm256_storeu_ps(o[m] + c + 8 * u, acc[m][u]);
}

template <int MR>
void pv_heads(const float* const* p, const float* v, int64_t v_stride, int64_t j0, int64_t j1,
              int64_t d, float* const* o, bool accumulate) {
  int64_t c = 0;
  for (; c + 16 <= d; c += 16) pv_tile<MR, 2>(p, v, v_stride, j0, j1, c, o, accumulate);
  if (c + 8 <= d) {
    pv_tile<MR, 1>(p, v, v_stride, j0, j1, c, o, accumulate);
    c += 8;
  }
  for (; c < d; ++c)
    for (int m = 0; m < MR; ++m) {
      float a = accumulate ? o[m][c] : 0.0f;
      for (int64_t j = j0; j < j1; ++j) a += p[m][j] * v[j * v_stride + c];
      o[m][c] = a;
    }
}

}  // namespace

void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out) {
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t n_kv_heads = k.dim(1);
  const int64_t n_group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * d;  // floats between consecutive keys of one head
  const float* qp = q.f32();
  const float* kp = k.f32();
  const float* vp = v.f32();
  float* op = out.f32();
  const int nt = threads();
  // A task is one query × a block of KV heads, walked key by key across its heads, so each key's
  // row [n_kv_heads, d] (4 KiB for M2, one page) is read as one contiguous piece instead of once
  // per head. Few queries (decode) -> split the heads so every thread has a task; many queries
  // (prefill) -> all heads in one task. The per-head arithmetic is the same either way.
  const int64_t n_hblocks = std::min(n_kv_heads, (nt + n_q - 1) / n_q);
  const int64_t hb = (n_kv_heads + n_hblocks - 1) / n_hblocks;
  const int64_t n_tasks = n_q * ((n_kv_heads + hb - 1) / hb);
  // Multiply-adds, roughly: below ~64k a parallel region costs more than it saves.
  const int64_t work = n_q * n_heads * (pos0 + (n_q + 1) / 2) * d * 2;
  const bool par = n_tasks > 1 && work >= (int64_t(1) << 16);

  // Costs grow with i (causal), so hand out tasks dynamically; results do not depend on it.
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (par)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t n_tb = (n_kv_heads + hb - 1) / hb;
    const int64_t i = task / n_tb;
    const int64_t kh0 = (task % n_tb) * hb, kh1 = std::min(n_kv_heads, kh0 + hb);
    const int64_t n_keys = pos0 + i + 1;
    const int64_t n_rows = (kh1 - kh0) * n_group;  // query heads in this task
    float* scores = scratch(0, size_t(n_rows * n_keys));  // [n_rows][n_keys]
    float* inv_sum = scratch(1, size_t(n_rows));          // [n_rows]
    const float* qi = qp + (i * n_heads + kh0 * n_group) * d;  // [n_rows, d]
    float* oi = op + (i * n_heads + kh0 * n_group) * d;        // [n_rows, d]

    // 1. scores, key by key over all heads of the block
    for (int64_t j = 0; j < n_keys; ++j) {
      for (int64_t kvh = kh0; kvh < kh1; ++kvh) {
        const float* kj = kp + j * kv_stride + kvh * d;
        const int64_t r0 = (kvh - kh0) * n_group;
        for (int64_t g0 = 0; g0 < n_group; g0 += kGroup) {
          const int gb = int(std::min<int64_t>(kGroup, n_group - g0));
          const float* qg[kGroup];
          for (int g = 0; g < gb; ++g) qg[g] = qi + (r0 + g0 + g) * d;
          float* s = scores + (r0 + g0) * n_keys + j;
          switch (gb) {
            case 4: score_dots<4>(qg, kj, d, scale, s, n_keys); break;
            case 3: score_dots<3>(qg, kj, d, scale, s, n_keys); break;
            case 2: score_dots<2>(qg, kj, d, scale, s, n_keys); break;
            default: score_dots<1>(qg, kj, d, scale, s, n_keys); break;
          }
        }
      }
    }

    // 2. softmax, one row per query head
    for (int64_t r = 0; r < n_rows; ++r) inv_sum[r] = softmax_inplace(scores + r * n_keys, n_keys);

    // 3. weighted sum of V. Both walks below do, for every output element, the same sequential
    // FMA chain over j (partials parked in `out` between steps), so they give identical bits;
    // only the memory order differs.
    const float* p[kMaxGroup];
    float* o[kMaxGroup];
    auto heads_of = [&](int64_t kvh, int64_t g0, int64_t n_m) {
      const int64_t r0 = (kvh - kh0) * n_group;
      for (int64_t m = 0; m < n_m; ++m) {
        p[m] = scores + (r0 + g0 + m) * n_keys;
        o[m] = oi + (r0 + g0 + m) * d;
      }
    };
    if (n_keys * kv_stride * int64_t(sizeof(float)) > kKeyMajorBytes) {
      // V streamed from DRAM: key-major, each key's row read once, in address order.
      for (int64_t j0 = 0; j0 < n_keys; j0 += kPvKeys) {
        const int kb = int(std::min<int64_t>(kPvKeys, n_keys - j0));
        for (int64_t kvh = kh0; kvh < kh1; ++kvh)
          for (int64_t g0 = 0; g0 < n_group; g0 += kMaxGroup) {
            const int64_t n_m = std::min<int64_t>(kMaxGroup, n_group - g0);
            heads_of(kvh, g0, n_m);
            const float* vb = vp + kvh * d;
            if (kb == kPvKeys) pv_keys<kPvKeys>(p, n_m, vb, kv_stride, j0, d, o, j0 > 0);
            else
              for (int u = 0; u < kb; ++u) pv_keys<1>(p, n_m, vb, kv_stride, j0 + u, d, o, j0 + u > 0);
          }
      }
    } else {
      // V cache-resident: register-tiled P·V over blocks of kKeyBlock keys.
      for (int64_t j0 = 0; j0 < n_keys; j0 += kKeyBlock) {
        const int64_t j1 = std::min(n_keys, j0 + kKeyBlock);
        for (int64_t kvh = kh0; kvh < kh1; ++kvh)
          for (int64_t g0 = 0; g0 < n_group; g0 += kPvHeads) {
            const int mr = int(std::min<int64_t>(kPvHeads, n_group - g0));
            heads_of(kvh, g0, mr);
            const float* vb = vp + kvh * d;
            switch (mr) {
              case 6: pv_heads<6>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
              case 5: pv_heads<5>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
              case 4: pv_heads<4>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
              case 3: pv_heads<3>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
              case 2: pv_heads<2>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
              default: pv_heads<1>(p, vb, kv_stride, j0, j1, d, o, j0 > 0); break;
            }
          }
      }
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      float* o = oi + r * d;
      const __m256 iv = _mm256_set1_ps(inv_sum[r]);
      int64_t c = 0;
      for (; c + 8 <= d; c += 8) _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), iv));
      for (; c < d; ++c) o[c] *= inv_sum[r];
    }
  }
}

}  // namespace mmx::ops::cpu
