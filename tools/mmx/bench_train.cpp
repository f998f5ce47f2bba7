// mmx bench train: training-step throughput of a checkpoint's model (random token batches, the
// real step: forward + backward + clip + AdamW), and the GEMMs' FLOP/s as a fraction of the FMA
// peak measured in the same run. The side-by-side with PyTorch is bench/train/run.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "bench_peak.h"
#include "common.h"
#include "model/config.h"
#include "ops/ops.h"
#include "train/adamw.h"
#include "train/graph.h"
#include "train/kernels.h"
#include "train/params.h"

namespace mmx::cli {

namespace {
struct TrainBenchOpts {
  std::string model;
  int64_t batch = 16, seq_len = 256;
  int steps = 8, warmup = 2, threads = 0;
  bool peak = true;
};

void bench_train(const TrainBenchOpts& o) {
  train::set_n_threads(o.threads);
  const ModelConfig cfg = load_config(o.model);
  train::ParamSet<float> P(train::param_layout(cfg));
  train::load_params(o.model, P);
  auto g = train::make_graph<float>(cfg, P, o.batch, o.seq_len);
  train::AdamW opt({}, P.total());
  std::mt19937_64 rng(1);
  std::vector<int32_t> tok(size_t(o.batch * o.seq_len)), tgt(tok.size());
  std::vector<double> step_s, flops;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    for (auto* v : {&tok, &tgt})
      for (int32_t& x : *v) x = int32_t(rng() % uint64_t(cfg.vocab_size));
    train::reset_gemm_flops();
    const auto t0 = std::chrono::steady_clock::now();
    P.zero_grad();
    g->forward_backward(train::TrainBatch{o.batch, o.seq_len, tok.data(), tgt.data(), nullptr, nullptr},
                        1.0 / double(tok.size()));
    train::clip_grad_norm(P, 1.0);
    opt.step(P, 1e-4);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= o.warmup) {
      step_s.push_back(dt);
      flops.push_back(train::gemm_flops());
    }
  }
  std::sort(step_s.begin(), step_s.end());
  const double med = step_s[step_s.size() / 2], tps = double(tok.size()) / med;
  const double gflops = flops[0] / med / 1e9;
  std::printf("model %s: %lld params, batch %lld x %lld tokens\n", o.model.c_str(), (long long)P.n_trainable(),
              (long long)o.batch, (long long)o.seq_len);
  std::printf("training step %.1f ms (median of %d) = %.0f tokens/s; GEMMs %.2f GFLOP/step = %.1f GFLOP/s\n", med * 1e3,
              o.steps, tps, flops[0] / 1e9, gflops);
  double peak = 0;
  if (o.peak) {
    peak = measure_fma_gflops(ops::n_threads());
    std::printf("fp32 FMA peak %.1f GFLOP/s: the GEMMs of a whole step run at %.0f%% of it (GEMM time / step time "
                "included)\n",
                peak, 100.0 * gflops / peak);
  }
  // Machine-readable (bench/train/run.sh): the same run's numbers; the peak 0 under --no-peak.
  std::printf("mmx_gemm_gflop_per_step=%.4f\nmmx_gemm_gflop_s=%.2f\nmmx_fma_peak_gflop_s=%.2f\n", flops[0] / 1e9,
              gflops, peak);
  std::printf("mmx_tokens_per_s=%.1f\n", tps);
}
}  // namespace

void add_bench_train(CLI::App* bench, Action& action) {
  auto o = std::make_shared<TrainBenchOpts>();
  CLI::App* t = bench->add_subcommand("train", "Training-step speed (forward + backward + AdamW) of a checkpoint's model");
  t->add_option("-m,--model", o->model, "Checkpoint directory (weights are the starting point)")->required();
  t->add_option("--batch", o->batch, "Sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
  t->add_option("--seq-len", o->seq_len, "Tokens per sequence")->capture_default_str()->check(CLI::Range(2, 1 << 16));
  t->add_option("--steps", o->steps, "Timed steps (the median is reported)")->capture_default_str()->check(CLI::PositiveNumber);
  t->add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  t->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  t->add_flag("!--no-peak", o->peak, "Skip measuring the FMA peak");
  t->callback([o, &action] { action = [o] { bench_train(*o); }; });
}

}  // namespace mmx::cli
