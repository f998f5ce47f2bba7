// Fast lightning attention (spec §3.5; contract in ops.h): linear attention with a per-head
// exponential decay λ_h = exp(-s_h) and an fp32 state S_h [d_k, d_v] carried across calls.
//
// Two evaluations of the same recurrence, both in fp32, one head per OpenMP task (the split is
// over heads only, so every output and state element is computed by one thread in a fixed order
// and the result is bitwise independent of the thread count):
//
//   * decode (block <= 1 or n == 1): token by token,
//       S ← λ·S + kᵀ⊗v;   o = q·S
//     vectorized over the v dimension (columns of S), 32 columns per register pass; O(d²) per
//     token and head whatever the context length. λ is applied as λ_hi + λ_lo (two floats,
//     λ_hi = fp32(λ), λ_lo = fp32(λ - λ_hi)): a single fp32 λ is off by up to 2^-25 relative,
//     and that bias compounds to t·2^-25 in λ^t — 2e-3 after 64k tokens on the last layers,
//     where λ^t is still ~0.5. With the split, only the per-step product rounding remains.
//
//   * blockwise prefill (block > 1): for each block of m <= block tokens (the last one may be
//     partial), with Q, K, V: [m, d] the block's rows and the decay table λ^a, a = 0..m:
//       P = (Q·Kᵀ) ⊙ M,          M[i][j] = λ^(i-j) for j <= i, else 0      [m × m]  intra
//       O = P·V + (Q ⊙ λ^(i+1))·S_prev                                       [m × d]
//       S = λ^m·S_prev + (K ⊙ λ^(m-1-j))ᵀ·V                                  [d × d]
//     i.e. four small GEMMs per head and block (m×d·d×m, m×m·m×d, m×d·d×d, d×m·m×d), done by
//     one AVX2 register-tiled micro-kernel (kTileM rows × 16 columns) on padded scratch copies.
//     Only the causal triangle of Q·Kᵀ and P·V is computed (to tile granularity).
//
// Decay factors are computed as exp(-s·a) in double for a >= 0 and stored as float: they lie in
// [0, 1], may underflow to 0 for large s·a (then that term simply vanishes), and nothing ever
// computes λ^-a, so no Inf/NaN can arise from the decay.
//
// Blocks longer than kMaxBlock are evaluated as blocks of kMaxBlock: the same math (any block
// length gives the recurrence up to rounding, ops.h), with the m×m scratch bounded (a whole
// 100k-token prompt as one block would need 40 GB for P).
//
// Not here: argument checks (check.cpp), the fp64 oracle (ref/lightning.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/cpu.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kTileM = 6;             // micro-kernel rows (6 × 2 vectors = 12 accumulators)
constexpr int64_t kTileN = 16;        // micro-kernel columns (2 AVX2 vectors)
constexpr int64_t kMaxBlock = 1024;   // longest block evaluated at once (see header)

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// ---------------------------------------------------------------------------------------------
// Decode: one token of the recurrence for one head.
//   s: [d, d] row-major (row i = k channel i, column j = v channel j), updated in place;
//   q, k, v: [d]; o: [d] written.
// Columns [j0, j0 + 8·NV) in registers: v and o stay in registers while the d rows of S stream.
// λ as an unevaluated sum of two floats, hi + lo (see the header).
struct Decay {
  float hi, lo;
  explicit Decay(double lambda) : hi(float(lambda)), lo(float(lambda - double(float(lambda)))) {}
};

template <int NV>
inline void decode_cols(int64_t d, int64_t j0, Decay lambda, const float* q, const float* k,
                        const float* v, float* s, float* o) {
  const __m256 lam_hi = _mm256_set1_ps(lambda.hi), lam_lo = _mm256_set1_ps(lambda.lo);
  __m256 vv[NV], oo[NV];
  for (int u = 0; u < NV; ++u) {
    vv[u] = _mm256_loadu_ps(v + j0 + 8 * u);
    oo[u] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < d; ++i) {
    const __m256 kb = _mm256_set1_ps(k[i]), qb = _mm256_set1_ps(q[i]);
    float* row = s + i * d + j0;
    for (int u = 0; u < NV; ++u) {
      // s_ij ← fma(k_i, v_j, fma(λ_hi, s_ij, λ_lo·s_ij));  o_j ← fma(q_i, s_ij, o_j)
      const __m256 s0 = _mm256_loadu_ps(row + 8 * u);
      const __m256 sv = _mm256_fmadd_ps(kb, vv[u], _mm256_fmadd_ps(lam_hi, s0, _mm256_mul_ps(lam_lo, s0)));
      _mm256_storeu_ps(row + 8 * u, sv);
      oo[u] = _mm256_fmadd_ps(qb, sv, oo[u]);
    }
  }
  for (int u = 0; u < NV; ++u) _mm256_storeu_ps(o + j0 + 8 * u, oo[u]);
}

// Scalar twin for the d % 8 last columns (same operations, so a column's value does not depend
// on whether it landed in a vector or in the tail).
inline void decode_col_scalar(int64_t d, int64_t j, Decay lambda, const float* q, const float* k,
                              const float* v, float* s, float* o) {
  float acc = 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    float& sij = s[i * d + j];
    sij = std::fma(k[i], v[j], std::fma(lambda.hi, sij, lambda.lo * sij));
    acc = std::fma(q[i], sij, acc);
  }
  o[j] = acc;
}

void decode_token(int64_t d, Decay lambda, const float* q, const float* k, const float* v, float* s,
                  float* o) {
  int64_t j = 0;
  for (; j + 32 <= d; j += 32) decode_cols<4>(d, j, lambda, q, k, v, s, o);
  for (; j + 8 <= d; j += 8) decode_cols<1>(d, j, lambda, q, k, v, s, o);
  for (; j < d; ++j) decode_col_scalar(d, j, lambda, q, k, v, s, o);
}

// ---------------------------------------------------------------------------------------------
// Prefill GEMM micro-kernel:
//   C[R × 16] = beta·C + A[R × K]·B[K × 16]
//   A: row stride lda; B: row stride ldb (16 contiguous columns); C: row stride ldc.
//   beta == 0: C is only written (it may hold garbage).
template <int R>
inline void micro(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc, float beta) {
  __m256 c0[R], c1[R];
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * lda + k);
      c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
    }
  }
  if (beta != 0.0f) {
    const __m256 bb = _mm256_set1_ps(beta);
    for (int r = 0; r < R; ++r) {
      c0[r] = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c + r * ldc), c0[r]);
      c1[r] = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c + r * ldc + 8), c1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, c0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
  }
}

// Calls f(std::integral_constant<int, R>, i0) for row tiles [i0, i0 + R) covering [0, M):
// full tiles of kTileM rows, then one tile of the remaining 1..kTileM-1 rows.
template <class F>
inline void for_row_tiles(int64_t M, F&& f) {
  int64_t i = 0;
  for (; i + kTileM <= M; i += kTileM) f(std::integral_constant<int, kTileM>{}, i);
  switch (M - i) {
    case 5: f(std::integral_constant<int, 5>{}, i); break;
    case 4: f(std::integral_constant<int, 4>{}, i); break;
    case 3: f(std::integral_constant<int, 3>{}, i); break;
    case 2: f(std::integral_constant<int, 2>{}, i); break;
    case 1: f(std::integral_constant<int, 1>{}, i); break;
    default: break;
  }
}

// C[M × N] = beta·C + A[M × K]·B[K × N], N a multiple of 16.
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, float beta) {
  for (int64_t n0 = 0; n0 < N; n0 += kTileN)
    for_row_tiles(M, [&](auto R, int64_t i0) {
      micro<decltype(R)::value>(K, a + i0 * lda, lda, b + n0, ldb, c + i0 * ldc + n0, ldc, beta);
    });
}

// Per-thread scratch for one head's blockwise evaluation. Dimensions padded to 16 columns with
// zeros, so the micro-kernel never needs a column tail:
//   dp = round_up(d, 16), mb = block length (<= kMaxBlock), mp = round_up(mb, 16).
struct BlockScratch {
  float* q;    // [mb, dp]   Q, then Q ⊙ λ^(i+1)
  float* kt;   // [dp, mp]   Kᵀ, then (K ⊙ λ^(m-1-j))ᵀ
  float* v;    // [mb, dp]   V
  float* p;    // [mb, mp]   (Q·Kᵀ) ⊙ M
  float* o;    // [mb, dp]   output rows
  float* s;    // [dp, dp]   the state
  float* dec;  // [mb + 1]   λ^a, a = 0..m

  static size_t floats(int64_t mb, int64_t dp) {
    const int64_t mp = round_up(mb, kTileN);
    return size_t(3 * mb * dp + dp * mp + mb * mp + dp * dp + round_up(mb + 1, kTileN));
  }
  BlockScratch(float* base, int64_t mb, int64_t dp) {
    const int64_t mp = round_up(mb, kTileN);
    q = base;
    kt = q + mb * dp;
    v = kt + dp * mp;
    p = v + mb * dp;
    o = p + mb * mp;
    s = o + mb * dp;
    dec = s + dp * dp;
  }
};

// One block of m tokens of head h starting at token t0: reads qkv rows, updates bs.s, writes out.
//   qkv: [n, n_heads, 3, d]; out: [n, n_heads, d].
void prefill_block(const float* qkv, float* out, int64_t n_heads, int64_t d, int64_t h, int64_t t0,
                   int64_t m, double slope, BlockScratch& bs) {
  const int64_t dp = round_up(d, kTileN), mp = round_up(m, kTileN);

  // Gather the block's rows into padded scratch: Q, V [m, dp]; Kᵀ [dp, mp] (zero padding).
  for (int64_t c = d; c < dp; ++c) std::fill(bs.kt + c * mp, bs.kt + (c + 1) * mp, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const float* src = qkv + ((t0 + i) * n_heads + h) * 3 * d;  // q, then k, then v
    float* qi = bs.q + i * dp;
    float* vi = bs.v + i * dp;
    std::copy(src, src + d, qi);
    std::fill(qi + d, qi + dp, 0.0f);
    for (int64_t c = 0; c < d; ++c) bs.kt[c * mp + i] = src[d + c];
    std::copy(src + 2 * d, src + 3 * d, vi);
    std::fill(vi + d, vi + dp, 0.0f);
  }
  for (int64_t c = 0; c < d; ++c) std::fill(bs.kt + c * mp + m, bs.kt + (c + 1) * mp, 0.0f);

  // λ^a = exp(-s·a), a = 0..m, in double, stored as float (<= 1; may underflow to 0).
  for (int64_t a = 0; a <= m; ++a) bs.dec[a] = float(std::exp(-slope * double(a)));
  const float* dec = bs.dec;

  // Intra, step 1: P = (Q·Kᵀ) ⊙ M over the causal triangle. Row tile [i0, i0 + R) needs the
  // columns j < i0 + R; P[i][j] for j > i (up to the tile's padded width) is set to 0.
  for_row_tiles(m, [&](auto R, int64_t i0) {
    constexpr int r = decltype(R)::value;
    const int64_t n_cols = round_up(std::min(i0 + r, m), kTileN);
    for (int64_t n0 = 0; n0 < n_cols; n0 += kTileN)
      micro<r>(dp, bs.q + i0 * dp, dp, bs.kt + n0, mp, bs.p + i0 * mp + n0, mp, 0.0f);
    for (int64_t i = i0; i < i0 + r; ++i) {
      float* pi = bs.p + i * mp;
      for (int64_t j = 0; j <= i; ++j) pi[j] *= dec[i - j];
      std::fill(pi + i + 1, pi + n_cols, 0.0f);
    }
  });

  // Q ⊙ λ^(i+1) (inter-block query) and (K ⊙ λ^(m-1-j))ᵀ (state update keys), in place.
  for (int64_t i = 0; i < m; ++i) {
    const float f = dec[i + 1];
    for (int64_t c = 0; c < d; ++c) bs.q[i * dp + c] *= f;
  }
  for (int64_t c = 0; c < d; ++c)
    for (int64_t j = 0; j < m; ++j) bs.kt[c * mp + j] *= dec[m - 1 - j];

  // O = P·V (row tile [i0, i0 + R) reads keys j < i0 + R) + (Q ⊙ λ^(i+1))·S_prev.
  for_row_tiles(m, [&](auto R, int64_t i0) {
    constexpr int r = decltype(R)::value;
    const int64_t n_keys = std::min(i0 + r, m);
    for (int64_t n0 = 0; n0 < dp; n0 += kTileN) {
      float* c = bs.o + i0 * dp + n0;
      micro<r>(n_keys, bs.p + i0 * mp, mp, bs.v + n0, dp, c, dp, 0.0f);
      micro<r>(dp, bs.q + i0 * dp, dp, bs.s + n0, dp, c, dp, 1.0f);
    }
  });

  // S = λ^m·S_prev + (K ⊙ λ^(m-1-j))ᵀ·V.   [dp × m]·[m × dp]
  gemm(dp, dp, m, bs.kt, mp, bs.v, dp, bs.s, dp, dec[m]);

  for (int64_t i = 0; i < m; ++i)
    std::copy(bs.o + i * dp, bs.o + i * dp + d, out + ((t0 + i) * n_heads + h) * d);
}

}  // namespace

void lightning_attention(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
                         Tensor& out) {
  const int64_t n = qkv.dim(0), n_heads = qkv.dim(1), d = qkv.dim(3);
  const float* x = qkv.f32();
  float* y = out.f32();

  if (block <= 1 || n == 1) {
    // Decode: the recurrence, token by token, directly on the state tensor.
#pragma omp parallel for schedule(static) num_threads(threads())
    for (int64_t h = 0; h < n_heads; ++h) {
      const Decay lambda(std::exp(-double(slopes.f32()[h])));
      float* s = state.f32() + h * d * d;
      for (int64_t t = 0; t < n; ++t) {
        const float* q = x + (t * n_heads + h) * 3 * d;
        decode_token(d, lambda, q, q + d, q + 2 * d, s, y + (t * n_heads + h) * d);
      }
    }
    return;
  }

  const int64_t mb = std::min<int64_t>({int64_t(block), kMaxBlock, n});
  const int64_t dp = round_up(d, kTileN);
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t h = 0; h < n_heads; ++h) {
    BlockScratch bs(scratch(0, BlockScratch::floats(mb, dp)), mb, dp);
    // The state in padded form [dp, dp] (zero padding) for the whole sequence of blocks.
    float* sh = state.f32() + h * d * d;
    for (int64_t i = 0; i < dp; ++i)
      for (int64_t j = 0; j < dp; ++j) bs.s[i * dp + j] = (i < d && j < d) ? sh[i * d + j] : 0.0f;
    const double slope = double(slopes.f32()[h]);
    for (int64_t t0 = 0; t0 < n; t0 += mb)
      prefill_block(x, y, n_heads, d, h, t0, std::min(mb, n - t0), slope, bs);
    for (int64_t i = 0; i < d; ++i) std::copy(bs.s + i * dp, bs.s + i * dp + d, sh + i * d);
  }
}

}  // namespace mmx::ops::cpu
