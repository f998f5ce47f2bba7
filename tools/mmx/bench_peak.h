// Hardware ceilings measured on this machine, so benchmarks can report fractions of them:
// a STREAM-like memory bandwidth (copy and read) and the FP32 FMA peak of the AVX2 units.
#pragma once

namespace mmx::cli {

struct MemBandwidth {
  double copy_gbs = 0;  // bytes read + bytes written per second (STREAM "copy" convention)
  double read_gbs = 0;  // bytes read per second (a threaded sum) — the ceiling for decode
};

// Median over `reps` passes over arrays of `size_mb` MiB each, with n_threads OpenMP threads.
MemBandwidth measure_bandwidth(int size_mb, int reps, int n_threads);
// FP32 GFLOP/s of independent FMA chains on every thread (2 flops per lane per FMA).
double measure_fma_gflops(int n_threads);

}  // namespace mmx::cli
