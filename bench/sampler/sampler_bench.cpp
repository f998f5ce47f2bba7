// Sampling cost over a 200K vocabulary: the engine's Sampler against the naive fp64 reference
// (engine/sampler_ref.h: a full sort of the vocabulary, the algorithm the Sampler had before),
// in one run, for the settings clients send. Logits are LLM-like (a peaked head over a long
// Gaussian tail); the penalty case has 256 prompt and 256 generated ids behind it. Times pick()
// (the whole per-token path but the RNG draw) and reports medians in microseconds and the ratio.
//   sampler_bench [--vocab 200064] [--reps 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampler_ref.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_us(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t vocab = 200064;
  int reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--vocab")) vocab = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: sampler_bench [--vocab N] [--reps N]\n");
      return 2;
    }
  }
  std::mt19937_64 g(1);
  std::normal_distribution<float> tail(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& x : logits) x = tail(g);
  for (int i = 0; i < 20; ++i) logits[size_t(g() % uint64_t(vocab))] = 12.0f + float(i) * 0.3f;  // the likely head

  struct Case {
    const char* name;
    mmx::SamplingParams p;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, float t, int k, float top_p, float min_p) {
    mmx::SamplingParams p;
    p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p, p.seed = 7;
    cases.push_back({name, p});
  };
  add("greedy", 0.0f, 0, 1.0f, 0.0f);
  add("T=1 (top_k 0, top_p 1)", 1.0f, 0, 1.0f, 0.0f);
  add("T=1 top_p 0.95", 1.0f, 0, 0.95f, 0.0f);
  add("T=0.7 min_p 0.05", 0.7f, 0, 1.0f, 0.05f);
  add("T=1 top_k 40 top_p 0.95 (M2 default)", 1.0f, 40, 0.95f, 0.0f);
  {
    mmx::SamplingParams p;
    p.temperature = 1.0f, p.top_p = 0.95f, p.seed = 7;
    p.presence_penalty = 0.5f, p.frequency_penalty = 0.5f, p.repetition_penalty = 1.1f;
    cases.push_back({"T=1 top_p 0.95 + penalties (256+256 ids)", p});
  }
  std::printf("sampling one token over a %lld-id vocabulary, median of %d runs (us)\n", (long long)vocab, reps);
  std::printf("%-40s %12s %14s %8s\n", "setting", "Sampler", "reference", "speedup");
  std::vector<int32_t> prompt;
  for (int i = 0; i < 256; ++i) prompt.push_back(int32_t(g() % uint64_t(vocab)));
  for (const Case& c : cases) {
    mmx::Sampler s(c.p, prompt);
    if (c.p.presence_penalty != 0) {  // 256 generated ids for the penalties to look at
      std::vector<float> forced(static_cast<size_t>(vocab), 0.0f);
      for (int i = 0; i < 256; ++i) {
        const size_t id = size_t(g() % uint64_t(vocab));
        forced[id] = 100.0f;
        s.sample(forced.data(), vocab);
        forced[id] = 0.0f;
      }
    }
    volatile int32_t sink = 0;
    int k = 0;
    const double fast = time_us(reps, [&] { sink = s.pick(logits.data(), vocab, (k++ % 7 + 0.5) / 7); });
    const double ref = time_us(std::max(reps / 10, 5), [&] {
      sink = mmx::sample_reference(logits.data(), vocab, c.p, s.state(), s.stop_ids(), (k++ % 7 + 0.5) / 7);
    });
    (void)sink;
    std::printf("%-40s %12.1f %14.1f %7.1fx\n", c.name, fast, ref, ref / fast);
  }
  return 0;
}
