// Reference matmul and weight dequantization: fp64, one element at a time, no SIMD, no threads.
// The scalar dtype conversions come from base/dtype.h (tested exhaustively in dtype_test), never
// from the fast paths' intrinsics, so ref and cpu share no numerics.
//
// Not here: anything fast. ref::matmul is O(n · n_out · n_in) scalar double work; keep test
// shapes modest.
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

double linear_at(const Linear& w, int64_t o, int64_t i) {
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

// y[t, o] = sum_i x[t, i] · W[o, i].  x: [n, n_in]; y: [n, n_out].
void matmul(const Tensor& x, const Linear& w, Tensor& y) {
  check::matmul(x, w, y);
  const int64_t n = x.dim(0), n_in = w.n_in(), n_out = w.n_out();
  std::vector<double> row(static_cast<size_t>(n_in));  // [n_in] = W[o, :]
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) row[size_t(i)] = linear_at(w, o, i);
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0.0;
      for (int64_t i = 0; i < n_in; ++i) acc += double(x.f32()[t * n_in + i]) * row[size_t(i)];
      y.f32()[t * n_out + o] = float(acc);
    }
  }
}

}  // namespace mmx::ops::ref
