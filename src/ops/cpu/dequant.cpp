// Storage dtype -> f32 conversion ops: linear_dequant_rows, to_f32, embedding, and the
// dequant_row_segment helper the GEMM packs its tiles with.
//
// Not here: the fused convert-and-dot of the GEMV (gemv.cpp), which never materializes f32 rows.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

// out[0, n) = mul · e4m3(p[i]) (mul = block scale; 1 for raw fp8).
void f8_span(const uint8_t* p, int64_t n, float mul, float* out) {
  const float s = mul * kF8Unscale;
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 lo, hi;
    f8x16_to_f32_unscaled(p + i, &lo, &hi);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(lo, sv));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(hi, sv));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(f8x8_to_f32_unscaled(p + i), sv));
  for (; i < n; ++i) out[i] = f8_to_f32_unscaled(p[i]) * s;
}

void bf16_span(const uint16_t* p, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, bf16x8_to_f32(p + i));
  for (; i < n; ++i) out[i] = bf16_to_f32_scalar(p[i]);
}

void f16_span(const uint16_t* p, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f16x8_to_f32(p + i));
  for (; i < n; ++i) out[i] = f16_to_f32_scalar(p[i]);
}

// Elements [i0, i0 + n) of a flat F32/F16/BF16/F8E4M3 (unscaled) array -> out[0, n).
void convert_span(DType t, const void* src, int64_t i0, int64_t n, float* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, static_cast<const float*>(src) + i0, size_t(n) * sizeof(float));
      return;
    case DType::kF16: return f16_span(static_cast<const uint16_t*>(src) + i0, n, out);
    case DType::kBF16: return bf16_span(static_cast<const uint16_t*>(src) + i0, n, out);
    case DType::kF8E4M3: return f8_span(static_cast<const uint8_t*>(src) + i0, n, 1.0f, out);
    default: MMX_CHECK(false, "convert_span: unsupported dtype {}", dtype_name(t));
  }
}

}  // namespace

void dequant_row_segment(const Linear& w, int64_t o, int64_t k0, int64_t k1, float* out) {
  const int64_t n_in = w.n_in();
  if (w.w.dtype != DType::kF8E4M3) {
    convert_span(w.w.dtype, w.w.data, o * n_in + k0, k1 - k0, out);
    return;
  }
  // Split [k0, k1) at block_in boundaries; each piece has one scale.
  const uint8_t* row = w.w.ptr<uint8_t>() + o * n_in;
  const float* srow = w.scale.ptr<float>() + (o / w.block_out) * w.scale.dim(1);
  for (int64_t k = k0; k < k1;) {
    const int64_t kb = k / w.block_in;
    const int64_t end = std::min<int64_t>(k1, (kb + 1) * w.block_in);
    f8_span(row + k, end - k, srow[kb], out + (k - k0));
    k = end;
  }
}

void linear_dequant_rows(const Linear& w, int64_t row0, Tensor& out) {
  const int64_t n_rows = out.dim(0), n_in = w.n_in();
  float* o = out.f32();
  const bool par = n_rows * n_in >= (int64_t(1) << 16);
#pragma omp parallel for schedule(static) num_threads(threads()) if (par)
  for (int64_t r = 0; r < n_rows; ++r) dequant_row_segment(w, row0 + r, 0, n_in, o + r * n_in);
}

void to_f32(const Tensor& x, Tensor& out) {
  constexpr int64_t kChunk = int64_t(1) << 16;
  const int64_t n = x.numel();
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  float* o = out.f32();
#pragma omp parallel for schedule(static) num_threads(threads()) if (n_chunks > 1)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t i0 = c * kChunk;
    const int64_t len = std::min(kChunk, n - i0);
    convert_span(x.dtype, x.data, i0, len, o + i0);
    if (x.dtype == DType::kF8E4M3) {
      // Unlike the matmul paths, a conversion op keeps NaN codes (0x7f, 0xff) NaN.
      const uint8_t* b = x.ptr<uint8_t>() + i0;
      for (int64_t i = 0; i < len; ++i)
        if ((b[i] & 0x7f) == 0x7f) o[i0 + i] = (b[i] & 0x80) ? -NAN : NAN;
    }
  }
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel(), d = table.dim(1);
  const int32_t* id = ids.ptr<int32_t>();
  float* o = out.f32();
  for (int64_t t = 0; t < n; ++t) convert_span(table.dtype, table.data, int64_t(id[t]) * d, d, o + t * d);
}

}  // namespace mmx::ops::cpu
