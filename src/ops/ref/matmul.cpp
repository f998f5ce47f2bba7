// Reference matmul and weight dequantization: fp64, one element at a time, no SIMD, no threads.
// The scalar dtype conversions come from base/dtype.h (tested exhaustively in dtype_test), never
// from the fast paths' intrinsics, so ref and cpu share no numerics.
//
// Not here: anything fast. ref::matmul is O(n · n_out · n_in) scalar double work; keep test
// shapes modest.
#include <vector>

#include "base/qblocks.h"
#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

namespace {

// Element j (< block) of one GGUF block, decoded from its bits by the formulas of base/qblocks.h.
double quant_at(DType t, const uint8_t* blk, int64_t j) {
  switch (t) {
    case DType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
      return double(f16_to_f32(b->d)) * b->qs[j];
    }
    case DType::kQ4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
      const int q = j < 16 ? (b->qs[j] & 15) : (b->qs[j - 16] >> 4);
      return double(f16_to_f32(b->d)) * (q - 8);
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const auto* b4 = reinterpret_cast<const BlockQ4K*>(blk);
      const auto* b5 = reinterpret_cast<const BlockQ5K*>(blk);
      const uint16_t d = five ? b5->d : b4->d, dmin = five ? b5->dmin : b4->dmin;
      const uint8_t* scales = five ? b5->scales : b4->scales;
      const uint8_t* qs = five ? b5->qs : b4->qs;
      const int64_t c = j / 64, l = j % 32, s = j / 32;  // chunk of 64, lane, sub-block
      const bool high = (j % 64) >= 32;
      int q = high ? (qs[32 * c + l] >> 4) : (qs[32 * c + l] & 15);
      if (five && ((b5->qh[l] >> s) & 1)) q += 16;
      uint8_t sc, m;
      scale_min_k4(scales, int(s), &sc, &m);
      return double(f16_to_f32(d)) * sc * q - double(f16_to_f32(dmin)) * m;
    }
    case DType::kQ6_K: {
      const auto* b = reinterpret_cast<const BlockQ6K*>(blk);
      const int64_t h = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
      const uint8_t lo = b->ql[64 * h + (quarter & 1) * 32 + l];
      const int low4 = quarter < 2 ? (lo & 15) : (lo >> 4);
      const int high2 = (b->qh[32 * h + l] >> (2 * quarter)) & 3;
      return double(f16_to_f32(b->d)) * b->scales[j / 16] * ((low4 | (high2 << 4)) - 32);
    }
    default: MMX_CHECK(false, "quant_at: {} is not block-quantized", dtype_name(t));
  }
  return 0.0;
}

}  // namespace

double linear_at(const Linear& w, int64_t o, int64_t i) {
  if (dtype_is_quant(w.w.dtype)) {
    const int64_t b = dtype_block(w.w.dtype);
    const auto* row = static_cast<const uint8_t*>(w.w.data) + size_t(o) * dtype_row_bytes(w.w.dtype, w.n_in());
    return quant_at(w.w.dtype, row + size_t(i / b) * dtype_block_bytes(w.w.dtype), i % b);
  }
  const int64_t idx = o * w.n_in() + i;
  switch (w.w.dtype) {
    case DType::kF32: return w.w.ptr<float>()[idx];
    case DType::kF16: return f16_to_f32(w.w.ptr<uint16_t>()[idx]);
    case DType::kBF16: return bf16_to_f32(w.w.ptr<uint16_t>()[idx]);
    case DType::kF8E4M3: {
      // W[o, i] = fp8(w[o, i]) · scale[o / block_out, i / block_in]  (the scale multiplies)
      const double s = w.scale.ptr<float>()[(o / w.block_out) * w.scale.dim(1) + i / w.block_in];
      return double(f8e4m3_to_f32(w.w.ptr<uint8_t>()[idx])) * s;
    }
    default: MMX_CHECK(false, "linear_at: unsupported dtype {}", dtype_name(w.w.dtype));
  }
  return 0.0;
}

// y[t, o] = sum_i x[t, i] · W[o, i] (the fp64 oracle's linear, one decoded row of W at a time).
// x: [n, n_in]; y: [n, n_out].
void matmul(const Tensor& x, const Linear& w, Tensor& y) {
  check::matmul(x, w, y);
  const int64_t n = x.dim(0), n_in = w.n_in(), n_out = w.n_out();
  const std::vector<double> xd = widen(x.f32(), n * n_in);
  std::vector<double> row(static_cast<size_t>(n_in)), col(static_cast<size_t>(n));  // W[o, :]; y[:, o]
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) row[size_t(i)] = linear_at(w, o, i);
    f64::linear(xd.data(), row.data(), n, n_in, 1, col.data());
    for (int64_t t = 0; t < n; ++t) y.f32()[t * n_out + o] = float(col[size_t(t)]);
  }
}

}  // namespace mmx::ops::ref
