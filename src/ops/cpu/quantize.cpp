// F32 -> storage dtype: ops::quantize, the encoder of every GGUF block type (layouts and decoding
// formulas: base/qblocks.h) plus F16 and BF16 (round to nearest even), so a converter has one call
// for every target type. One row is encoded by one thread, blocks left to right; nothing depends on
// the thread count.
//
// Algorithms, per block (all scales are stored as fp16 bits, RNE):
//   Q8_0  amax = max |x|, d = amax / 127, id = 1/d (0 when d is 0), q = roundf(x · id) (halves away
//         from zero); the fp16 of d is stored.
//   Q4_0  m = the signed x of largest magnitude (the first one on ties), d = m / -8, id = 1/d
//         (0 when d is 0), q = min(15, trunc(x · id + 8.5)) with x · id rounded to f32 before the
//         add; so m itself gets level 0, the value -8·d.
//         These two are llama.cpp's reference rules (quantize_row_q8_0_ref / q4_0_ref): for finite
//         input the bytes are bit-identical to what llama-quantize writes for Q8_0 / Q4_0. (Where
//         1/d overflows, a nonzero block with amax below ~1e-37, llama.cpp's float -> int cast is
//         undefined; here id is 0 and the block decodes to zeros.)
//   Q4_K, Q5_K (levels 0..nmax, nmax = 15 / 31), 8 sub-blocks of 32, each fit as x ≈ s·l - m with
//         s >= 0, m >= 0 (the grid's bottom -m is clamped to <= 0, so a sub-block whose values are all
//         positive gets m = 0). Weighted least squares with w_i = rms(x) + |x_i|: the |x_i| term
//         favours the large-magnitude values (they move a matmul's output most), the rms floor keeps
//         the small ones from being ignored, and since every w_i >= rms no single element's error can
//         exceed sqrt(2n) times the worst error of the min/max grid (quantize_test.cpp derives the
//         bound; x^2 weights would give no such bound, uniform ones ignore the large values). The search
//         starts from the min/max grid (s = (max - lo)/nmax, m = -lo); then for 21 candidate inverse
//         scales (nmax - 1 + 0.1 k) / (max + m), k = 0..20, it rounds the levels of x + m, solves the
//         2x2 normal equations for (s, -m) given those levels (m clamped to 0, s refit, if the
//         solution has a positive offset), and keeps the pair with the smallest weighted squared
//         error; m is the best pair's so far, so each accepted fit re-anchors the next candidates'
//         grid (on outlier sub-blocks this finds fits with half the error of a fixed grid at lo). Then
//         the super-block scales d = max s / 63 and dmin = max m / 63 go to fp16, each sub-block's
//         s and m to 6 bits as round(s / d), round(m / dmin) (against the fp16 values, so the stored
//         scale is the nearest one that can be decoded), and the levels are recomputed as
//         clamp(round((x + dmin·m6) / (d·s6)), 0, nmax) with the quantized scales.
//   Q6_K  16 sub-blocks of 16, each fit as x ≈ s·l with a signed s and l in -32..31: the signed x of
//         largest magnitude, mx, sets the candidates 1/s = -(32 + 0.1 k) / mx, k = -9..9 (k = 0 maps
//         mx to -32, the side of the range that has the extra level); per candidate the levels are
//         rounded and s is the weighted least-squares scale for them (same weights as above); the
//         candidate with the smallest weighted error wins. The 16 scales go to int8 against
//         d = -smax / 128 (smax: the signed scale of largest magnitude, which so lands on -128, the
//         full int8 range), sc = clamp(round(s / d), -128, 127), and the levels are recomputed as
//         clamp(round(x / (d·sc)), -32, 31).
//   A block of zeros gives zero scales and decodes to exact zeros. No input makes the code divide by
//   zero or cast an out-of-range float to an integer: every float -> int goes through a clamp that
//   also maps NaN. Non-finite inputs give unspecified blocks (the converter validates finiteness).
//
// Not here: decoding (cpu/dequant.cpp, ref/matmul.cpp), argument checks (check.cpp), the
// activation quantizer of the int8 GEMV (cpu/qgemv.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

// v (already integral, or truncated here) as an int in [lo, hi]; NaN -> lo.
inline int clamp_int(float v, int lo, int hi) {
  if (v >= float(hi)) return hi;
  return v > float(lo) ? int(v) : lo;
}
// Round to nearest even, clamped.
inline int round_clamp(float v, int lo, int hi) { return clamp_int(std::nearbyint(v), lo, hi); }

// 1/d, or 0 where d is 0 or 1/d is not finite.
inline float inv_or_zero(float d) {
  if (d == 0.0f) return 0.0f;
  const float r = 1.0f / d;
  return std::isfinite(r) ? r : 0.0f;
}

// a·b rounded to f32 on its own: the empty asm hides the product from -ffp-contract, which would
// otherwise fuse it with a following add into one FMA (one rounding instead of llama.cpp's two).
inline float mul_rounded(float a, float b) {
  float p = a * b;
  asm("" : "+x"(p));
  return p;
}

void q8_0_block(const float* x, BlockQ8_0* b) {  // x: [32]
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = inv_or_zero(d);
  b->d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) b->qs[j] = int8_t(clamp_int(std::round(x[j] * id), -127, 127));
}

void q4_0_block(const float* x, BlockQ4_0* b) {  // x: [32]
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), m = x[j];
  const float d = m / -8.0f;
  const float id = inv_or_zero(d);
  b->d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const int lo = clamp_int(mul_rounded(x[j], id) + 8.5f, 0, 15);
    const int hi = clamp_int(mul_rounded(x[j + 16], id) + 8.5f, 0, 15);
    b->qs[j] = uint8_t(lo | (hi << 4));
  }
}

// Lanes of v rounded to nearest even, then clamped to [lo, hi]; NaN -> lo (maxps returns its
// second operand when one is NaN).
inline __m256 round_clamp8(__m256 v, __m256 lo, __m256 hi) {
  const __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_min_ps(_mm256_max_ps(r, lo), hi);
}

// The fit weights w_i = rms(x) + |x_i| of x[0, 8V), as V vectors (and x as V vectors).
template <int V>
void load_weighted(const float* x, __m256* xv, __m256* wv) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 s2 = _mm256_setzero_ps();
  for (int c = 0; c < V; ++c) {
    xv[c] = _mm256_loadu_ps(x + 8 * c);
    s2 = _mm256_fmadd_ps(xv[c], xv[c], s2);
  }
  const __m256 rms = _mm256_set1_ps(std::sqrt(hsum(s2) / float(8 * V)));
  for (int c = 0; c < V; ++c) wv[c] = _mm256_add_ps(rms, _mm256_andnot_ps(sign, xv[c]));
}

// Q4_K / Q5_K sub-block: x[0, 32) ≈ s·l - m, l in 0..nmax, s >= 0, m >= 0 (see the header).
void fit_scale_min(const float* x, int nmax, float* s_out, float* m_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.0f);
  if (!(hi > lo)) {  // constant and <= 0 (or NaN): levels 0, value -m
    *s_out = 0.0f;
    *m_out = -lo;
    return;
  }
  __m256 xv[4], wv[4], l[4];
  load_weighted<4>(x, xv, wv);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(float(nmax));
  __m256 acc_w = zero, acc_wx = zero;
  for (int c = 0; c < 4; ++c) acc_w = _mm256_add_ps(acc_w, wv[c]), acc_wx = _mm256_fmadd_ps(wv[c], xv[c], acc_wx);
  const float sw = hsum(acc_w), swx = hsum(acc_wx), range = hi - lo;
  auto levels = [&](float iscale, float origin) {  // l = clamp(round(iscale·(x - origin)), 0, nmax)
    const __m256 is = _mm256_set1_ps(iscale), org = _mm256_set1_ps(origin);
    for (int c = 0; c < 4; ++c) l[c] = round_clamp8(_mm256_mul_ps(is, _mm256_sub_ps(xv[c], org)), zero, top);
  };
  auto error = [&](float s, float off) {  // sum w·(s·l + off - x)^2
    const __m256 vs = _mm256_set1_ps(s), voff = _mm256_set1_ps(off);
    __m256 e = zero;
    for (int c = 0; c < 4; ++c) {
      const __m256 diff = _mm256_fmadd_ps(vs, l[c], _mm256_sub_ps(voff, xv[c]));
      e = _mm256_fmadd_ps(_mm256_mul_ps(wv[c], diff), diff, e);
    }
    return hsum(e);
  };
  levels(float(nmax) / range, lo);
  float best_s = range / float(nmax), best_off = lo, best = error(best_s, best_off);
  for (int k = 0; k <= 20 && hi > best_off; ++k) {
    levels((float(nmax) - 1.0f + 0.1f * float(k)) / (hi - best_off), best_off);
    __m256 al = zero, all = zero, alx = zero;
    for (int c = 0; c < 4; ++c) {
      const __m256 wl = _mm256_mul_ps(wv[c], l[c]);
      al = _mm256_add_ps(al, wl), all = _mm256_fmadd_ps(wl, l[c], all), alx = _mm256_fmadd_ps(wl, xv[c], alx);
    }
    const float sl = hsum(al), sll = hsum(all), slx = hsum(alx);
    const float det = sw * sll - sl * sl;
    if (!(det > 0.0f)) continue;  // all levels equal
    float s = (sw * slx - sl * swx) / det, off = (sll * swx - sl * slx) / det;
    if (off > 0.0f) off = 0.0f, s = slx / sll;  // the format's offset is -m <= 0
    if (!(s > 0.0f)) continue;
    const float e = error(s, off);
    if (e < best) best = e, best_s = s, best_off = off;
  }
  *s_out = best_s;
  *m_out = -best_off;
}

// Q4_K (nmax 15) / Q5_K (nmax 31): x[0, 256) -> d, dmin, the packed 6-bit scales[12] and the
// levels L[256] in 0..nmax.
void k_scale_min_block(const float* x, int nmax, uint16_t* d, uint16_t* dmin, uint8_t* scales,
                       uint8_t* L) {
  float s[8], m[8], s_max = 0.0f, m_max = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fit_scale_min(x + 32 * j, nmax, &s[j], &m[j]);
    s_max = std::max(s_max, s[j]);
    m_max = std::max(m_max, m[j]);
  }
  *d = f32_to_f16(s_max / 63.0f);
  *dmin = f32_to_f16(m_max / 63.0f);
  const float df = f16_to_f32(*d), dmf = f16_to_f32(*dmin);
  const float idf = inv_or_zero(df), idmf = inv_or_zero(dmf);
  uint8_t s6[8], m6[8];
  for (int j = 0; j < 8; ++j) {
    s6[j] = uint8_t(round_clamp(s[j] * idf, 0, 63));
    m6[j] = uint8_t(round_clamp(m[j] * idmf, 0, 63));
  }
  pack_scale_min_k4(s6, m6, scales);
  for (int j = 0; j < 8; ++j) {
    const float ds = df * float(s6[j]), dm = dmf * float(m6[j]);  // both exact in f32
    uint8_t* l = L + 32 * j;
    if (!(ds > 0.0f)) {
      std::memset(l, 0, 32);
      continue;
    }
    for (int i = 0; i < 32; ++i) l[i] = uint8_t(round_clamp((x[32 * j + i] + dm) / ds, 0, nmax));
  }
}

void q4_k_block(const float* x, BlockQ4K* b) {  // x: [256]
  uint8_t L[256];
  k_scale_min_block(x, 15, &b->d, &b->dmin, b->scales, L);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b->qs[32 * c + l] = uint8_t(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

void q5_k_block(const float* x, BlockQ5K* b) {  // x: [256]
  uint8_t L[256];
  k_scale_min_block(x, 31, &b->d, &b->dmin, b->scales, L);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
      b->qs[32 * c + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
      b->qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
}

// Q6_K sub-block: the signed scale s of x[0, 16) ≈ s·l, l in -32..31 (see the header).
float fit_signed_scale(const float* x) {
  float amax = 0.0f, mx = 0.0f;
  for (int i = 0; i < 16; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), mx = x[i];
  if (amax == 0.0f || !std::isfinite(32.0f / mx)) return 0.0f;  // all zero, or too small to invert
  __m256 xv[2], wv[2];
  load_weighted<2>(x, xv, wv);
  const __m256 lo = _mm256_set1_ps(-32.0f), hi = _mm256_set1_ps(31.0f);
  float best_s = 0.0f, best_slx = 0.0f, best_sll = 0.0f;
  for (int k = -9; k <= 9; ++k) {
    const __m256 is = _mm256_set1_ps(-(32.0f + 0.1f * float(k)) / mx);
    __m256 alx = _mm256_setzero_ps(), all = _mm256_setzero_ps();
    for (int c = 0; c < 2; ++c) {
      const __m256 l = round_clamp8(_mm256_mul_ps(is, xv[c]), lo, hi);
      const __m256 wl = _mm256_mul_ps(wv[c], l);
      alx = _mm256_fmadd_ps(wl, xv[c], alx), all = _mm256_fmadd_ps(wl, l, all);
    }
    const float slx = hsum(alx), sll = hsum(all);
    // With s = slx / sll the weighted error is sum w x^2 - slx^2 / sll: keep the largest slx^2/sll.
    if (sll > 0.0f && (best_sll == 0.0f || slx * slx * best_sll > best_slx * best_slx * sll))
      best_s = slx / sll, best_slx = slx, best_sll = sll;
  }
  return best_s;
}

void q6_k_block(const float* x, BlockQ6K* b) {  // x: [256]
  float s[16], smax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    s[j] = fit_signed_scale(x + 16 * j);
    if (std::fabs(s[j]) > std::fabs(smax)) smax = s[j];
  }
  std::memset(b, 0, sizeof(*b));
  b->d = f32_to_f16(-smax / 128.0f);
  const float df = f16_to_f32(b->d), idf = inv_or_zero(df);
  if (idf == 0.0f) {  // a zero block, or one whose d is 0 or inf in fp16: all zeros
    b->d = 0;
    return;
  }
  int8_t L[256];  // levels - 32
  for (int j = 0; j < 16; ++j) {
    b->scales[j] = int8_t(round_clamp(s[j] * idf, -128, 127));
    const float ds = df * float(b->scales[j]);  // exact in f32
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = int8_t(ds != 0.0f ? round_clamp(x[16 * j + i] / ds, -32, 31) : 0);
  }
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int q0 = L[128 * h + l] + 32, q1 = L[128 * h + 32 + l] + 32;
      const int q2 = L[128 * h + 64 + l] + 32, q3 = L[128 * h + 96 + l] + 32;
      b->ql[64 * h + l] = uint8_t((q0 & 15) | ((q2 & 15) << 4));
      b->ql[64 * h + 32 + l] = uint8_t((q1 & 15) | ((q3 & 15) << 4));
      b->qh[32 * h + l] = uint8_t((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
}

// One row of n floats -> dtype t at dst.
void quantize_row(DType t, const float* x, int64_t n, uint8_t* dst) {
  const int64_t B = dtype_block(t);
  const size_t bb = dtype_block_bytes(t);
  switch (t) {
    case DType::kF16: {
      auto* o = reinterpret_cast<uint16_t*>(dst);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)  // vcvtps2ph, nearest even: f32_to_f16's bits (NaN payloads aside)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
      for (; i < n; ++i) o[i] = f32_to_f16(x[i]);
      return;
    }
    case DType::kBF16: {
      auto* o = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(x[i]);
      return;
    }
    default: break;
  }
  for (int64_t k = 0; k < n / B; ++k) {
    const float* xb = x + k * B;
    uint8_t* ob = dst + size_t(k) * bb;
    switch (t) {
      case DType::kQ8_0: q8_0_block(xb, reinterpret_cast<BlockQ8_0*>(ob)); break;
      case DType::kQ4_0: q4_0_block(xb, reinterpret_cast<BlockQ4_0*>(ob)); break;
      case DType::kQ4_K: q4_k_block(xb, reinterpret_cast<BlockQ4K*>(ob)); break;
      case DType::kQ5_K: q5_k_block(xb, reinterpret_cast<BlockQ5K*>(ob)); break;
      case DType::kQ6_K: q6_k_block(xb, reinterpret_cast<BlockQ6K*>(ob)); break;
      default: MMX_CHECK(false, "quantize: unsupported dtype {}", dtype_name(t));
    }
  }
}

}  // namespace

void quantize(const Tensor& x, Tensor& out) {  // x: [rows, n] F32; out: [rows, n] out.dtype
  const int64_t rows = x.rows(), n = x.dim(-1);
  const size_t row_bytes = dtype_row_bytes(out.dtype, n);
  const float* xp = x.f32();
  auto* op = static_cast<uint8_t*>(out.data);
  const bool par = rows > 1 && rows * n >= (int64_t(1) << 14);
#pragma omp parallel for schedule(static) num_threads(threads()) if (par)
  for (int64_t r = 0; r < rows; ++r) quantize_row(out.dtype, xp + r * n, n, op + size_t(r) * row_bytes);
}

}  // namespace mmx::ops::cpu
