#include "bench_peak.h"

#include "base/clock.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mmx::cli {

namespace {

// Sums of a[lo, hi) in float lanes; the kernels differ only in how they issue the loads.
using ReadKernel = float (*)(const float* a, size_t lo, size_t hi);

inline float reduce8(__m256 s0, __m256 s1, __m256 s2, __m256 s3, __m256 s4, __m256 s5, __m256 s6,
                     __m256 s7) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s4), _mm256_add_ps(s1, s5)),
                                 _mm256_add_ps(_mm256_add_ps(s2, s6), _mm256_add_ps(s3, s7)));
  float tmp[8];
  _mm256_storeu_ps(tmp, s);
  float t = 0;
  for (float x : tmp) t += x;
  return t;
}

// One stream, 8 independent sums (4 under-report: too few loads in flight).
float read_plain(const float* a, size_t lo, size_t hi) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (size_t i = lo; i < hi; i += 64) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
    s4 = _mm256_add_ps(s4, _mm256_load_ps(a + i + 32));
    s5 = _mm256_add_ps(s5, _mm256_load_ps(a + i + 40));
    s6 = _mm256_add_ps(s6, _mm256_load_ps(a + i + 48));
    s7 = _mm256_add_ps(s7, _mm256_load_ps(a + i + 56));
  }
  return reduce8(s0, s1, s2, s3, s4, s5, s6, s7);
}

// Four streams (the quarters of [lo, hi)), a cache line of each per step, prefetched 1 KiB ahead:
// the access pattern of a GEMV tile reading four weight rows at once.
float read_streams4(const float* a, size_t lo, size_t hi) {
  const size_t q = (hi - lo) / 4 / 64 * 64;
  const float* p[4] = {a + lo, a + lo + q, a + lo + 2 * q, a + lo + 3 * q};
  __m256 s[8];
  for (auto& v : s) v = _mm256_setzero_ps();
  for (size_t i = 0; i < q; i += 16) {
    for (int k = 0; k < 4; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(p[k] + i + 256), _MM_HINT_T0);
      s[2 * k] = _mm256_add_ps(s[2 * k], _mm256_load_ps(p[k] + i));
      s[2 * k + 1] = _mm256_add_ps(s[2 * k + 1], _mm256_load_ps(p[k] + i + 8));
    }
  }
  float t = reduce8(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
  for (size_t i = lo + 4 * q; i < hi; ++i) t += a[i];
  return t;
}

float read_nt(const float* a, size_t lo, size_t hi) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  auto ld = [&](size_t i) { return _mm256_stream_load_si256(reinterpret_cast<const __m256i*>(a + i)); };
  for (size_t i = lo; i < hi; i += 64) {
    s0 = _mm256_add_epi32(s0, ld(i));
    s1 = _mm256_add_epi32(s1, ld(i + 8));
    s2 = _mm256_add_epi32(s2, ld(i + 16));
    s3 = _mm256_add_epi32(s3, ld(i + 24));
    s4 = _mm256_add_epi32(s4, ld(i + 32));
    s5 = _mm256_add_epi32(s5, ld(i + 40));
    s6 = _mm256_add_epi32(s6, ld(i + 48));
    s7 = _mm256_add_epi32(s7, ld(i + 56));
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)),
                                     _mm256_add_epi32(_mm256_add_epi32(s4, s5), _mm256_add_epi32(s6, s7)));
  return float(_mm256_extract_epi32(s, 0) ^ _mm256_extract_epi32(s, 7));
}

}  // namespace

MemBandwidth measure_bandwidth(int size_mb, int reps, int max_threads) {
  const size_t n = size_t(size_mb) << 20;  // bytes per array
  const size_t nf = n / sizeof(float);
  float* a = static_cast<float*>(std::aligned_alloc(64, n));
  float* b = static_cast<float*>(std::aligned_alloc(64, n));
#pragma omp parallel for num_threads(max_threads) schedule(static)
  for (int64_t i = 0; i < int64_t(nf); ++i) a[i] = float(i & 1023), b[i] = 0;  // first touch
  MemBandwidth out;
  volatile float sink = 0;
  std::vector<double> copy;
  for (int r = 0; r < reps; ++r) {
    const double t = now_s();
#pragma omp parallel num_threads(max_threads)
    {
      const int id = omp_get_thread_num(), m = omp_get_num_threads();
      const size_t lo = nf * id / m, hi = nf * (id + 1) / m;
      std::memcpy(b + lo, a + lo, (hi - lo) * sizeof(float));
    }
    copy.push_back(2.0 * double(n) / (now_s() - t) / 1e9);
  }
  out.copy_gbs = median(copy);

  const std::pair<const char*, ReadKernel> kernels[] = {
      {"plain", read_plain}, {"streams4", read_streams4}, {"nt", read_nt}};
  for (const auto& [name, kern] : kernels) {
    for (int nt = 1; nt <= max_threads; ++nt) {
      std::vector<double> runs;
      for (int r = 0; r < reps; ++r) {
        const double t = now_s();
        float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
        {
          const int id = omp_get_thread_num(), m = omp_get_num_threads();
          // Each thread's share, whole 256-byte lines of 64 floats.
          const size_t lo = nf * id / m / 64 * 64, hi = id + 1 == m ? nf / 64 * 64 : nf * (id + 1) / m / 64 * 64;
          total += kern(a, lo, hi);
        }
        sink = sink + total;
        runs.push_back(double(nf / 64 * 64 * sizeof(float)) / (now_s() - t) / 1e9);
      }
      const double g = median(runs);
      out.table.push_back({name, nt, g});
      if (g > out.read_gbs) out.read_gbs = g, out.read_kernel = name, out.read_threads = nt;
    }
  }
  std::free(a);
  std::free(b);
  return out;
}

namespace {
// The median over 3 runs of ops / (wall time of one parallel region running body on nt threads),
// in G/s. body() returns a value folded into a volatile sink, so its loop cannot be dropped.
template <class Body>
double median_rate(int nt, double ops, const Body& body) {
  std::vector<double> runs;
  for (int r = 0; r < 3; ++r) {
    const double t = now_s();
    float out = 0;
#pragma omp parallel num_threads(nt) reduction(+ : out)
    out += body();
    const double dt = now_s() - t;
    volatile float keep = out;
    (void)keep;
    runs.push_back(ops / dt / 1e9);
  }
  return median(runs);
}
}  // namespace

double measure_fma_gflops(int nt) {
  constexpr int64_t kIters = 20'000'000;
  return median_rate(nt, double(nt) * kIters * 10 * 8 * 2, [] {
    // 10 independent chains hide the FMA latency (4-5 cycles) on 2 FMA ports.
    __m256 acc[10];
    for (int j = 0; j < 10; ++j) acc[j] = _mm256_set1_ps(float(j));
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < kIters; ++i)
      for (int j = 0; j < 10; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
    __m256 s = acc[0];
    for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, acc[j]);
    return _mm256_cvtss_f32(s);
  });
}

double measure_int8_gops(int nt) {
  constexpr int64_t kIters = 10'000'000;
  return median_rate(nt, double(nt) * kIters * 8 * 32 * 2, [] {
    // 8 independent accumulators, each step: 32 u8 x s8 products summed into 8 s32 lanes.
    __m256i acc[8], w[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_si256(), w[j] = _mm256_set1_epi8(char(j + 1));
    __m256i x = _mm256_set1_epi8(3);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < kIters; ++i) {
      for (int j = 0; j < 8; ++j)
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(w[j], x), ones));
      asm volatile("" : "+x"(x));  // keep the loop from being folded
    }
    __m256i s = acc[0];
    for (int j = 1; j < 8; ++j) s = _mm256_xor_si256(s, acc[j]);
    return float(_mm256_extract_epi32(s, 0));
  });
}

}  // namespace mmx::cli
