// Hardware ceilings measured on this machine, so benchmarks can report fractions of them: the
// read bandwidth (the best of several read kernels over 1..N threads: decode's ceiling), a
// STREAM-like copy bandwidth, the FP32 FMA peak and the int8 dot peak of the AVX2 units.
#pragma once

#include <string>
#include <vector>

namespace mmx::cli {

struct MemBandwidth {
  double copy_gbs = 0;  // bytes read + bytes written per second (STREAM "copy" convention)
  double read_gbs = 0;  // bytes read per second: the best read kernel at the best thread count
  std::string read_kernel;
  int read_threads = 0;
  struct Row {
    std::string kernel;
    int threads;
    double gbs;  // median of the reps
  };
  std::vector<Row> table;  // every kernel x thread count tried
};

// Read kernels (each summing 1 GiB-class arrays, so caches do not help):
//   plain     one sequential stream per thread, 8 independent AVX accumulators
//   streams4  four interleaved streams per thread with software prefetch 1 KiB ahead
//   nt        non-temporal loads (vmovntdqa; on write-back memory a plain load with a hint)
// each at 1..max_threads threads; median of `reps` passes per cell, best cell is the ceiling.
MemBandwidth measure_bandwidth(int size_mb, int reps, int max_threads);
// FP32 GFLOP/s of independent FMA chains on every thread (2 flops per lane per FMA).
double measure_fma_gflops(int n_threads);
// int8 GOP/s of the integer dot sequence the quantized GEMV uses (maddubs u8 x s8 -> s16 pairs,
// madd -> s32, add), 2 ops per multiply-accumulate, independent chains on every thread.
double measure_int8_gops(int n_threads);

}  // namespace mmx::cli
