// mmx bench: speed as a fraction of this machine's measured limits.
//   mmx bench peak                 STREAM-like bandwidth (copy, read) and the FP32 FMA peak
//   mmx bench model -m DIR [...]   prefill and decode tokens/s (medians of --reps runs), the
//                                  bytes a decode token streams and the achieved bandwidth, the
//                                  prefill FLOP/s, each as a fraction of the measured peaks
//   mmx bench batch -m DIR [...]   continuous batching's gain: S sequences decoding together in
//                                  one fused forward_multi per step vs one forward() each
//   mmx bench train -m DIR [...]   training-step tokens/s and GEMM FLOP/s vs the FMA peak (bench_train.cpp)
// Nothing here is asserted: benchmarks report, tests decide correctness.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "base/clock.h"
#include "bench_peak.h"
#include "common.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {

// What one token costs: bytes streamed by a decode step and FLOPs of the weight GEMMs.
struct TokenCost {
  double decode_bytes = 0;     // weights read per decode token (active experts only)
  double flops_per_token = 0;  // 2 x active weight elements (no lm_head, no attention scores)
};

TokenCost token_cost(const std::string& dir, const ModelConfig& c) {
  const TensorStore st = TensorStore::open(dir);
  TokenCost tc;
  double expert_bytes = 0, expert_elems = 0, other_elems = 0;
  for (const auto& name : st.names()) {
    const TensorInfo& ti = st.info(name);
    double elems = 1;
    for (int64_t s : ti.shape) elems *= double(s);
    if (name.find(".experts.") != std::string::npos) {
      expert_bytes += double(ti.size_bytes);
      if (name.find("_scale_inv") == std::string::npos) expert_elems += elems;
    } else if (name == "model.embed_tokens.weight") {
      tc.decode_bytes += double(ti.size_bytes) / double(c.vocab_size);  // one row
    } else {
      tc.decode_bytes += double(ti.size_bytes);
      if (name.find("_scale_inv") == std::string::npos && name != "lm_head.weight") other_elems += elems;
    }
  }
  const double active = double(c.n_experts_active) / double(c.n_experts);
  tc.decode_bytes += expert_bytes * active;
  tc.flops_per_token = 2.0 * (other_elems + expert_elems * active);
  return tc;
}

struct ModelOpts {
  std::string model;
  int prompt = 64, gen = 16, reps = 5, threads = 0;
  bool peak = true;
};

void bench_model(const ModelOpts& o) {
  ops::set_n_threads(o.threads);
  const int nt = ops::n_threads();
  auto model = load_model(o.model, progress_bar);
  const ModelConfig& c = model->config();
  const TokenCost tc = token_cost(o.model, c);

  std::mt19937 rng(1);
  std::vector<int32_t> ids(o.prompt), pos(o.prompt);
  for (int i = 0; i < o.prompt; ++i) ids[i] = int32_t(rng() % c.vocab_size), pos[i] = i;
  Buffer logits(DType::kF32, {1, c.vocab_size});
  std::vector<double> prefill, decode;
  for (int r = 0; r < o.reps + 1; ++r) {  // run 0 warms caches and page tables; not counted
    KvCache kv = model->make_cache(o.prompt + o.gen);
    ForwardBatch b;
    b.tokens = Tensor(ids.data(), DType::kI32, {o.prompt});
    b.positions = Tensor(pos.data(), DType::kI32, {o.prompt});
    double t = now_s();
    model->forward(b, kv, logits.t());
    const double tp = now_s() - t;
    int32_t tok = argmax(logits.f32(), c.vocab_size), p = o.prompt;
    b.tokens = Tensor(&tok, DType::kI32, {1});
    b.positions = Tensor(&p, DType::kI32, {1});
    t = now_s();
    for (int i = 0; i < o.gen; ++i) {
      b.pos0 = p;
      model->forward(b, kv, logits.t());
      tok = argmax(logits.f32(), c.vocab_size);
      ++p;
    }
    const double td = now_s() - t;
    if (r > 0) {
      prefill.push_back(o.prompt / tp);
      decode.push_back(o.gen / td);
    }
  }
  const double pf = median(prefill), dc = median(decode);
  std::printf("model             %s (%d layers, d_model %lld, %d experts top-%d, vocab %lld)\n",
              o.model.c_str(), c.n_layers, (long long)c.d_model, c.n_experts, c.n_experts_active,
              (long long)c.vocab_size);
  std::printf("threads           %d\n", nt);
  std::printf("prefill           %.1f tok/s (median of %d, prompt %d)\n", pf, o.reps, o.prompt);
  std::printf("decode            %.2f tok/s (median of %d, %d tokens after the prompt)\n", dc, o.reps, o.gen);
  std::printf("decode bytes/tok  %.1f MB (active weights)\n", tc.decode_bytes / 1e6);
  std::printf("prefill flop/tok  %.3f GFLOP (weight GEMMs)\n", tc.flops_per_token / 1e9);
  const double bw = dc * tc.decode_bytes / 1e9, fl = pf * tc.flops_per_token / 1e9;
  std::printf("decode bandwidth  %.2f GB/s\n", bw);
  std::printf("prefill compute   %.2f GFLOP/s\n", fl);
  if (o.peak) {
    const MemBandwidth mb = measure_bandwidth(512, 5, nt);
    const double fma = measure_fma_gflops(nt);
    std::printf("machine           read %.2f GB/s, copy %.2f GB/s, FMA peak %.1f GFLOP/s (%d threads)\n",
                mb.read_gbs, mb.copy_gbs, fma, nt);
    std::printf("fraction          decode %.0f%% of read bandwidth; prefill %.0f%% of FMA peak\n",
                100 * bw / mb.read_gbs, 100 * fl / fma);
  }
}

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
  const TokenCost tc = token_cost(o.model, c);
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
  std::printf("separate decode   %.2f GB/s of weights (%.1f MB per token)\n", ms * tc.decode_bytes / 1e9,
              tc.decode_bytes / 1e6);
}

}  // namespace

void add_bench(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("bench", "Benchmarks: machine peaks and model speed as a fraction of them");
  c->require_subcommand(1);

  auto threads = std::make_shared<int>(0);
  CLI::App* peak = c->add_subcommand("peak", "Measure memory bandwidth (STREAM-like) and the FP32 FMA peak");
  peak->add_option("-t,--threads", *threads, "Threads (0 = all cores)");
  peak->callback([threads, &action] {
    action = [threads] {
      ops::set_n_threads(*threads);
      const int nt = ops::n_threads();
      const MemBandwidth mb = measure_bandwidth(1024, 7, nt);
      std::printf("memory bandwidth  read %.2f GB/s, copy %.2f GB/s (median of 7, 1 GiB arrays, %d threads)\n",
                  mb.read_gbs, mb.copy_gbs, nt);
      std::printf("fp32 FMA peak     %.1f GFLOP/s (%d threads)\n", measure_fma_gflops(nt), nt);
    };
  });

  auto o = std::make_shared<ModelOpts>();
  CLI::App* m = c->add_subcommand("model", "Prefill and decode speed of a checkpoint");
  m->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  m->add_option("-p,--prompt", o->prompt, "Prompt tokens for prefill")->check(CLI::Range(1, 1 << 20));
  m->add_option("-n,--gen", o->gen, "Decode steps")->check(CLI::Range(1, 1 << 20));
  m->add_option("-r,--reps", o->reps, "Repetitions (the median is reported)")->check(CLI::Range(1, 1000));
  m->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  m->add_flag("!--no-peak", o->peak, "Skip measuring the machine peaks");
  m->callback([o, &action] { action = [o] { bench_model(*o); }; });

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
}

}  // namespace mmx::cli
