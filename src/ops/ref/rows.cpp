// Reference row movement: rows_gather, rows_scatter_add (fp64 accumulate, updates in index
// order), embedding (scalar dtype conversions from base/dtype.h).
// Not here: anything vectorized or threaded.
#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

// dst[i, :] = src[row_ids[i], :].  src: [n, d]; row_ids: [m]; dst: [m, d].
void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst) {
  check::rows_gather(src, row_ids, dst);
  const int64_t d = src.dim(1);
  for (int64_t i = 0; i < row_ids.numel(); ++i)
    for (int64_t c = 0; c < d; ++c)
      dst.f32()[i * d + c] = src.f32()[int64_t(row_ids.ptr<int32_t>()[i]) * d + c];
}

// dst[row_ids[i], :] += scale[i] · src[i, :], i in order.  src: [m, d]; dst: [n, d].
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst) {
  check::rows_scatter_add(src, row_ids, scale, dst);
  const int64_t d = src.dim(1);
  for (int64_t i = 0; i < row_ids.numel(); ++i) {
    float* dr = dst.f32() + int64_t(row_ids.ptr<int32_t>()[i]) * d;
    for (int64_t c = 0; c < d; ++c)
      dr[c] = float(double(dr[c]) + double(scale.f32()[i]) * double(src.f32()[i * d + c]));
  }
}

// out[t, :] = float(table[ids[t], :]).  table: [vocab, d] F32/F16/BF16; ids: [n]; out: [n, d].
void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  check::embedding(table, ids, out);
  const int64_t d = table.dim(1);
  if (dtype_is_quant(table.dtype)) {  // GGUF tables: decoded like a linear weight's rows
    Linear rows;
    rows.w = table;
    for (int64_t t = 0; t < ids.numel(); ++t)
      for (int64_t c = 0; c < d; ++c)
        out.f32()[t * d + c] = float(linear_at(rows, ids.ptr<int32_t>()[t], c));
    return;
  }
  for (int64_t t = 0; t < ids.numel(); ++t) {
    const int64_t base = int64_t(ids.ptr<int32_t>()[t]) * d;
    for (int64_t c = 0; c < d; ++c) {
      float v = 0.0f;
      switch (table.dtype) {
        case DType::kF32: v = table.ptr<float>()[base + c]; break;
        case DType::kF16: v = f16_to_f32(table.ptr<uint16_t>()[base + c]); break;
        case DType::kBF16: v = bf16_to_f32(table.ptr<uint16_t>()[base + c]); break;
        default: MMX_CHECK(false, "embedding: dtype {}", dtype_name(table.dtype));
      }
      out.f32()[t * d + c] = v;
    }
  }
}

}  // namespace mmx::ops::ref
