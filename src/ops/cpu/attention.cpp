// Fast causal GQA softmax attention over a contiguous KV cache (contract in ops.h).
//
// One task = (query i, KV head): the G = n_heads / n_kv_heads query heads that share the KV head
// are done together, so each K row and each V block is read once per task, not G times.
//   1. scores[g][j] = scale · q_g·k_j for the causal range j <= pos0 + i  (AVX2 dots);
//   2. two-pass softmax in fp32: max, then exp (vector polynomial) and a fixed-order sum;
//   3. out_g = (sum_j p_gj v_j) / sum_j p_gj, with V walked in blocks of kKeyBlock keys so a
//      block stays in L1 while all G heads and all head_dim chunks use it.
// Tasks are independent and each is done by one thread in a fixed order, so the output is
// bitwise independent of the thread count.
//
// Not here: paged KV (the cache is a contiguous [n_kv, n_kv_heads, head_dim] view), masks other
// than causal, online-softmax splitting of one query over threads.
#include <omp.h>

#include <algorithm>
#include <cfloat>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kGroup = 4;           // query heads per dot-product pass (accumulators in registers)
constexpr int64_t kKeyBlock = 64;   // keys per V block

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

// p[0, n) = exp(s - max s) in place; returns 1 / sum p.
float softmax_inplace(float* p, int64_t n) {
  __m256 mv = _mm256_set1_ps(-FLT_MAX);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(p + j));
  float m = hmax(mv);
  for (; j < n; ++j) m = std::max(m, p[j]);
  const __m256 mb = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p + j), mb));
    _mm256_storeu_ps(p + j, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = hsum(sv);
  for (; j < n; ++j) {
    p[j] = exp_scalar(p[j] - m);
    sum += p[j];
  }
  return 1.0f / sum;
}

// o[c, c + 8·NV) (+)= sum_{j in [j0, j1)} p[j] · v(j)[c, c + 8·NV); v(j) = v + j·v_stride.
template <int NV>
inline void pv_chunk(const float* p, const float* v, int64_t v_stride, int64_t j0, int64_t j1,
                     int64_t c, float* o, bool accumulate) {
  __m256 acc[NV];
  #pragma GCC unroll 8
  for (int u = 0; u < NV; ++u) acc[u] = accumulate ? _mm256_loadu_ps(o + c + 8 * u) : _mm256_setzero_ps();
  for (int64_t j = j0; j < j1; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const float* vj = v + j * v_stride + c;
    #pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) acc[u] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * u), acc[u]);
  }
  #pragma GCC unroll 8
  for (int u = 0; u < NV; ++u) _mm256_storeu_ps(o + c + 8 * u, acc[u]);
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
  const int64_t n_tasks = n_q * n_kv_heads;
  // Multiply-adds, roughly: below ~64k a parallel region costs more than it saves.
  const int64_t work = n_tasks * (pos0 + (n_q + 1) / 2) * n_group * d * 2;
  const bool par = n_tasks > 1 && work >= (int64_t(1) << 16);

  // Costs grow with i (causal), so hand out tasks dynamically; results do not depend on it.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads()) if (par)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t i = task / n_kv_heads, kvh = task % n_kv_heads;
    const int64_t n_keys = pos0 + i + 1;
    const int64_t h0 = kvh * n_group;
    const float* kbase = kp + kvh * d;
    const float* vbase = vp + kvh * d;
    float* scores = scratch(0, size_t(n_group * n_keys));  // [n_group][n_keys]

    // 1. scores
    for (int64_t g0 = 0; g0 < n_group; g0 += kGroup) {
      const int gb = int(std::min<int64_t>(kGroup, n_group - g0));
      const float* qg[kGroup];
      for (int g = 0; g < gb; ++g) qg[g] = qp + (i * n_heads + h0 + g0 + g) * d;
      float* s = scores + g0 * n_keys;
      for (int64_t j = 0; j < n_keys; ++j) {
        const float* kj = kbase + j * kv_stride;
        switch (gb) {
          case 4: score_dots<4>(qg, kj, d, scale, s + j, n_keys); break;
          case 3: score_dots<3>(qg, kj, d, scale, s + j, n_keys); break;
          case 2: score_dots<2>(qg, kj, d, scale, s + j, n_keys); break;
          default: score_dots<1>(qg, kj, d, scale, s + j, n_keys); break;
        }
      }
    }

    // 2. softmax
    float inv[64];
    float* inv_sum = n_group <= 64 ? inv : scratch(1, size_t(n_group));
    for (int64_t g = 0; g < n_group; ++g) inv_sum[g] = softmax_inplace(scores + g * n_keys, n_keys);

    // 3. weighted sum of V, block by block
    for (int64_t j0 = 0; j0 < n_keys; j0 += kKeyBlock) {
      const int64_t j1 = std::min(n_keys, j0 + kKeyBlock);
      const bool acc = j0 > 0;
      for (int64_t g = 0; g < n_group; ++g) {
        const float* p = scores + g * n_keys;
        float* o = op + (i * n_heads + h0 + g) * d;
        int64_t c = 0;
        for (; c + 32 <= d; c += 32) pv_chunk<4>(p, vbase, kv_stride, j0, j1, c, o, acc);
        for (; c + 8 <= d; c += 8) pv_chunk<1>(p, vbase, kv_stride, j0, j1, c, o, acc);
        for (; c < d; ++c) {
          float a = acc ? o[c] : 0.0f;
          for (int64_t j = j0; j < j1; ++j) a += p[j] * vbase[j * kv_stride + c];
          o[c] = a;
        }
      }
    }
    for (int64_t g = 0; g < n_group; ++g) {
      float* o = op + (i * n_heads + h0 + g) * d;
      const __m256 iv = _mm256_set1_ps(inv_sum[g]);
      int64_t c = 0;
      for (; c + 8 <= d; c += 8) _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), iv));
      for (; c < d; ++c) o[c] *= inv_sum[g];
    }
  }
}

}  // namespace mmx::ops::cpu
