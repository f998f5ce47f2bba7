// Matmul for small n (decode GEMV, n < kGemmMinN): stream each weight row once per call,
// converting storage dtype -> f32 in registers and doing the dot products on the fly.
//
// Threads split the output rows in fixed groups of kRows; each row's dot product is computed by
// one thread in a fixed order (8 f32 lanes, block partials folded with their scale, then a
// horizontal sum), so y is bitwise independent of the thread count. The n tokens are looped
// inside a row group, so the group's weights are read from DRAM once and from L1 for tokens 2..n.
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

constexpr int kRows = 4;  // output rows per group: x is loaded once per group

// Converters: load 16 / 8 weights at element i of a row as f32 (fp8: times 2^-8), or one scalar.
struct F32Src {
  using T = float;
  static void load16(const T* p, __m256* lo, __m256* hi) {
    *lo = _mm256_loadu_ps(p);
    *hi = _mm256_loadu_ps(p + 8);
  }
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static float load1(const T* p) { return *p; }
};
struct BF16Src {
  using T = uint16_t;
  static void load16(const T* p, __m256* lo, __m256* hi) {
    *lo = bf16x8_to_f32(p);
    *hi = bf16x8_to_f32(p + 8);
  }
  static __m256 load8(const T* p) { return bf16x8_to_f32(p); }
  static float load1(const T* p) { return bf16_to_f32_scalar(*p); }
};
struct F16Src {
  using T = uint16_t;
  static void load16(const T* p, __m256* lo, __m256* hi) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  static __m256 load8(const T* p) { return f16x8_to_f32(p); }
  static float load1(const T* p) { return f16_to_f32_scalar(*p); }
};
// fp8 here skips vcvtph2ps (the bottleneck of the fp16 trick: ~10 vs ~14 weights/ns on Zen 3):
// the sign-extended byte shifted left by 20 and masked is the f32 bit pattern
// sign | 0000eeee | mmm0..0, i.e. e4m3 · 2^-120 (subnormal codes become f32 subnormals, which
// scale the same way). Such tiny weights would make x·w underflow, so x is pre-scaled by
// 2^kF8XShift and the block scale by 2^(120 - kF8XShift); every product x·w is then the true
// product times 2^-56, a normal number, and rounds exactly as the unscaled one would.
// Caveat: under DAZ (denormals-are-zero, e.g. a -ffast-math main), subnormal codes
// (|w| < 2^-6 in fp8 units, < 3.5e-5 of the block maximum) would read as 0. NaN codes decode as
// a finite number (weights never contain them).
// (|x| < 2^64 and |scale| < 2^70 are assumed; activations and scales are many orders smaller.)
constexpr int kF8XShift = 64;
constexpr float kF8XMul = 18446744073709551616.0f;     // 2^64
constexpr float kF8ScaleMul = 72057594037927936.0f;    // 2^(120 - 64) = 2^56
struct F8Src {
  using T = uint8_t;
  static __m256 cvt8(__m128i bytes) {
    const __m256i sx = _mm256_cvtepi8_epi32(bytes);
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(sx, 20), _mm256_set1_epi32(int32_t(0x87f00000u))));
  }
  static void load16(const T* p, __m256* lo, __m256* hi) {
    *lo = cvt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    *hi = cvt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  }
  static __m256 load8(const T* p) { return cvt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const T* p) {
    const uint32_t u = (uint32_t(int32_t(int8_t(*p))) << 20) & 0x87f00000u;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// y[r] = sum_k W[o0 + r, k] · x[k] for r < R, over one segment [k0, k1) of the row, added into
// acc[r] (vector) and tail[r] (scalar, for the < 8 leftover elements).
template <class Src, int R>
inline void dot_segment(const typename Src::T* const* rows, const float* x, int64_t k0, int64_t k1,
                        __m256* acc, float* tail) {
  int64_t k = k0;
  for (; k + 16 <= k1; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 w0, w1;
      Src::load16(rows[r] + k, &w0, &w1);
      acc[r] = _mm256_fmadd_ps(w0, x0, acc[r]);
      acc[r] = _mm256_fmadd_ps(w1, x1, acc[r]);
    }
  }
  if (k + 8 <= k1) {
    const __m256 x0 = _mm256_loadu_ps(x + k);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(Src::load8(rows[r] + k), x0, acc[r]);
    k += 8;
  }
  for (; k < k1; ++k)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) tail[r] += Src::load1(rows[r] + k) * x[k];
}

// Rows [o0, o0 + R) of y = x · Wᵀ for the n tokens of x ([n, n_in]) into y ([n, n_out]).
template <class Src, int R>
void rows_kernel(const Linear& w, int64_t o0, const float* x, int64_t n, float* y) {
  const int64_t n_in = w.n_in(), n_out = w.n_out();
  const typename Src::T* rows[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = w.w.ptr<typename Src::T>() + (o0 + r) * n_in;
  constexpr bool kScaled = std::is_same_v<Src, F8Src>;

  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * n_in;
    float out[R];
    if constexpr (!kScaled) {
      __m256 acc[R];
      float tail[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), tail[r] = 0.0f;
      dot_segment<Src, R>(rows, xt, 0, n_in, acc, tail);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) + tail[r];
    } else {
      // One partial per block_in segment, folded into total with that block's scale · 2^8.
      const int64_t n_sb = w.scale.dim(1);
      const float* srow[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) srow[r] = w.scale.ptr<float>() + ((o0 + r) / w.block_out) * n_sb;
      __m256 total[R];
      float total_tail[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) total[r] = _mm256_setzero_ps(), total_tail[r] = 0.0f;
      for (int64_t kb = 0; kb < n_sb; ++kb) {
        const int64_t k0 = kb * w.block_in, k1 = std::min<int64_t>(n_in, k0 + w.block_in);
        __m256 acc[R];
        float tail[R];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), tail[r] = 0.0f;
        dot_segment<Src, R>(rows, xt, k0, k1, acc, tail);
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float s = srow[r][kb] * kF8ScaleMul;
          total[r] = _mm256_fmadd_ps(acc[r], _mm256_set1_ps(s), total[r]);
          total_tail[r] += tail[r] * s;
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) out[r] = hsum(total[r]) + total_tail[r];
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[t * n_out + o0 + r] = out[r];
  }
}

template <class Src>
void gemv_typed(const Tensor& x, const Linear& w, Tensor& y) {
  const int64_t n = x.dim(0), n_out = w.n_out();
  const int64_t n_groups = (n_out + kRows - 1) / kRows;
  const float* xp = x.f32();
  if constexpr (std::is_same_v<Src, F8Src>) {  // x · 2^kF8XShift (exact), shared by all threads
    const int64_t len = n * w.n_in();
    float* xs = scratch(2, size_t(len));
    for (int64_t i = 0; i < len; ++i) xs[i] = xp[i] * kF8XMul;
    xp = xs;
  }
  float* yp = y.f32();
  // Tiny outputs are not worth waking threads for (the router: 256 rows of 3072 f32 still are).
  const bool par = n_out * w.n_in() * n >= (int64_t(1) << 15);
#pragma omp parallel for schedule(static) num_threads(threads()) if (par)
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t o0 = g * kRows;
    switch (std::min<int64_t>(kRows, n_out - o0)) {
      case 4: rows_kernel<Src, 4>(w, o0, xp, n, yp); break;
      case 3: rows_kernel<Src, 3>(w, o0, xp, n, yp); break;
      case 2: rows_kernel<Src, 2>(w, o0, xp, n, yp); break;
      default: rows_kernel<Src, 1>(w, o0, xp, n, yp); break;
    }
  }
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
