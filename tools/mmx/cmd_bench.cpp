// mmx bench: speed as a fraction of this machine's measured limits.
//   mmx bench peak                 the read ceiling (best of several read kernels, 1..N threads),
//                                  copy bandwidth, the FP32 FMA and int8 dot peaks (bench_peak.cpp)
//   mmx bench model -m PATH [...]  prefill and decode tokens/s as fractions of those, per-op time,
//                                  RSS, --json (bench_model.cpp)
//   mmx bench batch -m DIR [...]   continuous batching's gain: S sequences decoding together in
//                                  one fused forward_multi per step vs one forward() each
//   mmx bench train -m DIR [...]   training-step tokens/s and GEMM FLOP/s vs the FMA peak (bench_train.cpp)
//   mmx bench spec -m DIR -p TEXT  speculative decoding: verification cost, acceptance, speed-up (bench_spec.cpp)
// Nothing here is asserted: benchmarks report, tests decide correctness.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "base/clock.h"
#include "bench_cost.h"
#include "bench_peak.h"
#include "common.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "formats/safetensors.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {

struct BatchOpts {
  std::string model;
  int seqs = 8, steps = 20, context = 64, reps = 5, threads = 0;
};

// Decode tokens/s of `seqs` sequences at `context` tokens each: fused (one forward_multi per step,
// the serving engine's path) vs separate (one forward() per sequence per step, the baseline).
void bench_batch(const BatchOpts& o) {
  ops::set_n_threads(o.threads);
  auto model = load_model(o.model, progress_bar);
  const ModelConfig& c = model->config();
  const TokenCost tc = token_cost(o.model, c, DType::kF32);
  std::mt19937 rng(1);
  std::vector<std::vector<int32_t>> ids(size_t(o.seqs));
  for (auto& v : ids)
    for (int i = 0; i < o.context + o.steps; ++i) v.push_back(int32_t(rng() % c.vocab_size));
  Buffer logits(DType::kF32, {o.seqs, c.vocab_size});
  // Fresh caches holding the first `context` tokens of each sequence (not timed).
  auto prefilled = [&] {
    std::vector<KvCache> caches;
    std::vector<int32_t> pos(size_t(o.context));
    for (int i = 0; i < o.context; ++i) pos[size_t(i)] = i;
    for (int s = 0; s < o.seqs; ++s) {
      caches.push_back(model->make_cache(o.context + o.steps));
      ForwardBatch b;
      b.tokens = Tensor(ids[size_t(s)].data(), DType::kI32, {o.context});
      b.positions = Tensor(pos.data(), DType::kI32, {o.context});
      Tensor row = logits.t().rows_range(0, 1);
      model->forward(b, caches.back(), row);
    }
    return caches;
  };
  auto fused = [&](std::vector<KvCache>& caches) {
    std::vector<int32_t> tok(size_t(o.seqs));
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < o.seqs; ++s) chunks.push_back({s, 1, &caches[size_t(s)]});
    for (int t = 0; t < o.steps; ++t) {
      for (int s = 0; s < o.seqs; ++s) tok[size_t(s)] = ids[size_t(s)][size_t(o.context + t)];
      model->forward_multi(Tensor(tok.data(), DType::kI32, {o.seqs}), chunks, logits.t());
    }
  };
  auto separate = [&](std::vector<KvCache>& caches) {
    for (int t = 0; t < o.steps; ++t)
      for (int s = 0; s < o.seqs; ++s) {
        int32_t tok = ids[size_t(s)][size_t(o.context + t)], pos = o.context + t;
        ForwardBatch b;
        b.tokens = Tensor(&tok, DType::kI32, {1});
        b.positions = Tensor(&pos, DType::kI32, {1});
        b.pos0 = pos;
        Tensor row = logits.t().rows_range(0, 1);
        model->forward(b, caches[size_t(s)], row);
      }
  };
  auto tok_per_s = [&](auto&& run) {
    std::vector<KvCache> caches = prefilled();
    const double t = now_s();
    run(caches);
    return double(o.seqs) * o.steps / (now_s() - t);
  };
  tok_per_s(fused);  // warm-up: scratch growth, page faults
  std::vector<double> f, sep;
  for (int r = 0; r < o.reps; ++r) {  // interleaved, so load changes hit both alike
    f.push_back(tok_per_s(fused));
    sep.push_back(tok_per_s(separate));
  }
  const double mf = median(f), ms = median(sep);
  std::printf("model             %s (%d layers, d_model %lld, %d experts top-%d)\n", o.model.c_str(), c.n_layers,
              (long long)c.d_model, c.n_experts, c.n_experts_active);
  std::printf("batch             %d sequences x %d decode steps at context %d, %d threads\n", o.seqs, o.steps,
              o.context, ops::n_threads());
  std::printf("fused             %.1f tok/s (median of %d; one forward_multi per step)\n", mf, o.reps);
  std::printf("separate          %.1f tok/s (median of %d; one forward per sequence)\n", ms, o.reps);
  std::printf("fused / separate  %.2fx\n", mf / ms);
  std::printf("separate decode   %.2f GB/s of weights (%.1f MB per token)\n", ms * tc.weight_bytes / 1e9,
              tc.weight_bytes / 1e6);
}

}  // namespace

void add_bench(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("bench", "Benchmarks: machine peaks and model speed as a fraction of them");
  c->require_subcommand(1);

  auto threads = std::make_shared<int>(0);
  CLI::App* peak = c->add_subcommand("peak", "Measure the read ceiling (best of several kernels, 1..N threads), copy bandwidth, FMA and int8 peaks");
  peak->add_option("-t,--threads", *threads, "Threads (0 = all cores)");
  peak->callback([threads, &action] {
    action = [threads] {
      ops::set_n_threads(*threads);
      const int nt = ops::n_threads();
      const MemBandwidth mb = measure_bandwidth(1024, 7, nt);
      std::printf("read bandwidth, GB/s (median of 7 passes over 1 GiB):\n  kernel    ");
      for (int t = 1; t <= nt; ++t) std::printf("  %2d thr", t);
      for (size_t i = 0; i < mb.table.size(); ++i) {
        if (mb.table[i].threads == 1) std::printf("\n  %-9s ", mb.table[i].kernel.c_str());
        std::printf("  %6.2f", mb.table[i].gbs);
      }
      std::printf("\nread ceiling      %.2f GB/s (%s, %d threads): the best cell above\n", mb.read_gbs,
                  mb.read_kernel.c_str(), mb.read_threads);
      std::printf("copy bandwidth    %.2f GB/s (read + write, %d threads)\n", mb.copy_gbs, nt);
      std::printf("fp32 FMA peak     %.1f GFLOP/s (%d threads)\n", measure_fma_gflops(nt), nt);
      std::printf("int8 dot peak     %.1f GOP/s (maddubs + madd + add, %d threads)\n", measure_int8_gops(nt), nt);
    };
  });

  add_bench_model(c, action);  // bench_model.cpp

  auto bo = std::make_shared<BatchOpts>();
  CLI::App* b = c->add_subcommand("batch", "Decode speed of S sequences: one fused forward per step vs one each");
  b->add_option("-m,--model", bo->model, "Checkpoint directory")->required();
  b->add_option("-s,--seqs", bo->seqs, "Sequences decoding together")->capture_default_str()->check(CLI::Range(1, 1024));
  b->add_option("-n,--steps", bo->steps, "Decode steps per run")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  b->add_option("-c,--context", bo->context, "Tokens already in each sequence")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  b->add_option("-r,--reps", bo->reps, "Repetitions (the median is reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  b->add_option("-t,--threads", bo->threads, "Threads (0 = all cores)");
  b->callback([bo, &action] { action = [bo] { bench_batch(*bo); }; });
  add_bench_train(c, action);  // bench_train.cpp
  add_bench_rl(c, action);     // bench_rl.cpp
  add_bench_spec(c, action);   // bench_spec.cpp
}

}  // namespace mmx::cli
