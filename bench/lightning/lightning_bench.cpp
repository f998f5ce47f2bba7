// lightning_bench: one layer's attention core at the real MiniMax-Text-01 width, lightning
// (ops::attention_lightning, 64 heads × 128, fp32 state) against softmax attention
// (ops::attention_softmax, GQA 64 query / 8 KV heads × 128 over a contiguous fp32 KV cache).
//
//   a. decode time per token vs context: lightning is flat (one [64,128,128] state update),
//      softmax reads n_ctx keys; the ratio and the context where lightning becomes cheaper.
//   b. prefill throughput (tokens/s) vs prompt length: linear vs quadratic.
//   c. cache memory per sequence for the whole Text-01 stack (arithmetic, no timing).
//   d. lightning prefill throughput vs chunk length (the `block` argument).
//
// Decode is measured cold, as in a real decode step where the other 79 layers evict this one's
// data: successive calls cycle through 70 distinct states (Text-01's 280 MiB per-sequence
// lightning cache) and through distinct ctx-sized slices of a KV pool of --max-ctx rows.
// Decode numbers are medians over the individually timed calls of --reps runs of >= 20 ms each;
// prefill numbers are medians of up to 3 runs.
// Nothing is asserted (house rule: benchmarks report, tests decide).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace {

using mmx::Buffer;
using mmx::DType;
using mmx::Tensor;
namespace ops = mmx::ops;

// Text-01 / M1 (spec §3.1).
constexpr int64_t kHeads = 64, kKvHeads = 8, kHeadDim = 128;
constexpr int kLayers = 80, kLightningLayers = 70, kSoftmaxLayers = 10;
constexpr int kConfigBlock = 256;
constexpr int64_t kMaxRecurrencePrefill = 4096;  // the block-1 column is linear too; stop here

struct Opts {
  int reps = 5;
  int64_t max_ctx = 65536;
  int64_t max_prefill = 16384;
  double budget_s = 20;  // skip a prefill size whose single run is predicted to take longer
  int threads = 0;
  int block = kConfigBlock;
};

// Fills p[0, n) with uniform values in [-a, a] from a fixed-seed hash (cheap for 512 MiB).
void fill(float* p, int64_t n, uint64_t seed, float a = 1.0f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    p[i] = a * (float(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// Median seconds per call of f(i) (i = running call index) over all calls of `reps` runs, each
// run repeating the call until it spans >= min_s, after one untimed warm-up call. Each call is
// timed on its own, so a call stalled by the OS scheduler (a shared machine) is one outlier
// among many rather than part of every run's average.
double time_per_call(int reps, const std::function<void(int64_t)>& f, double min_s = 0.02) {
  int64_t idx = 0;
  f(idx++);
  std::vector<double> calls;
  for (int r = 0; r < reps; ++r) {
    const double t_run = mmx::now_s();
    double t = t_run;
    do {
      f(idx++);
      const double t1 = mmx::now_s();
      calls.push_back(t1 - t);
      t = t1;
    } while (t - t_run < min_s);
  }
  return mmx::median(calls);
}

std::string fmt_ctx(int64_t c) {
  if (c >= 1024 * 1024 && c % (1024 * 1024) == 0) return fmt::format("{}M", c / (1024 * 1024));
  if (c >= 1024 && c % 1024 == 0) return fmt::format("{}K", c / 1024);
  return fmt::format("{}", c);
}

std::string fmt_time(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} µs", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string fmt_mib(double bytes) {
  const double mib = bytes / (1024.0 * 1024.0);
  if (mib < 1) return fmt::format("{:.0f} KiB", bytes / 1024.0);
  if (mib >= 1024) return fmt::format("{:.1f} GiB", mib / 1024);
  return fmt::format("{:.0f} MiB", mib);
}

// Slopes of layer 0 (strongest decay); speed does not depend on them.
Buffer layer_slopes(int layer) {
  Buffer s(DType::kF32, {kHeads});
  const double factor = 1.0 - double(layer) / double(kLayers - 1) + 1e-5;
  for (int64_t h = 0; h < kHeads; ++h)
    s.f32()[h] = float(std::exp2(-8.0 * double(h + 1) / double(kHeads)) * factor);
  return s;
}

// ---- a. decode ----
void bench_decode(const Opts& o) {
  fmt::print("## a. Decode: time per token, one layer (64 heads × 128), cold cache\n\n");
  std::vector<int64_t> ctxs;
  for (int64_t c = 64; c <= o.max_ctx; c *= 2) ctxs.push_back(c);

  // Lightning: 70 states (one sequence's whole lightning cache), cycled.
  const int64_t state_floats = kHeads * kHeadDim * kHeadDim;
  std::vector<float> states(size_t(kLightningLayers * state_floats));
  fill(states.data(), int64_t(states.size()), 1, 0.05f);
  Buffer qkv(DType::kF32, {1, kHeads, 3, kHeadDim}), lout(DType::kF32, {1, kHeads, kHeadDim});
  fill(qkv.f32(), qkv.t().numel(), 2, 0.5f);
  Buffer slopes = layer_slopes(0);
  auto lightning = [&](int64_t i) {
    Tensor st(states.data() + (i % kLightningLayers) * state_floats, DType::kF32,
              {kHeads, kHeadDim, kHeadDim});
    ops::attention_lightning(qkv, slopes, 1, st, lout.t());
  };

  // Softmax: a KV pool of max_ctx rows per K and V; a call at context c uses rows
  // [s·c, s·c + c) for the s-th slice, cycling.
  const int64_t row = kKvHeads * kHeadDim;
  std::vector<float> kpool(size_t(o.max_ctx * row)), vpool(kpool.size());
  fill(kpool.data(), int64_t(kpool.size()), 3);
  fill(vpool.data(), int64_t(vpool.size()), 4);
  Buffer q(DType::kF32, {1, kHeads, kHeadDim}), sout(DType::kF32, {1, kHeads, kHeadDim});
  fill(q.f32(), q.t().numel(), 5);
  const float scale = float(1.0 / std::sqrt(double(kHeadDim)));

  fmt::print("| context | lightning | softmax | softmax / lightning | softmax KV read per token |\n");
  fmt::print("|---:|---:|---:|---:|---:|\n");
  std::vector<double> ratio;
  for (int64_t c : ctxs) {
    const double tl = time_per_call(o.reps, lightning);
    const int64_t slices = o.max_ctx / c;
    const double ts = time_per_call(o.reps, [&](int64_t i) {
      const int64_t off = (i % slices) * c * row;
      Tensor k(kpool.data() + off, DType::kF32, {c, kKvHeads, kHeadDim});
      Tensor v(vpool.data() + off, DType::kF32, {c, kKvHeads, kHeadDim});
      ops::attention_softmax(q, k, v, c - 1, scale, sout.t());
    });
    ratio.push_back(ts / tl);
    fmt::print("| {} | {} | {} | {:.2f} | {} |\n", fmt_ctx(c), fmt_time(tl), fmt_time(ts), ts / tl,
               fmt_mib(double(2 * c * row * 4)));
  }
  // Crossover: the first context where softmax costs more, interpolated in log-log.
  std::string cross = "not reached";
  for (size_t i = 0; i < ctxs.size(); ++i) {
    if (ratio[i] < 1) continue;
    if (i == 0) {
      cross = fmt::format("<= {} (already cheaper at the smallest context)", fmt_ctx(ctxs[0]));
    } else {
      const double x0 = std::log(double(ctxs[i - 1])), x1 = std::log(double(ctxs[i]));
      const double y0 = std::log(ratio[i - 1]), y1 = std::log(ratio[i]);
      cross = fmt::format("≈ {:.0f} tokens", std::exp(x0 + (0 - y0) * (x1 - x0) / (y1 - y0)));
    }
    break;
  }
  fmt::print("\nLightning decode becomes cheaper than softmax decode at a context of {} "
             "(log-log interpolation between the measured points).\n\n",
             cross);
}

// ---- b. prefill ----
// Runs f once per rep (a prefill is long enough to time directly; the inputs are already
// touched), at most min(--reps, 3) times, and stops early when another run would take the
// measurement past the budget.
double time_prefill(const Opts& o, const std::function<void()>& f, int* reps_done) {
  std::vector<double> runs;
  double total = 0;
  for (int r = 0; r < std::min(o.reps, 3); ++r) {
    const double t0 = mmx::now_s();
    f();
    runs.push_back(mmx::now_s() - t0);
    total += runs.back();
    if (total + runs.back() > o.budget_s) break;
  }
  *reps_done = int(runs.size());
  return mmx::median(runs);
}

void bench_prefill(const Opts& o) {
  fmt::print("## b. Prefill: one layer, whole prompt in one call (tokens/s, higher is better)\n\n");
  fmt::print("| prompt | lightning block {} | lightning GFLOP/s | lightning block 1 (recurrence) | "
             "softmax | softmax GFLOP/s | lightning / softmax |\n",
             o.block);
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|\n");
  Buffer slopes = layer_slopes(0);
  double prev_l = 0, prev_r = 0, prev_s = 0;
  int64_t prev_n = 0;
  for (int64_t n = 1024; n <= o.max_prefill; n *= 2) {
    const double g = prev_n ? double(n) / double(prev_n) : 0;
    std::string cl = "skipped", cr = n <= kMaxRecurrencePrefill ? "skipped" : "—", cs = "skipped", cls = "", css = "", cratio = "";
    double tl = 0, ts = 0;
    {
      Buffer qkv(DType::kF32, {n, kHeads, 3, kHeadDim}), out(DType::kF32, {n, kHeads, kHeadDim});
      Buffer state(DType::kF32, {kHeads, kHeadDim, kHeadDim});
      fill(qkv.f32(), qkv.t().numel(), 10, 0.5f);
      std::memset(out.f32(), 0, out.t().size_bytes());
      int reps = 0;
      if (prev_n == 0 || prev_l * g < o.budget_s) {
        tl = time_prefill(o, [&] { ops::attention_lightning(qkv, slopes, o.block, state.t(), out.t()); }, &reps);
        prev_l = tl;
        // FMAs per token and head: intra (m+1)·d (two causal m×m·d triangles, averaged),
        // inter + state 2·d² (m = block).
        const double m = double(std::min<int64_t>(o.block, n));
        const double flops = 2.0 * double(n) * double(kHeads) * ((m + 1) * kHeadDim + 2.0 * kHeadDim * kHeadDim);
        cl = fmt::format("{:.0f}", double(n) / tl);
        cls = fmt::format("{:.1f}", flops / tl / 1e9);
      }
      if (n <= kMaxRecurrencePrefill && (prev_n == 0 || prev_r * g < o.budget_s)) {
        const double tr = time_prefill(o, [&] { ops::attention_lightning(qkv, slopes, 1, state.t(), out.t()); }, &reps);
        prev_r = tr;
        cr = fmt::format("{:.0f}", double(n) / tr);
      }
    }
    {
      Buffer q(DType::kF32, {n, kHeads, kHeadDim}), k(DType::kF32, {n, kKvHeads, kHeadDim}),
          v(DType::kF32, {n, kKvHeads, kHeadDim}), out(DType::kF32, {n, kHeads, kHeadDim});
      fill(q.f32(), q.t().numel(), 11);
      fill(k.f32(), k.t().numel(), 12);
      fill(v.f32(), v.t().numel(), 13);
      std::memset(out.f32(), 0, out.t().size_bytes());
      const float scale = float(1.0 / std::sqrt(double(kHeadDim)));
      int reps = 0;
      if (prev_n == 0 || prev_s * g * g < o.budget_s) {
        ts = time_prefill(o, [&] { ops::attention_softmax(q, k, v, 0, scale, out.t()); }, &reps);
        prev_s = ts;
        // Causal QKᵀ and P·V: n(n+1)/2 · d FMAs each, per head.
        const double flops = 2.0 * 2.0 * double(kHeads) * double(n) * double(n + 1) / 2.0 * kHeadDim;
        cs = fmt::format("{:.0f}{}", double(n) / ts, reps < std::min(o.reps, 3) ? fmt::format(" ({} run{})", reps, reps > 1 ? "s" : "") : "");
        css = fmt::format("{:.1f}", flops / ts / 1e9);
      } else {
        cs = fmt::format("skipped (predicted {:.0f} s)", prev_s * g * g);
        prev_s = prev_s * g * g;
      }
    }
    if (tl > 0 && ts > 0) cratio = fmt::format("{:.1f}×", ts / tl);
    fmt::print("| {} | {} | {} | {} | {} | {} | {} |\n", fmt_ctx(n), cl, cls, cr, cs, css, cratio);
    prev_n = n;
  }
  fmt::print("\n");
}

// ---- c. memory ----
void memory_table() {
  fmt::print("## c. Cache memory per sequence, whole Text-01 stack (70 lightning + 10 softmax layers)\n\n");
  const double state = double(kLightningLayers) * kHeads * kHeadDim * kHeadDim * 4;
  const double kv_per_tok = double(kSoftmaxLayers) * 2 * kKvHeads * kHeadDim;  // elements
  fmt::print("| context | lightning state (70 layers, fp32) | softmax KV (10 layers) bf16 | "
             "softmax KV f32 | Text-01 total (bf16 KV) | all-softmax 80 layers, bf16 KV |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t c : {1024, 4096, 16384, 65536, 262144, 1048576}) {
    const double bf = kv_per_tok * double(c) * 2, f = kv_per_tok * double(c) * 4;
    const double all = double(kLayers) * 2 * kKvHeads * kHeadDim * double(c) * 2;
    fmt::print("| {} | {} | {} | {} | {} | {} |\n", fmt_ctx(c), fmt_mib(state), fmt_mib(bf), fmt_mib(f),
               fmt_mib(state + bf), fmt_mib(all));
  }
  fmt::print("\nThe constant lightning state equals the 10 softmax layers' bf16 KV at {:.0f} tokens "
             "(f32: {:.0f}); an all-softmax stack would reach it at {:.0f} tokens.\n\n",
             state / (kv_per_tok * 2), state / (kv_per_tok * 4),
             state / (double(kLayers) * 2 * kKvHeads * kHeadDim * 2));
}

// ---- d. chunk length ----
void bench_blocks(const Opts& o) {
  const int64_t n = std::min<int64_t>(2048, o.max_prefill);
  fmt::print("## d. Lightning prefill vs chunk length (prompt {}, tokens/s)\n\n", fmt_ctx(n));
  Buffer qkv(DType::kF32, {n, kHeads, 3, kHeadDim}), out(DType::kF32, {n, kHeads, kHeadDim});
  Buffer state(DType::kF32, {kHeads, kHeadDim, kHeadDim});
  fill(qkv.f32(), qkv.t().numel(), 20, 0.5f);
  std::memset(out.f32(), 0, out.t().size_bytes());
  Buffer slopes = layer_slopes(0);
  fmt::print("| block | tokens/s |\n|---:|---:|\n");
  for (int b : {16, 32, 64, 128, 256, 512}) {
    int reps = 0;
    const double t = time_prefill(o, [&] { ops::attention_lightning(qkv, slopes, b, state.t(), out.t()); }, &reps);
    fmt::print("| {}{} | {:.0f} |\n", b, b == kConfigBlock ? " (config)" : "", double(n) / t);
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  CLI::App app{"lightning vs softmax attention core at the MiniMax-Text-01 width"};
  app.add_option("--reps", o.reps, "repetitions per measurement (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--max-ctx", o.max_ctx, "largest decode context (KV pool: max-ctx × 8 KiB)")->check(CLI::Range(64, 1 << 22));
  app.add_option("--max-prefill", o.max_prefill, "largest prefill prompt")->check(CLI::Range(1024, 1 << 20));
  app.add_option("--budget", o.budget_s, "skip a prefill whose single run is predicted to exceed this many seconds");
  app.add_option("--threads", o.threads, "threads for the ops (0 = all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--block", o.block, "lightning chunk length for prefill (config: 256)")->check(CLI::PositiveNumber);
  bool skip_decode = false, skip_prefill = false, skip_blocks = false;
  app.add_flag("--no-decode", skip_decode, "skip section a");
  app.add_flag("--no-prefill", skip_prefill, "skip section b");
  app.add_flag("--no-blocks", skip_blocks, "skip section d");
  CLI11_PARSE(app, argc, argv);
  ops::set_n_threads(o.threads);

  fmt::print("# Lightning vs softmax attention core (MiniMax-Text-01 width: {} heads × {}, GQA {}/{})\n\n",
             kHeads, kHeadDim, kHeads, kKvHeads);
  fmt::print("threads {}, medians of {} runs (prefill: of up to 3), fp32 activations, fp32 state and KV\n\n",
             ops::n_threads(), o.reps);
  if (!skip_decode) bench_decode(o);
  if (!skip_prefill) bench_prefill(o);
  memory_table();
  if (!skip_blocks) bench_blocks(o);
  return 0;
}
