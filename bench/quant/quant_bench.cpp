// quant_bench: the decode GEMV on GGUF block-quantized weights (ops::matmul -> cpu/qgemv.cpp for
// n < 32) against this machine's read bandwidth, for every type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K;
// also F16, BF16 and F8 (E4M3, 128x128 block scales) on request, cpu/gemv.cpp's tiles),
// at the shapes that matter, [n_out, n_in]:
//   [6144, 3072]    a fused projection
//   [3072, 1536]    one MoE expert (the engine calls 8 per token per layer)
//   [200064, 3072]  the lm_head (Q6_K in Q4_K_M files, Q8_0 in Q8_0 files)
// for n = 1, 4, 8 tokens and 1, 2 threads. Reported: GB/s of weight bytes read, % of the read
// ceiling measured in the same run (a threaded sum over a 1 GiB buffer, as `mmx bench peak`), and
// GFLOP/s (2 n n_out n_in). "cold": successive calls cycle through copies of the weight totalling
// >= 1 GiB (beyond the L3), as a decode step that reads every layer's weights once; "hot": the
// same copy every call (cache-resident when it fits). The naive baseline is the fp32 GEMM path
// (cpu::gemm on the same quantized weight: dequantized tiles, what matmul ran before qgemv).
// Times are medians of individually timed calls. Nothing is asserted (benchmarks report).
//   quant_bench [--reps 15] [--types Q4_K,Q6_K] [--shapes 0,1,2] [--no-gemm] [--no-hot]
// --prefill: instead, the n >= 32 path (cpu/qgemm.cpp, int8) against the fp32 GEMM on dequantized
// tiles (cpu/gemm.cpp) at n = 512 on [1536,3072], [3072,1536], [6144,3072], alternating old and new
// call by call; reported: median GOP/s (2 n n_out n_in per call) by wall time and by process CPU
// time (the figure to read on a shared machine at 1 thread), and new/old.
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace {

using mmx::Buffer;
using mmx::DType;
using mmx::Tensor;
namespace ops = mmx::ops;

// Read bandwidth: a threaded sum over `bytes` (8 independent sums per thread), median of reps.
double read_gbs(int nt, size_t bytes, int reps) {
  const size_t nf = bytes / 4;
  auto* a = static_cast<float*>(std::aligned_alloc(64, bytes));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < int64_t(nf); ++i) a[i] = float(i & 1023);
  std::vector<double> runs;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    const double t = mmx::now_s();
    float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      const int id = omp_get_thread_num(), m = omp_get_num_threads();
      const size_t lo = (nf * id / m) & ~size_t(63), hi = id + 1 == m ? nf : (nf * (id + 1) / m) & ~size_t(63);
      __m256 s[8];
      for (auto& v : s) v = _mm256_setzero_ps();
      for (size_t i = lo; i + 64 <= hi; i += 64)
        for (int j = 0; j < 8; ++j) s[j] = _mm256_add_ps(s[j], _mm256_load_ps(a + i + 8 * j));
      for (int j = 1; j < 8; ++j) s[0] = _mm256_add_ps(s[0], s[j]);
      float tmp[8];
      _mm256_storeu_ps(tmp, s[0]);
      for (float v : tmp) total += v;
    }
    sink = sink + total;
    runs.push_back(double(bytes) / (mmx::now_s() - t) / 1e9);
  }
  std::free(a);
  return mmx::median(runs);
}

// One weight matrix of random blocks (levels: random bytes; fp16 scales: ±uniform(1/512, 1/16)).
void fill_random_blocks(DType t, uint8_t* p, size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, 8);
  }
  std::uniform_real_distribution<float> ud(1.0f / 512, 1.0f / 16);
  auto scale = [&](uint8_t* at) {
    const uint16_t h = mmx::f32_to_f16((rng() & 1) ? ud(rng) : -ud(rng));
    std::memcpy(at, &h, 2);
  };
  if (t == DType::kF8E4M3) {  // random codes but the NaNs (0x7f, 0xff)
    for (size_t i = 0; i < bytes; ++i)
      if ((p[i] & 0x7f) == 0x7f) p[i] = uint8_t(p[i] - 1);
    return;
  }
  if (t == DType::kF16 || t == DType::kBF16) {  // finite values in [-1, 1]
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto* h = reinterpret_cast<uint16_t*>(p);
    for (size_t i = 0; i < bytes / 2; ++i)
      h[i] = t == DType::kF16 ? mmx::f32_to_f16(u(rng)) : mmx::f32_to_bf16(u(rng));
    return;
  }
  const size_t bb = mmx::dtype_block_bytes(t);
  for (size_t off = 0; off + bb <= bytes; off += bb) {
    uint8_t* blk = p + off;
    switch (t) {
      case DType::kQ8_0: case DType::kQ4_0: scale(blk); break;
      case DType::kQ4_K: case DType::kQ5_K: scale(blk); scale(blk + 2); break;
      case DType::kQ6_K: scale(blk + offsetof(mmx::BlockQ6K, d)); break;
      default: break;
    }
  }
}

double cpu_now_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// --prefill: old (cpu::gemm) vs new (cpu::qgemm) at n tokens, alternating, `reps` calls each.
void prefill_ab(const std::vector<DType>& types, const std::vector<int>& ths, int n, int reps) {
  struct PShape {
    int64_t n_out, n_in;
  };
  const PShape shapes[] = {{1536, 3072}, {3072, 1536}, {6144, 3072}};
  fmt::print("prefill n = {}: median GOP/s, old = fp32 GEMM on dequantized tiles, new = int8 qgemm\n", n);
  fmt::print("{:<5} {:<13} {:>2} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6}\n", "type", "[n_out,n_in]", "th",
             "old wall", "new wall", "new/old", "old cpu", "new cpu", "new/old");
  for (const PShape& sh : shapes)
    for (DType t : types) {
      const size_t bytes = mmx::dtype_row_bytes(t, sh.n_in) * size_t(sh.n_out);
      auto* w = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
      fill_random_blocks(t, w, bytes, 99);
      ops::Linear l;
      l.w = Tensor(w, t, {sh.n_out, sh.n_in});
      Buffer x(DType::kF32, {n, sh.n_in}), y(DType::kF32, {n, sh.n_out});
      std::mt19937_64 rng(7);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (int64_t i = 0; i < n * sh.n_in; ++i) x.f32()[i] = nd(rng);
      for (int nt : ths) {
        ops::set_n_threads(nt);
        std::vector<double> wall[2], cpu[2];
        for (int r = -1; r < reps; ++r)
          for (int v = 0; v < 2; ++v) {
            const double w0 = mmx::now_s(), c0 = cpu_now_s();
            if (v == 0) ops::cpu::gemm(x.t(), l, y.t());
            else ops::cpu::qgemm(x.t(), l, y.t());
            const double c1 = cpu_now_s(), w1 = mmx::now_s();
            if (r >= 0) wall[v].push_back(w1 - w0), cpu[v].push_back(c1 - c0);  // r = -1: warm-up
          }
        const double gop = 2.0 * n * double(sh.n_out) * double(sh.n_in) / 1e9;
        const double ow = gop / mmx::median(wall[0]), nw = gop / mmx::median(wall[1]);
        const double oc = gop / mmx::median(cpu[0]), nc = gop / mmx::median(cpu[1]);
        fmt::print("{:<5} {:<13} {:>2} | {:>9.1f} {:>9.1f} {:>6.2f}x | {:>9.1f} {:>9.1f} {:>6.2f}x\n",
                   mmx::dtype_name(t), fmt::format("[{},{}]", sh.n_out, sh.n_in), nt, ow, nw, nw / ow, oc,
                   nc, nc / oc);
        std::fflush(stdout);
      }
      std::free(w);
    }
}

struct Shape {
  int64_t n_out, n_in;
  const char* what;
};

// Median seconds per call of f(copy) over >= reps calls and >= min_s, cycling through copies.
template <class F>
double time_calls(int reps, double min_s, int copies, F&& f) {
  f(0);  // warm-up (threads, scratch)
  std::vector<double> ts;
  const double t_start = mmx::now_s();
  for (int i = 0; int(ts.size()) < reps || mmx::now_s() - t_start < min_s; ++i) {
    const double t = mmx::now_s();
    f(i % copies);
    ts.push_back(mmx::now_s() - t);
    if (ts.size() >= 2000) break;
  }
  return mmx::median(ts);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"quant_bench: decode GEMV on GGUF quantized weights vs the read ceiling"};
  int reps = 15;
  std::string types_s = "Q8_0,Q4_0,Q4_K,Q5_K,Q6_K", shapes_s = "0,1,2", ns_s = "1,4,8", th_s = "1,2";
  bool no_gemm = false, no_hot = false, quantize = false, prefill = false;
  int prefill_n = 512;
  app.add_option("--reps", reps, "timed calls per measurement (at least)");
  app.add_option("--types", types_s, "comma-separated GGUF types");
  app.add_option("--shapes", shapes_s,
                 "0: [6144,3072] 1: [3072,1536] 2: [200064,3072] 3: [512,3072] (hot: L2-resident)");
  app.add_option("--ns", ns_s, "token counts (< 32)");
  app.add_option("--threads", th_s, "thread counts");
  app.add_flag("--no-gemm", no_gemm, "skip the fp32 GEMM baseline");
  app.add_flag("--no-hot", no_hot, "skip the cache-hot column");
  app.add_flag("--quantize", quantize, "also time ops::quantize (f32 -> each type; the converter's cost)");
  app.add_flag("--prefill", prefill, "n >= 32: int8 qgemm vs the fp32 GEMM, alternating (see the header)");
  app.add_option("--prefill-n", prefill_n, "tokens for --prefill");
  CLI11_PARSE(app, argc, argv);
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    size_t a = 0;
    while (a <= s.size()) {
      const size_t b = std::min(s.find(',', a), s.size());
      if (b > a) out.push_back(s.substr(a, b - a));
      a = b + 1;
    }
    return out;
  };
  const Shape kShapes[] = {{6144, 3072, "proj"}, {3072, 1536, "expert"}, {200064, 3072, "lm_head"},
                           {512, 3072, "small"}};
  std::vector<DType> types;
  for (const auto& s : split(types_s)) {
    const std::pair<const char*, DType> names[] = {{"Q8_0", DType::kQ8_0}, {"Q4_0", DType::kQ4_0},
                                                   {"Q4_K", DType::kQ4_K}, {"Q5_K", DType::kQ5_K},
                                                   {"Q6_K", DType::kQ6_K},
                                                   {"F16", DType::kF16}, {"BF16", DType::kBF16},
                                                   {"F8", DType::kF8E4M3}};
    bool ok = false;
    for (auto& [nm, t] : names)
      if (s == nm) types.push_back(t), ok = true;
    if (!ok) return fmt::print(stderr, "unknown type {}\n", s), 2;
  }
  std::vector<int> ths, ns, shapes;
  for (const auto& s : split(th_s)) ths.push_back(std::atoi(s.c_str()));
  for (const auto& s : split(ns_s)) ns.push_back(std::atoi(s.c_str()));
  for (const auto& s : split(shapes_s)) shapes.push_back(std::atoi(s.c_str()));

  if (prefill) {
    prefill_ab(types, ths, prefill_n, reps);
    ops::set_n_threads(0);
    return 0;
  }
  constexpr size_t kGiB = size_t(1) << 30;
  std::vector<double> ceiling(64, 0.0);
  for (int nt : ths) {
    ceiling[size_t(nt)] = read_gbs(nt, kGiB, 5);
    fmt::print("read ceiling, {} thread{}: {:.1f} GB/s (threaded sum over 1 GiB, median of 5)\n", nt,
               nt > 1 ? "s" : "", ceiling[size_t(nt)]);
  }
  fmt::print("\n{:<5} {:<16} {:>2} {:>2} | {:>8} {:>6} {:>8} | {:>8} {:>6} | {:>8} {:>7}\n", "type", "shape",
             "n", "th", "cold GB/s", "%ceil", "GFLOP/s", "hot GB/s", "%ceil", "gemm GB/s", "speedup");

  for (int si : shapes) {
    const Shape& sh = kShapes[si];
    for (DType t : types) {
      const size_t bytes = mmx::dtype_row_bytes(t, sh.n_in) * size_t(sh.n_out);
      const int copies = int(std::max<size_t>(2, (kGiB + bytes - 1) / bytes));
      // copies of one random matrix, back to back (page-aligned each)
      const size_t stride = (bytes + 4095) / 4096 * 4096;
      auto* arena = static_cast<uint8_t*>(std::aligned_alloc(4096, stride * size_t(copies)));
      fill_random_blocks(t, arena, bytes, 1234);
      for (int c = 1; c < copies; ++c) std::memcpy(arena + stride * size_t(c), arena, bytes);
      // fp8: 128x128 block scales in [1/512, 1/16] (one set shared by all copies)
      Buffer f8_scale(DType::kF32, {(sh.n_out + 127) / 128, (sh.n_in + 127) / 128});
      {
        std::mt19937_64 srng(99);
        std::uniform_real_distribution<float> su(1.0f / 512, 1.0f / 16);
        for (int64_t i = 0; i < f8_scale.t().numel(); ++i) f8_scale.f32()[i] = su(srng);
      }
      auto linear = [&](int c) {
        ops::Linear l;
        l.w = Tensor(arena + stride * size_t(c), t, {sh.n_out, sh.n_in});
        if (t == DType::kF8E4M3) l.scale = f8_scale.t();
        return l;
      };
      for (int n : ns) {
        Buffer x = Buffer(DType::kF32, {n, sh.n_in}), y = Buffer(DType::kF32, {n, sh.n_out});
        std::mt19937_64 rng(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t i = 0; i < n * sh.n_in; ++i) x.f32()[i] = nd(rng);
        for (int nt : ths) {
          ops::set_n_threads(nt);
          const double min_s = 0.3;
          const double cold = time_calls(reps, min_s, copies, [&](int c) {
            const ops::Linear l = linear(c);
            ops::matmul(x.t(), l, y.t());
          });
          const double hot = no_hot ? 0.0 : time_calls(reps, min_s, 1, [&](int) {
            const ops::Linear l = linear(0);
            ops::matmul(x.t(), l, y.t());
          });
          double gemm = 0.0;
          if (!no_gemm)
            gemm = time_calls(sh.n_out > 100000 ? 2 : 3, 0.0, copies, [&](int c) {
              const ops::Linear l = linear(c);
              ops::cpu::gemm(x.t(), l, y.t());
            });
          const double gb = double(bytes) / 1e9, fl = 2.0 * n * double(sh.n_out) * double(sh.n_in) / 1e9;
          const std::string shape = fmt::format("{} [{},{}]", sh.what, sh.n_out, sh.n_in);
          fmt::print("{:<5} {:<16} {:>2} {:>2} | {:>8.1f} {:>5.0f}% {:>8.1f} | {:>8} {:>6} | {:>8} {:>7}\n",
                     mmx::dtype_name(t), shape, n, nt, gb / cold, 100.0 * gb / cold / ceiling[size_t(nt)],
                     fl / cold, no_hot ? "-" : fmt::format("{:.1f}", gb / hot),
                     no_hot ? "-" : fmt::format("{:.0f}%", 100.0 * gb / hot / ceiling[size_t(nt)]),
                     no_gemm ? "-" : fmt::format("{:.2f}", gb / gemm),
                     no_gemm ? "-" : fmt::format("{:.1f}x", gemm / cold));
          std::fflush(stdout);
        }
      }
      std::free(arena);
    }
  }
  if (quantize) {
    // The converter's cost: [512, 3072] f32 -> each type, the best of 3 calls, all threads.
    ops::set_n_threads(0);
    const int64_t rows = 512, n = 3072;
    Buffer x(DType::kF32, {rows, n});
    std::mt19937_64 rng(123);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t i = 0; i < rows * n; ++i) x.f32()[i] = nd(rng);
    fmt::print("\nquantize [{}, {}] f32 ->\n", rows, n);
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF16,
                    DType::kBF16}) {
      Buffer q(t, {rows, n});
      double s = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        const double t0 = mmx::now_s();
        ops::quantize(x.t(), q.t());
        s = std::min(s, mmx::now_s() - t0);
      }
      fmt::print("  {:<5} {:8.1f} M elements/s ({} threads)\n", mmx::dtype_name(t), double(rows * n) / s / 1e6,
                 ops::n_threads());
    }
  }
  ops::set_n_threads(0);
  return 0;
}
