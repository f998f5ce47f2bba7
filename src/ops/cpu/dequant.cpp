// Storage dtype -> f32 conversion ops: linear_dequant_rows, to_f32, embedding, and the
// dequant_row_segment helper the GEMM packs its tiles with.
//
// Not here: the fused convert-and-dot of the GEMV (gemv.cpp), which never materializes f32 rows.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/qblocks.h"
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

// One GGUF block -> out[0, dtype_block(t)) (layouts and formulas: base/qblocks.h).
void dequant_block(DType t, const uint8_t* blk, float* out) {
  switch (t) {
    case DType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
      const float d = f16_to_f32_scalar(b->d);
      for (int j = 0; j < 32; ++j) out[j] = d * float(b->qs[j]);
      return;
    }
    case DType::kQ4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
      const float d = f16_to_f32_scalar(b->d);
      for (int j = 0; j < 16; ++j) {
        out[j] = d * float((b->qs[j] & 15) - 8);
        out[j + 16] = d * float((b->qs[j] >> 4) - 8);
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const auto* b4 = reinterpret_cast<const BlockQ4K*>(blk);
      const auto* b5 = reinterpret_cast<const BlockQ5K*>(blk);
      const float d = f16_to_f32_scalar(five ? b5->d : b4->d);
      const float dmin = f16_to_f32_scalar(five ? b5->dmin : b4->dmin);
      const uint8_t* scales = five ? b5->scales : b4->scales;
      const uint8_t* qs = five ? b5->qs : b4->qs;
      for (int c = 0; c < 4; ++c) {
        uint8_t sc0, m0, sc1, m1;
        scale_min_k4(scales, 2 * c, &sc0, &m0);
        scale_min_k4(scales, 2 * c + 1, &sc1, &m1);
        const float d0 = d * sc0, n0 = dmin * m0, d1 = d * sc1, n1 = dmin * m1;
        for (int l = 0; l < 32; ++l) {
          int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
          if (five) {
            lo += ((b5->qh[l] >> (2 * c)) & 1) << 4;
            hi += ((b5->qh[l] >> (2 * c + 1)) & 1) << 4;
          }
          out[64 * c + l] = d0 * float(lo) - n0;
          out[64 * c + 32 + l] = d1 * float(hi) - n1;
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const auto* b = reinterpret_cast<const BlockQ6K*>(blk);
      const float d = f16_to_f32_scalar(b->d);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b->ql + 64 * h;
        const uint8_t* qh = b->qh + 32 * h;
        float* y = out + 128 * h;
        const int8_t* sc = b->scales + 8 * h;
        for (int l = 0; l < 32; ++l) {
          const int q0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          const int s = l / 16;
          y[l] = d * float(sc[s]) * float(q0);
          y[l + 32] = d * float(sc[s + 2]) * float(q1);
          y[l + 64] = d * float(sc[s + 4]) * float(q2);
          y[l + 96] = d * float(sc[s + 6]) * float(q3);
        }
      }
      return;
    }
    default: MMX_CHECK(false, "dequant_block: {} is not block-quantized", dtype_name(t));
  }
}

// Elements [k0, k1) of a block-quantized row -> out[0, k1 - k0).
void quant_span(DType t, const uint8_t* row, int64_t k0, int64_t k1, float* out) {
  const int64_t B = dtype_block(t);
  const size_t bb = dtype_block_bytes(t);
  alignas(32) float tmp[kQkBlock];
  for (int64_t k = k0; k < k1;) {
    const int64_t blk = k / B, end = std::min(k1, (blk + 1) * B);
    if (k == blk * B && end == (blk + 1) * B) {
      dequant_block(t, row + size_t(blk) * bb, out + (k - k0));  // whole block: no copy
    } else {
      dequant_block(t, row + size_t(blk) * bb, tmp);
      std::memcpy(out + (k - k0), tmp + (k - blk * B), size_t(end - k) * sizeof(float));
    }
    k = end;
  }
}

}  // namespace

void dequant_row_segment(const Linear& w, int64_t o, int64_t k0, int64_t k1, float* out) {
  const int64_t n_in = w.n_in();
  if (dtype_is_quant(w.w.dtype)) {
    const auto* row = static_cast<const uint8_t*>(w.w.data) + size_t(o) * dtype_row_bytes(w.w.dtype, n_in);
    quant_span(w.w.dtype, row, k0, k1, out);
    return;
  }
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
  if (dtype_is_quant(table.dtype)) {
    const size_t rb = dtype_row_bytes(table.dtype, d);
    for (int64_t t = 0; t < n; ++t)
      quant_span(table.dtype, static_cast<const uint8_t*>(table.data) + size_t(id[t]) * rb, 0, d, o + t * d);
    return;
  }
  for (int64_t t = 0; t < n; ++t) convert_span(table.dtype, table.data, int64_t(id[t]) * d, d, o + t * d);
}

}  // namespace mmx::ops::cpu
