#include "bench_peak.h"

#include "base/clock.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mmx::cli {

MemBandwidth measure_bandwidth(int size_mb, int reps, int nt) {
  const size_t n = size_t(size_mb) << 20;  // bytes per array
  const size_t nf = n / sizeof(float);
  float* a = static_cast<float*>(std::aligned_alloc(64, n));
  float* b = static_cast<float*>(std::aligned_alloc(64, n));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < int64_t(nf); ++i) a[i] = float(i & 1023), b[i] = 0;  // first touch
  std::vector<double> copy, read;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    double t = now_s();
#pragma omp parallel num_threads(nt)
    {
      const int id = omp_get_thread_num(), m = omp_get_num_threads();
      const size_t lo = nf * id / m, hi = nf * (id + 1) / m;
      std::memcpy(b + lo, a + lo, (hi - lo) * sizeof(float));
    }
    copy.push_back(2.0 * double(n) / (now_s() - t) / 1e9);
    t = now_s();
    float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      const int id = omp_get_thread_num(), m = omp_get_num_threads();
      const size_t lo = (nf * id / m) & ~size_t(63), hi = id + 1 == m ? nf : (nf * (id + 1) / m) & ~size_t(63);
      // 8 independent sums keep enough loads in flight (4 under-report; a software prefetch
      // measured slower).
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
      size_t i = lo;
      for (; i + 64 <= hi; i += 64) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
        s4 = _mm256_add_ps(s4, _mm256_load_ps(a + i + 32));
        s5 = _mm256_add_ps(s5, _mm256_load_ps(a + i + 40));
        s6 = _mm256_add_ps(s6, _mm256_load_ps(a + i + 48));
        s7 = _mm256_add_ps(s7, _mm256_load_ps(a + i + 56));
      }
      s0 = _mm256_add_ps(_mm256_add_ps(s0, s4), _mm256_add_ps(s1, s5));
      s2 = _mm256_add_ps(_mm256_add_ps(s2, s6), _mm256_add_ps(s3, s7));
      float tmp[8];
      _mm256_storeu_ps(tmp, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
      for (float x : tmp) total += x;
      for (; i < hi; ++i) total += a[i];
    }
    sink = sink + total;
    read.push_back(double(n) / (now_s() - t) / 1e9);
  }
  std::free(a);
  std::free(b);
  return {median(copy), median(read)};
}

double measure_fma_gflops(int nt) {
  constexpr int64_t kIters = 20'000'000;
  std::vector<double> runs;
  for (int r = 0; r < 3; ++r) {
    const double t = now_s();
    float out = 0;
#pragma omp parallel num_threads(nt) reduction(+ : out)
    {
      // 10 independent chains hide the FMA latency (4-5 cycles) on 2 FMA ports.
      __m256 acc[10];
      for (int j = 0; j < 10; ++j) acc[j] = _mm256_set1_ps(float(j));
      const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
      for (int64_t i = 0; i < kIters; ++i)
        for (int j = 0; j < 10; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
      float tmp[8];
      __m256 s = acc[0];
      for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, acc[j]);
      _mm256_storeu_ps(tmp, s);
      out += tmp[0];
    }
    const double dt = now_s() - t;
    volatile float keep = out;
    (void)keep;
    runs.push_back(double(nt) * kIters * 10 * 8 * 2 / dt / 1e9);
  }
  return median(runs);
}

}  // namespace mmx::cli
