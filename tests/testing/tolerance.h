// Tolerances for comparing a fast path against the fp64 reference (DESIGN.md test table).
// Changing a value requires a comment saying how the new value was measured.
#pragma once

namespace mmx::testing {

struct Tol {
  double atol;
  double rtol;
  double max_nmse;
};

namespace tol {
// fp32 compute vs fp64 reference: elementwise ops on O(1) values.
inline constexpr Tol kF32{1e-5, 1e-5, 1e-10};
// fp32 reductions over long rows (matmul K up to a few thousand, attention over up to ~1k keys):
// fp32 accumulation error grows ~ sqrt(K)·eps·|x||w|; 1e-4 absolute covers K = 4096 with unit
// scale inputs (measured max diff ~2e-5 at K = 3072).
inline constexpr Tol kF32Reduce{1e-4, 1e-4, 1e-9};
inline constexpr Tol kF16{1e-3, 2e-3, 1e-6};
inline constexpr Tol kBF16{1e-2, 1.6e-2, 1e-5};
}  // namespace tol

}  // namespace mmx::testing
