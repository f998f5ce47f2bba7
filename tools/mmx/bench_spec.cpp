// mmx bench spec: what speculative decoding costs and gives (engine/speculator.h), measured.
//
//   verification cost   one step of S sequences each verifying K drafts (K + 1 logit rows in
//                       one forward_multi) / one plain decode step of the same S sequences, at
//                       the same context: c_v(K). On a memory-bound decode the weights are read
//                       once either way, so c_v stays near 1 while it lasts.
//   end to end          the engine generating from the same prompts plain and with the prompt-
//                       lookup drafter (K = 1..), batch S: tokens/s, drafts, acceptance per
//                       position, mean acceptance length. The same tokens come out (greedy).
//   the model           with acceptance a per position (i.i.d.), a step yields 1 + a + ... + a^K
//                       tokens for c_v(K) of a plain step's time (the lookup drafter costs ~0):
//                       predicted speed-up (1 + a + ... + a^K) / c_v(K), printed beside the measured.
// Medians of alternating rounds (plain, K = 1, 2, ... in each round). Nothing here is asserted.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "base/clock.h"
#include "common.h"
#include "engine/engine.h"
#include "formats/checkpoint.h"
#include "model/model.h"
#include "model/phase_times.h"
#include "ops/ops.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {

struct SpecOpts {
  std::string model, prompt;
  std::vector<int> ks = {1, 2, 3, 4}, batches = {1, 8};
  int n = 128, reps = 5, threads = 0, context = 256, steps = 16;
};

// One step's time for S sequences at `context`, each chunk of k + 1 rows asking all of them;
// `phases` (optional) gathers where it went.
double verify_step_s(Model& m, int seqs, int context, int k, int steps, PhaseTimes* phases = nullptr) {
  const ModelConfig& c = m.config();
  std::mt19937 rng(3);
  std::vector<KvCache> caches;
  std::vector<int32_t> ids(size_t(context + steps * (k + 1)));
  for (auto& t : ids) t = int32_t(rng() % uint32_t(c.vocab_size));
  std::vector<SeqChunk> chunks;
  for (int s = 0; s < seqs; ++s) {
    caches.push_back(m.make_cache(int64_t(ids.size())));
    std::vector<SeqChunk> one = {{0, context, &caches.back(), 1}};
    Buffer l(DType::kF32, {1, c.vocab_size});
    Tensor lt = l.t();
    m.forward_multi(Tensor(ids.data(), DType::kI32, {context}), one, lt);
  }
  for (int s = 0; s < seqs; ++s) chunks.push_back({int64_t(s) * (k + 1), k + 1, &caches[size_t(s)], k + 1});
  Buffer logits(DType::kF32, {int64_t(seqs) * (k + 1), c.vocab_size});
  Tensor lt = logits.t();
  std::vector<int32_t> tok(size_t(seqs * (k + 1)));
  m.set_phase_times(phases);
  const double t0 = now_s();
  for (int st = 0; st < steps; ++st) {
    for (int s = 0; s < seqs; ++s)
      std::copy_n(ids.begin() + context + st * (k + 1), k + 1, tok.begin() + s * (k + 1));
    m.forward_multi(Tensor(tok.data(), DType::kI32, {int64_t(tok.size())}), chunks, lt);
  }
  const double dt = (now_s() - t0) / steps;
  m.set_phase_times(nullptr);
  return dt;
}

struct E2E {
  double tok_s = 0;
  EngineMetrics m;
  std::vector<std::vector<int32_t>> out;
};

E2E run_engine(Model& m, const std::vector<std::vector<int32_t>>& prompts, int n, int k) {
  EngineOptions o;
  o.start_thread = false;
  o.max_running = int64_t(prompts.size());
  o.kv_dtype = DType::kF32;
  o.max_state_snapshots = 0;
  o.spec_k = k;
  if (k > 0) o.drafter = std::make_shared<PromptLookupDrafter>();
  Engine e(m, o);
  E2E r;
  r.out.resize(prompts.size());
  int64_t generated = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenRequest g;
    g.prompt = prompts[i];
    g.sampling.temperature = 0;
    g.max_tokens = n;
    g.ignore_eos = true;
    e.submit(g, [&r, &generated, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kToken) r.out[i].push_back(ev.token), ++generated;
    });
  }
  e.step();  // the prompts' prefill (and first tokens), not timed
  const int64_t first = generated;
  const double t0 = now_s();
  e.run_until_idle();
  r.tok_s = double(generated - first) / (now_s() - t0);
  r.m = e.metrics();
  return r;
}

void bench_spec(const SpecOpts& o) {
  ops::set_n_threads(o.threads);
  auto model = load_model(o.model, progress_bar);
  const Checkpoint ck = open_checkpoint(o.model);
  std::vector<int32_t> prompt;
  if (ck.has_tokenizer() && !o.prompt.empty()) prompt = load_tokenizer(ck).encode(o.prompt, true);
  if (prompt.size() < 8) fail("give a prompt of at least 8 tokens with -p (the drafter looks up its n-grams)");
  std::printf("model          %s (%d layers, d_model %lld), %d threads, prompt %zu tokens, %d generated\n",
              o.model.c_str(), model->config().n_layers, (long long)model->config().d_model, ops::n_threads(),
              prompt.size(), o.n);

  for (int s : o.batches) {
    std::printf("\nbatch %d\n", s);
    // Verification cost: K + 1 rows per sequence vs 1, medians of alternating rounds.
    std::vector<std::vector<double>> t(o.ks.size() + 1);
    for (int r = 0; r < o.reps; ++r) {
      t[0].push_back(verify_step_s(*model, s, o.context, 0, o.steps));
      for (size_t j = 0; j < o.ks.size(); ++j) t[j + 1].push_back(verify_step_s(*model, s, o.context, o.ks[j], o.steps));
    }
    const double t1 = median(t[0]);
    std::printf("  plain decode step at context %d: %.2f ms\n", o.context, 1e3 * t1);
    // Where a step goes, plain and at the largest K (one more run each, after the rounds).
    for (int k : {0, o.ks.back()}) {
      PhaseTimes ph;
      const double dt = verify_step_s(*model, s, o.context, k, o.steps, &ph);
      std::printf("  K = %d step %.2f ms:", k, 1e3 * dt);
      for (int p = 0; p < int(Phase::kCount); ++p) std::printf(" %s %.2f", kPhaseNames[p], 1e3 * ph.seconds[p] / o.steps);
      std::printf(" ms\n");
    }
    // End to end: s prompts (the prompt with its first i tokens dropped: different streams).
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < s; ++i) prompts.emplace_back(prompt.begin() + std::min<size_t>(size_t(i), prompt.size() - 8), prompt.end());
    std::vector<std::vector<double>> tps(o.ks.size() + 1);
    std::vector<E2E> last(o.ks.size() + 1);
    for (int r = 0; r < o.reps; ++r) {
      last[0] = run_engine(*model, prompts, o.n, 0);
      tps[0].push_back(last[0].tok_s);
      for (size_t j = 0; j < o.ks.size(); ++j) {
        last[j + 1] = run_engine(*model, prompts, o.n, o.ks[j]);
        tps[j + 1].push_back(last[j + 1].tok_s);
      }
    }
    const double plain = median(tps[0]);
    std::printf("  plain: %.1f tok/s\n", plain);
    std::printf("  %2s %8s %8s %10s %9s %-28s %8s %9s %9s %5s\n", "K", "verify", "c_v", "drafts", "accepted",
                "accepted by position", "mean len", "predicted", "measured", "same");
    for (size_t j = 0; j < o.ks.size(); ++j) {
      const int k = o.ks[j];
      const EngineMetrics& m = last[j + 1].m;
      const double cv = median(t[j + 1]) / t1;
      const double a = m.spec_draft_tokens ? double(m.spec_accepted) / double(m.spec_draft_tokens) : 0;
      double yield = 0;
      for (int i = 0; i <= k; ++i) yield += std::pow(a, i);
      std::string per;
      for (size_t p = 0; p < m.spec_accepted_per_pos.size(); ++p)
        per += (p ? "/" : "") + std::to_string(m.spec_accepted_per_pos[p]);
      std::printf("  %2d %6.2fms %8.2f %10lld %8.0f%% %-28s %8.2f %8.2fx %8.2fx %5s\n", k, 1e3 * median(t[j + 1]), cv,
                  (long long)m.spec_drafts, 100 * a, per.c_str(),
                  m.spec_drafts ? 1.0 + double(m.spec_accepted) / double(m.spec_drafts) : 1.0, yield / cv,
                  median(tps[j + 1]) / plain, last[j + 1].out == last[0].out ? "yes" : "NO");
    }
  }
  std::printf("\nc_v: one verification step (K + 1 rows a sequence) / one plain decode step. predicted: "
              "(1 + a + ... + a^K) / c_v with a = accepted / drafted (i.i.d. model; lookup drafts cost ~0). "
              "measured: end-to-end tokens/s / plain. same: the greedy tokens equal plain decoding's.\n");
}

}  // namespace

void add_bench_spec(CLI::App* bench, Action& action) {
  auto o = std::make_shared<SpecOpts>();
  CLI::App* c = bench->add_subcommand("spec", "Speculative decoding: verification cost, acceptance and speed-up, "
                                              "prompt-lookup drafts vs plain decode");
  c->add_option("-m,--model", o->model, "Checkpoint directory (with tokenizer.json)")->required();
  c->add_option("-p,--prompt", o->prompt, "Prompt text (drafts come from its repetitions)")->required();
  c->add_option("-k,--k", o->ks, "Drafted tokens per step to try (comma-separated)")->delimiter(',')->capture_default_str();
  c->add_option("-b,--batch", o->batches, "Sequences decoding together (comma-separated)")->delimiter(',')->capture_default_str();
  c->add_option("-n,--n-predict", o->n, "Tokens to generate per sequence")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  c->add_option("-c,--context", o->context, "Context of the verification-cost steps")->capture_default_str();
  c->add_option("-r,--reps", o->reps, "Alternating rounds (medians reported)")->capture_default_str()->check(CLI::Range(1, 100));
  c->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  c->callback([o, &action] { action = [o] { bench_spec(*o); }; });
}

}  // namespace mmx::cli
