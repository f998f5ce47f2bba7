// Matmul for small n (decode GEMV and small expert batches, n < kGemmMinN): stream each weight
// row once per call, converting storage dtype -> f32 in registers and doing the dot products on
// the fly; never materializes f32 weights.
//
// A tile is R rows × T tokens (R·T <= 8 accumulators of 8 lanes, 4 for fp8): each converted weight vector is
// used for T tokens, each x vector for R rows. Threads split the output rows in fixed groups of
// kRows; within a group the tokens are walked in tiles of up to kGemvMaxT (cpu.h: gemv_tiles), so a group's weights come
// from DRAM once and from L1 afterwards. Every (row, token) value is the same fixed sequence of
// fp32 FMAs (8 lanes; fp8: one partial per scale block, folded in with its scale; then a
// horizontal sum) whatever the tiling, so y is bitwise independent of the thread count and of n
// (a token gives the same bits alone or in a batch of up to kGemmMinN - 1).
//
// Not here: large n (gemm.cpp packs dequantized tiles for an FMA microkernel instead).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kRows = kGemvRows;  // output rows per thread-level group (cpu.h: gemv_tiles)

// Converters: load 8 weights of a row as f32, or one scalar (fp8: times 2^-120, see F8Src).
struct F32Src {
  using T = float;
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static float load1(const T* p) { return *p; }
};
struct BF16Src {
  using T = uint16_t;
  static __m256 load8(const T* p) { return bf16x8_to_f32(p); }
  static float load1(const T* p) { return bf16_to_f32_scalar(*p); }
};
struct F16Src {
  using T = uint16_t;
  static __m256 load8(const T* p) { return f16x8_to_f32(p); }
  static float load1(const T* p) { return f16_to_f32_scalar(*p); }
};
// fp8 here skips vcvtph2ps (the bottleneck of simd.h's fp16 trick: ~10 vs ~14 weights/ns on
// Zen 3): the sign-extended byte shifted left by 20 and masked is the f32 bit pattern
// sign | 0000eeee | mmm0..0, i.e. w' = e4m3 · 2^-120 (subnormal codes become f32 subnormals,
// which scale the same way). x is pre-scaled by 2^64, so each product w'·x' is the fp8 value
// times x times 2^-56 (a normal number); a block's partial sum is then multiplied by its scale
// times 2^56. Exact powers of two throughout; |x| < 2^64 is assumed.
// Caveat: under DAZ (denormals-are-zero, e.g. a -ffast-math main), subnormal codes
// (|w| < 2^-6 in fp8 units, < 3.5e-5 of the block maximum) would read as 0. NaN codes decode as
// a finite number (weights never contain them).
constexpr int kF8XShift = 64;
constexpr float kF8XMul = 18446744073709551616.0f;     // 2^64
constexpr float kF8ScaleMul = 72057594037927936.0f;    // 2^(120 - kF8XShift) = 2^56
struct F8Src {
  using T = uint8_t;
  static __m256 cvt8(__m128i bytes) {
    const __m256i sx = _mm256_cvtepi8_epi32(bytes);
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(sx, 20), _mm256_set1_epi32(int32_t(0x87f00000u))));
  }
  static __m256 load8(const T* p) { return cvt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const T* p) {
    const uint32_t u = (uint32_t(int32_t(int8_t(*p))) << 20) & 0x87f00000u;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// a[r][t] (+ta[r][t] for the < 8 leftover k) += sum_{k in [k0, k1)} W[o0 + r, k] · x_t[k]
// (for fp8: the decoded w' = e4m3 · 2^-120, unscaled; see F8Src).
template <class Src, int R, int T>
inline void dot_span(const typename Src::T* const* rows, const float* const* x, int64_t k0,
                     int64_t k1, __m256 (*a)[T], float (*ta)[T],
                     int64_t pf_dist /* elements ahead to prefetch */) {
  constexpr int64_t kPerLine = 64 / int64_t(sizeof(typename Src::T));
  int64_t k = k0;
#pragma GCC unroll 2
  for (; k + 8 <= k1; k += 8) {
    // Rows are short streams (3 KiB for fp8 at n_in 3072) that the hardware prefetchers pick
    // up late; fetch the next row group (this thread's next work) one line per line consumed.
    // Measured single-thread on [6144, 3072] fp8: 5.8 -> 9 GB/s; bf16: 10 -> 12 GB/s.
    if ((k & (kPerLine - 1)) == 0)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k + pf_dist), _MM_HINT_T0);
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x[t] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = Src::load8(rows[r] + k);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) a[r][t] = _mm256_fmadd_ps(wv, xv[t], a[r][t]);
    }
  }
  for (; k < k1; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float wv = Src::load1(rows[r] + k);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) ta[r][t] += wv * x[t][k];
    }
}

// y[t0 + t, o0 + r] for r < R, t < T.  x: [n, n_in] (fp8: pre-scaled by 2^kF8XShift); y: [n, n_out].
template <class Src, int R, int T>
void tile_kernel(const Linear& w, int64_t o0, const float* x, int64_t t0, float* y) {
  const int64_t n_in = w.n_in(), n_out = w.n_out();
  const typename Src::T* rows[R];
  const float* xs[T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = w.w.ptr<typename Src::T>() + (o0 + r) * n_in;
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) xs[t] = x + (t0 + t) * n_in;
  __m256 acc[R][T];
  float tail[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps(), tail[r][t] = 0.0f;

  if constexpr (std::is_same_v<Src, F8Src>) {
    // One partial per block_in span, folded into acc with that block's scale · 2^56: cheaper
    // than scaling every weight vector (measured +30% weights/ns in cache).
    const int64_t n_sb = w.scale.dim(1);
    const float* srow[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) srow[r] = w.scale.ptr<float>() + ((o0 + r) / w.block_out) * n_sb;
    for (int64_t kb = 0; kb < n_sb; ++kb) {
      const int64_t k0 = kb * w.block_in, k1 = std::min<int64_t>(n_in, k0 + w.block_in);
      __m256 blk[R][T];
      float blk_tail[R][T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) blk[r][t] = _mm256_setzero_ps(), blk_tail[r][t] = 0.0f;
      dot_span<Src, R, T>(rows, xs, k0, k1, blk, blk_tail, kRows * n_in);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float s = srow[r][kb] * kF8ScaleMul;
        const __m256 sv = _mm256_set1_ps(s);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm256_fmadd_ps(blk[r][t], sv, acc[r][t]);
          tail[r][t] += blk_tail[r][t] * s;
        }
      }
    }
  } else {
    dot_span<Src, R, T>(rows, xs, 0, n_in, acc, tail, kRows * n_in);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[(t0 + t) * n_out + o0 + r] = hsum(acc[r][t]) + tail[r][t];
}

using TileFn = void (*)(const Linear&, int64_t, const float*, int64_t, float*);

// kTiles<Src>[R - 1][T - 1]; R·T <= 8 (fp8: 4, it also holds block partials) keeps the
// accumulators, x and w within the 16 ymm registers. kMaxRows<Src>[T - 1] picks R for T tokens.
template <class Src>
constexpr TileFn kTiles[4][4] = {
    {tile_kernel<Src, 1, 1>, tile_kernel<Src, 1, 2>, tile_kernel<Src, 1, 3>, tile_kernel<Src, 1, 4>},
    {tile_kernel<Src, 2, 1>, tile_kernel<Src, 2, 2>, tile_kernel<Src, 2, 3>, tile_kernel<Src, 2, 4>},
    {tile_kernel<Src, 3, 1>, tile_kernel<Src, 3, 2>, nullptr, nullptr},
    {tile_kernel<Src, 4, 1>, tile_kernel<Src, 4, 2>, nullptr, nullptr},
};

template <class Src>
constexpr int kMaxRows[4] = {4, 4, 2, 2};
template <>
constexpr int kMaxRows<F8Src>[4] = {4, 2, 1, 1};

template <class Src>
void gemv_typed(const Tensor& x, const Linear& w, Tensor& y) {
  const int64_t n = x.dim(0), n_out = w.n_out();
  const float* xp = x.f32();
  if constexpr (std::is_same_v<Src, F8Src>) {  // x · 2^kF8XShift (exact), shared by all threads
    const int64_t len = n * w.n_in();
    float* xs = scratch(2, size_t(len));
    for (int64_t i = 0; i < len; ++i) xs[i] = xp[i] * kF8XMul;
    xp = xs;
  }
  float* yp = y.f32();
  gemv_tiles(n, n_out, w.n_in(), kMaxRows<Src>, [&](int64_t o0, int rr, int64_t t0, int tt) {
    kTiles<Src>[rr - 1][tt - 1](w, o0, xp, t0, yp);
  });
}

}  // namespace

void gemv(const Tensor& x, const Linear& w, Tensor& y) {
  switch (w.w.dtype) {
    case DType::kF32: return gemv_typed<F32Src>(x, w, y);
    case DType::kBF16: return gemv_typed<BF16Src>(x, w, y);
    case DType::kF16: return gemv_typed<F16Src>(x, w, y);
    case DType::kF8E4M3: return gemv_typed<F8Src>(x, w, y);
    default: MMX_CHECK(false, "matmul: unsupported weight dtype {}", dtype_name(w.w.dtype));
  }
}

}  // namespace mmx::ops::cpu
