// Fast lightning attention (spec §3.5; contract in ops.h): linear attention with a per-head
// exponential decay λ_h = exp(-s_h) and an fp32 state S_h [d_k, d_v] carried across calls.
//
// Two evaluations of the same recurrence, both in fp32, with the heads split over the OpenMP
// threads and nothing else (decode: one head per loop iteration; blockwise: a contiguous head
// range per thread), so every output and state element is computed by one thread in a fixed
// order and the result is bitwise independent of the thread count:
//
//   * decode (block <= 1 or n == 1): token by token,
//       S ← λ·S + kᵀ⊗v;   o = q·S
//     vectorized over the v dimension (columns of S), streaming S row by row; O(d²) per token
//     and head whatever the context length. λ is applied as λ_hi + λ_lo (two floats,
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
//     one AVX2 register-tiled micro-kernel (kTileM rows × 16 columns) on padded scratch copies
//     (V and S packed in 16-column panels; see BlockScratch).
//     Only the causal triangle of Q·Kᵀ and P·V is computed (to tile granularity).
//
// Decay factors are computed as exp(-s·a) in double for a >= 0 and stored as float: they lie in
// [0, 1], may underflow to 0 for large s·a (then that term simply vanishes), and nothing ever
// computes λ^-a, so no Inf/NaN can arise from the decay. Factors below 2^-100 are stored as 0:
// their terms are ~2^-76 below the fp32 rounding of the terms they are summed with, and it keeps
// subnormal operands (slow on some x86 cores without FTZ/DAZ) out of the GEMMs.
//
// Blocks longer than kMaxBlock are evaluated as blocks of kMaxBlock: the same math (any block
// length gives the recurrence up to rounding, ops.h), with the m×m scratch bounded (a whole
// 100k-token prompt as one block would need 40 GB for P).
//
// Not here: argument checks (check.cpp), the fp64 oracle (ref/lightning.cpp).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/cpu.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kTileM = 6;             // micro-kernel rows (6 × 2 vectors = 12 accumulators)
constexpr int64_t kTileN = 16;        // micro-kernel columns (2 AVX2 vectors)
constexpr int64_t kMaxBlock = 1024;   // longest block evaluated at once (see header)
constexpr int64_t kPrefetch = 4;      // tokens ahead that the gather prefetches
constexpr double kMinDecay = 0x1p-100;  // smaller decay factors are flushed to 0 (see header)

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// ---------------------------------------------------------------------------------------------
// Decode: one token of the recurrence for one head.
//   s: [d, d] row-major (row i = k channel i, column j = v channel j), updated in place;
//   q, k, v: [d]; o: [d] written.
// Row by row, so the state streams once, sequentially (it is cold in a real decode step: 4 MiB
// per layer, evicted by the other layers); o accumulates in place (L1) over the rows:
//   s_ij ← fma(k_i, v_j, fma(λ_hi, s_ij, λ_lo·s_ij));   o_j ← fma(q_i, s_ij, o_j)
// The d % 8 last columns take the scalar twin of the same operations.

// λ as an unevaluated sum of two floats, hi + lo (see the header).
struct Decay {
  float hi, lo;
  explicit Decay(double lambda) : hi(float(lambda)), lo(float(lambda - double(float(lambda)))) {}
};

void decode_token(int64_t d, Decay lambda, const float* q, const float* k, const float* v, float* s,
                  float* o) {
  const __m256 lam_hi = _mm256_set1_ps(lambda.hi), lam_lo = _mm256_set1_ps(lambda.lo);
  const int64_t d8 = d / 8 * 8;
  std::fill(o, o + d, 0.0f);
  for (int64_t i = 0; i < d; ++i) {
    const __m256 kb = _mm256_set1_ps(k[i]), qb = _mm256_set1_ps(q[i]);
    float* row = s + i * d;
    for (int64_t j = 0; j < d8; j += 8) {
      const __m256 s0 = _mm256_loadu_ps(row + j);
      const __m256 s1 = _mm256_fmadd_ps(kb, _mm256_loadu_ps(v + j),
                                        _mm256_fmadd_ps(lam_hi, s0, _mm256_mul_ps(lam_lo, s0)));
      _mm256_storeu_ps(row + j, s1);
      _mm256_storeu_ps(o + j, _mm256_fmadd_ps(qb, s1, _mm256_loadu_ps(o + j)));
    }
    for (int64_t j = d8; j < d; ++j) {
      row[j] = std::fma(k[i], v[j], std::fma(lambda.hi, row[j], lambda.lo * row[j]));
      o[j] = std::fma(q[i], row[j], o[j]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Prefill GEMM micro-kernels on an R × 16 tile of C held in 2·R AVX2 registers:
//   A: [R × K], row stride lda;  B: [K × 16], row stride ldb;  C: row stride ldc.

// c0/c1 (columns 0-7 / 8-15 of each row) += A·B.
template <int R>
inline void mac(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, __m256 (&c0)[R],
                __m256 (&c1)[R]) {
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * lda + k);
      c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
    }
  }
}

template <int R>
inline void store_tile(float* c, int64_t ldc, const __m256 (&c0)[R], const __m256 (&c1)[R]) {
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, c0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
  }
}

// C = beta·C + A·B; beta == 0: C is only written (it may hold garbage).
template <int R>
inline void micro(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc, float beta) {
  __m256 c0[R], c1[R];
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  mac<R>(K, a, lda, b, ldb, c0, c1);
  if (beta != 0.0f) {
    const __m256 bb = _mm256_set1_ps(beta);
    for (int r = 0; r < R; ++r) {
      c0[r] = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c + r * ldc), c0[r]);
      c1[r] = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c + r * ldc + 8), c1[r]);
    }
  }
  store_tile<R>(c, ldc, c0, c1);
}

// C = A1·B1 + A2·B2 (one accumulation, C written once).
template <int R>
inline void micro2(int64_t k1, const float* a1, int64_t lda1, const float* b1, int64_t ldb1,
                   int64_t k2, const float* a2, int64_t lda2, const float* b2, int64_t ldb2, float* c,
                   int64_t ldc) {
  __m256 c0[R], c1[R];
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  mac<R>(k1, a1, lda1, b1, ldb1, c0, c1);
  mac<R>(k2, a2, lda2, b2, ldb2, c0, c1);
  store_tile<R>(c, ldc, c0, c1);
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

// Per-thread scratch for one head's blockwise evaluation, dp = round_up(d, 16),
// mb = block length (<= kMaxBlock), mp = round_up(m, 16) for the current block. V and S, the
// B operands of the d-wide products, are stored as column panels of 16: panel p = columns
// [16p, 16p + 16) as [rows][16] contiguous, so a panel streams sequentially (a row-major
// [·, 128] operand walks 512-byte strides that alias to a few L1 sets). Kᵀ is row-major with a
// row stride of mp + 16 floats (never a multiple of 1 KiB) so that it serves both as the B
// operand of Q·Kᵀ (16-key column slices) and as the A operand of the state update.
// Padding rows/columns are zero. ~0.65 MiB for d = 128, block 256.
struct BlockScratch {
  float* q;    // [mb, dp]                Q, then Q ⊙ λ^(i+1)                  (A operand)
  float* kt;   // [dp, mp + 16]           Kᵀ, then (K ⊙ λ^(m-1-j))ᵀ            (B, then A)
  float* vp;   // [dp/16 panels][mb][16]  V (B of P·V and of the state update)
  float* p;    // [mb, mp]                (Q·Kᵀ) ⊙ M                           (A operand)
  float* o;    // [mb, dp]                output rows, only when d % 16 != 0
  float* sp;   // [dp/16 panels][dp][16]  the current head's state (B of the inter term; C of
               //                         its update), set by the caller
  float* dec;  // [mb + 1]                λ^a, a = 0..m
  float* rdec; // [mp]                    λ^(m-1-j), j = 0..m-1 (0 for padding keys)

  static size_t floats(int64_t mb, int64_t dp) {
    const int64_t mp = round_up(mb, kTileN);
    return size_t(3 * mb * dp + dp * (mp + kTileN) + mb * mp + round_up(mb + 1, kTileN) + mp);
  }
  BlockScratch(float* base, int64_t mb, int64_t dp) {
    const int64_t mp = round_up(mb, kTileN);
    q = base;
    kt = q + mb * dp;
    vp = kt + dp * (mp + kTileN);
    p = vp + mb * dp;
    o = p + mb * mp;
    sp = nullptr;
    dec = o + mb * dp;
    rdec = dec + round_up(mb + 1, kTileN);
  }
};

// Element (row, col) of a panel-stored matrix with `rows` rows.
inline int64_t panel_at(int64_t rows, int64_t row, int64_t col) {
  return (col / kTileN) * rows * kTileN + row * kTileN + col % kTileN;
}

// One block of m tokens of head h starting at token t0: reads qkv rows, updates bs.sp, writes
// out.  qkv: [n, n_heads, 3, d]; out: [n, n_heads, d]; mb: the scratch's block capacity.
void prefill_block(const float* qkv, float* out, int64_t n_heads, int64_t d, int64_t h, int64_t t0,
                   int64_t m, int64_t mb, double slope, BlockScratch& bs) {
  const int64_t dp = round_up(d, kTileN), mp = round_up(m, kTileN), ldk = mp + kTileN;

  // Gather the block's rows: Q [m, dp] row-major, Kᵀ [dp, ldk], V into panels (zero padding;
  // Kᵀ also zero for the key columns m..mp-1, whose scores the mask discards).
  std::fill(bs.kt, bs.kt + dp * ldk, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const float* src = qkv + ((t0 + i) * n_heads + h) * 3 * d;  // q, then k, then v
    // This head's rows are n_heads·3·d floats apart, too far for the hardware prefetcher.
    if (i + kPrefetch < m)
      for (int64_t c = 0; c < 3 * d; c += 16)
        _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetch * n_heads * 3 * d + c), _MM_HINT_T0);
    float* qi = bs.q + i * dp;
    std::copy(src, src + d, qi);
    std::fill(qi + d, qi + dp, 0.0f);
    for (int64_t c = 0; c < d; ++c) bs.kt[c * ldk + i] = src[d + c];
    for (int64_t c0 = 0; c0 < dp; c0 += kTileN) {  // row i of V: 16 floats per panel
      float* vrow = bs.vp + panel_at(mb, i, c0);
      const int64_t len = std::clamp<int64_t>(d - c0, 0, kTileN);
      std::copy(src + 2 * d + c0, src + 2 * d + c0 + len, vrow);
      std::fill(vrow + len, vrow + kTileN, 0.0f);
    }
  }

  // λ^a = exp(-s·a), a = 0..m, in double, stored as float (<= 1; 0 below kMinDecay).
  for (int64_t a = 0; a <= m; ++a) {
    const double f = std::exp(-slope * double(a));
    bs.dec[a] = f < kMinDecay ? 0.0f : float(f);
  }
  const float* dec = bs.dec;

  // Intra, step 1: P = (Q·Kᵀ) ⊙ M over the causal triangle. Key-slice-major (one 16-key slice
  // of Kᵀ stays in L1 while the row tiles that need it pass): row tile [i0, i0 + R) needs the
  // keys j < i0 + R, so slice n0 is computed for the tiles with i0 + R > n0.
  for (int64_t n0 = 0; n0 < mp; n0 += kTileN)
    for_row_tiles(m, [&](auto R, int64_t i0) {
      constexpr int r = decltype(R)::value;
      if (i0 + r > n0)
        micro<r>(dp, bs.q + i0 * dp, dp, bs.kt + n0, ldk, bs.p + i0 * mp + n0, mp, 0.0f);
    });
  // Decay mask: P[i][j] *= λ^(i-j) for j <= i; 0 for the keys i < j < end of i's row tile,
  // which the tile's P·V below reads.
  for (int64_t i = 0; i < m; ++i) {
    float* pi = bs.p + i * mp;
    for (int64_t j = 0; j <= i; ++j) pi[j] *= dec[i - j];
    std::fill(pi + i + 1, pi + std::min(i / kTileM * kTileM + kTileM, m), 0.0f);
  }

  // Q ⊙ λ^(i+1) (inter-block query) and (K ⊙ λ^(m-1-j))ᵀ (state-update keys), in place.
  for (int64_t i = 0; i < m; ++i) {
    const float f = dec[i + 1];
    for (int64_t c = 0; c < d; ++c) bs.q[i * dp + c] *= f;
  }
  float* rdec = bs.rdec;  // [mp]: λ^(m-1-j) for j < m, 0 for the padding keys
  for (int64_t j = 0; j < mp; ++j) rdec[j] = j < m ? dec[m - 1 - j] : 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    float* kc = bs.kt + c * ldk;
    for (int64_t j = 0; j < mp; ++j) kc[j] *= rdec[j];
  }

  // O = P·V (row tile [i0, i0 + R) reads keys j < i0 + R) + (Q ⊙ λ^(i+1))·S_prev in one
  // accumulation, panel-major: the 16-column panels of V and S (24 KiB for d = 128, block 256)
  // stay in L1 over the rows. Written straight into `out` when d is a multiple of 16.
  const bool direct = d == dp;
  float* o = direct ? out + (t0 * n_heads + h) * d : bs.o;
  const int64_t ldo = direct ? n_heads * d : dp;
  for (int64_t n0 = 0; n0 < dp; n0 += kTileN)
    for_row_tiles(m, [&](auto R, int64_t i0) {
      constexpr int r = decltype(R)::value;
      micro2<r>(std::min(i0 + r, m), bs.p + i0 * mp, mp, bs.vp + n0 * mb, kTileN,  //
                dp, bs.q + i0 * dp, dp, bs.sp + n0 * dp, kTileN, o + i0 * ldo + n0, ldo);
    });

  // S = λ^m·S_prev + (K ⊙ λ^(m-1-j))ᵀ·V, panel by panel.   [dp × m]·[m × 16] per panel
  for (int64_t n0 = 0; n0 < dp; n0 += kTileN)
    for_row_tiles(dp, [&](auto R, int64_t i0) {
      micro<decltype(R)::value>(m, bs.kt + i0 * ldk, ldk, bs.vp + n0 * mb, kTileN,
                                bs.sp + n0 * dp + i0 * kTileN, kTileN, dec[m]);
    });

  if (!direct)
    for (int64_t i = 0; i < m; ++i)
      std::copy(bs.o + i * dp, bs.o + i * dp + d, out + ((t0 + i) * n_heads + h) * d);
}

}  // namespace

void attention_lightning(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
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

  // Blockwise. Each thread owns a fixed range of heads (so the result does not depend on the
  // thread count) and walks blocks outer, heads inner: consecutive heads' rows of a token are
  // adjacent in qkv and out, so the strided gathers share pages and DRAM rows. The range's
  // states live in panel form (zero padding) in scratch for the whole call.
  const int64_t mb = std::min<int64_t>({int64_t(block), kMaxBlock, n});
  const int64_t dp = round_up(d, kTileN);
#pragma omp parallel num_threads(threads())
  {
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t h0 = n_heads * id / nt, h1 = n_heads * (id + 1) / nt;
    if (h0 < h1) {
      BlockScratch bs(scratch(0, BlockScratch::floats(mb, dp)), mb, dp);
      float* states = scratch(1, size_t((h1 - h0) * dp * dp));  // [h1 - h0] × panels of [dp, dp]
      for (int64_t h = h0; h < h1; ++h) {
        const float* sh = state.f32() + h * d * d;
        float* sp = states + (h - h0) * dp * dp;
        for (int64_t i = 0; i < dp; ++i)
          for (int64_t j = 0; j < dp; ++j) sp[panel_at(dp, i, j)] = (i < d && j < d) ? sh[i * d + j] : 0.0f;
      }
      for (int64_t t0 = 0; t0 < n; t0 += mb)
        for (int64_t h = h0; h < h1; ++h) {
          bs.sp = states + (h - h0) * dp * dp;
          prefill_block(x, y, n_heads, d, h, t0, std::min(mb, n - t0), mb, double(slopes.f32()[h]), bs);
        }
      for (int64_t h = h0; h < h1; ++h) {
        float* sh = state.f32() + h * d * d;
        const float* sp = states + (h - h0) * dp * dp;
        for (int64_t i = 0; i < d; ++i)
          for (int64_t j = 0; j < d; ++j) sh[i * d + j] = sp[panel_at(dp, i, j)];
      }
    }
  }
}

}  // namespace mmx::ops::cpu
