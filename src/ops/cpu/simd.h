// Private AVX2/FMA/F16C helpers for the CPU ops: storage-dtype -> f32 conversion, horizontal
// sums, a vector expf. Header-only and inline; included only by src/ops/cpu/*.cpp, the
// training kernels (src/train/kernels.cpp, for exp) and the sampler's vocabulary passes
// (src/engine/sampler.cpp).
//
// Not here: anything with a shape, threading, or AVX-512 (the floor is AVX2 + FMA + F16C).
//
// fp8 e4m3fn decoding trick: for a byte b, the fp16 bit pattern ((b & 0x7f) << 7) | ((b & 0x80) << 8)
// equals e4m3(b) · 2^-8 exactly (normals and subnormals: both formats place the mantissa's top
// bits in the same spot and the exponent biases differ by 8). So 16 bytes become 16 floats with
// one sign-extend, one shift, one mask and two vcvtph2ps; callers fold the 2^8 into the block
// scale (kF8Unscale). NaN codes 0x7f/0xff are NOT special-cased: they decode as ±480 (the fp16
// pattern is an ordinary normal number). Checkpoint weights never contain them.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

namespace mmx::ops::cpu {

// e4m3 value = decoded fp16 value · kF8Unscale.
inline constexpr float kF8Unscale = 256.0f;

// ---- fp8 e4m3fn ----
// 16 fp8 bytes -> two 8-float vectors holding e4m3 · 2^-8.
inline void f8x16_to_f32_unscaled(const uint8_t* p, __m256* lo, __m256* hi) {
  // Sign-extend each byte to 16 bits (bits 15..7 = sign, 6..0 = eeeemmm), shift left by 7 so
  // eeeemmm lands in bits 13..7 and the sign in bits 15 and 14, then clear bit 14.
  const __m256i sx = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(sx, 7), _mm256_set1_epi16(int16_t(0xbfff)));
  *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// 8 fp8 bytes -> 8 floats holding e4m3 · 2^-8.
inline __m256 f8x8_to_f32_unscaled(const uint8_t* p) {
  const __m128i sx = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i h = _mm_and_si128(_mm_slli_epi16(sx, 7), _mm_set1_epi16(int16_t(0xbfff)));
  return _mm256_cvtph_ps(h);
}

// Scalar twin of the above (same NaN behaviour, so vector bodies and scalar tails agree).
inline float f8_to_f32_unscaled(uint8_t b) {
  const uint16_t h = uint16_t(((b & 0x7fu) << 7) | ((b & 0x80u) << 8));
  return _cvtsh_ss(h);
}

// ---- bf16 / f16 ----
inline __m256 bf16x8_to_f32(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float bf16_to_f32_scalar(uint16_t h) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(int(uint32_t(h) << 16))));
}
inline __m256 f16x8_to_f32(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float f16_to_f32_scalar(uint16_t h) { return _cvtsh_ss(h); }

// ---- page rows (paged attention, MSA): F32 or BF16 values, widened to fp32 exactly ----
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return bf16x8_to_f32(p); }
inline float load1(float x) { return x; }
inline float load1(uint16_t h) { return bf16_to_f32_scalar(h); }

// [Σ a0, Σ a1, Σ a2, Σ a3] (the same hadd tree for every slot, so a dot's bits do not depend on
// the slot it lands in).
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// In-register 8x8 transpose of 32-bit elements (bit patterns only: float shuffles on any data).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// ---- reductions ----
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- exp ----
// expf for 8 lanes, Cephes-style: 2^n · p(r), r = x - n·ln2 in [-ln2/2, ln2/2], degree-6
// polynomial; max rel. error ~2 ulp on [-87, 88]. Inputs are clamped to [-87.3, 88]: below it
// returns ~0 (exp(-87.3) = 1.2e-38), above it returns exp(88) instead of inf.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// Scalar expf with the same polynomial (for loop tails, so a value does not depend on whether it
// landed in a vector body or a tail).
inline float exp_scalar(float x) {
  alignas(32) float v[8] = {x};
  _mm256_store_ps(v, exp_ps(_mm256_load_ps(v)));
  return v[0];
}

// p[0, n) = exp(p - max p) in place; returns 1 / Σ p (fixed summation order).
inline float softmax_inplace(float* p, int64_t n) {
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

// Mask with the first n (0..8) lanes set, for masked loads/stores of tails.
inline __m256i tail_mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

}  // namespace mmx::ops::cpu
