// The training kernels' one GEMM entry (private to src/train): a single-threaded OpenBLAS call
// with explicit leading dimensions, row-major, counted in gemm_flops() (kernels.h). The kernels
// parallelise around it with OpenMP.
#pragma once

#include <cstdint>

namespace mmx::train::detail {

// C [M, N] = alpha · op(A) [M, K] · op(B) [K, N] + beta · C.
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

}  // namespace mmx::train::detail
