// Fast row movement: rows_gather (token rows -> expert batch) and rows_scatter_add (expert
// outputs, weighted, back onto token rows).
//
// rows_scatter_add applies the m updates in index order for every column; threads split the
// columns, never the updates, so repeated destination rows sum in the same order at any thread
// count. Not here: embedding (dequant.cpp).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst) {
  const int64_t m = row_ids.numel(), d = src.dim(-1);
  const int32_t* id = row_ids.ptr<int32_t>();
  const float* s = src.f32();
  float* o = dst.f32();
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(o + i * d, s + int64_t(id[i]) * d, size_t(d) * sizeof(float));
}

void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst) {
  const int64_t m = row_ids.numel(), d = src.dim(-1);
  const int32_t* id = row_ids.ptr<int32_t>();
  const float* sc = scale.f32();
  const float* s = src.f32();
  float* o = dst.f32();
  constexpr int64_t kCols = 512;  // columns per task
  const int64_t n_col_blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) num_threads(threads()) if (m * d >= (int64_t(1) << 16) && n_col_blocks > 1)
  for (int64_t cb = 0; cb < n_col_blocks; ++cb) {
    const int64_t c0 = cb * kCols, c1 = std::min(d, c0 + kCols);
    for (int64_t i = 0; i < m; ++i) {
      const float* sr = s + i * d;
      float* dr = o + int64_t(id[i]) * d;
      const __m256 a = _mm256_set1_ps(sc[i]);
      int64_t c = c0;
      for (; c + 8 <= c1; c += 8)
        _mm256_storeu_ps(dr + c, _mm256_fmadd_ps(a, _mm256_loadu_ps(sr + c), _mm256_loadu_ps(dr + c)));
      for (; c < c1; ++c) dr[c] += sc[i] * sr[c];
    }
  }
}

}  // namespace mmx::ops::cpu
