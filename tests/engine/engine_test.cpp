// Continuous batching: greedy output is identical whether a request runs alone, in a batch of 8
// mixed lengths, with chunked prefill mixed into decodes (small step budgets), with a prefix-cache
// hit, or after a preemption (a pool too small for the batch), for every family — with the paged
// memory's check_integrity() after every step; cancellation frees at once and stops events;
// queue-full, over-context and invalid ids are refused with the right (typed) refusal; logprobs
// are the log-softmax of the logits; sampled streams agree alone / batched / preempted.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "tiny/tiny.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

std::string tiny_dir(const std::string& arch) { return testing::tiny_dir(arch, "f32", 5); }

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string finish;
  int64_t n_cached = 0;
  int n_done_events = 0;
};

std::vector<int32_t> prompt(int n, uint64_t seed) { return testing::random_ids(n, 500, seed); }

EngineOptions test_options(int64_t batch_tokens, int64_t max_running = 16) {
  EngineOptions o;
  o.start_thread = false;
  o.check_integrity = true;  // pages, ref counts and the prefix cache agree after every step
  o.max_batch_tokens = batch_tokens;
  o.max_running = max_running;
  o.state_checkpoint_every = 16;  // lightning prefix hits at multiples of 16 tokens
  o.kv_pages = 2048 / 4;          // 512 pages: 2048 tokens (M3's page of 4) or 8192 (page 16)
  return o;
}

// Submits the requests to `e` (driven on this thread), runs them to the end, collects events.
// Greedy unless `sp` is given; then request i samples with sp and seed sp->seed + i.
std::vector<Result> run_on(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                           const SamplingParams* sp = nullptr) {
  std::vector<Result> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenRequest r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    if (sp) r.sampling = *sp, r.sampling.seed = sp->seed + i;
    r.max_tokens = max_tokens;
    e.submit(r, [&out, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kToken) out[i].ids.push_back(ev.token), out[i].logprobs.push_back(ev.logprob);
      else if (ev.kind == GenEvent::kDone)
        out[i].finish = ev.finish_reason, out[i].n_cached = ev.n_cached, ++out[i].n_done_events;
      else ADD_FAILURE() << ev.error;
    });
  }
  e.run_until_idle();
  EXPECT_EQ(e.metrics().kv_pages_used, 0);  // everything released
  EXPECT_EQ(e.metrics().requests_running + e.metrics().requests_waiting, 0);
  return out;
}

std::vector<Result> run(Model& m, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                        int64_t batch_tokens, int64_t max_running = 16, const SamplingParams* sp = nullptr) {
  Engine e(m, test_options(batch_tokens, max_running));
  return run_on(e, prompts, max_tokens, sp);
}

class EngineFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineFamilies, BatchedEqualsAlone) {
  auto model = load_model(tiny_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt(3 + 9 * i, 100 + i));  // 3 .. 66 tokens
  std::vector<Result> alone;
  for (const auto& p : prompts) alone.push_back(run(*model, {p}, 12, 4096)[0]);
  for (int64_t budget : {int64_t(4096), int64_t(16), int64_t(5)}) {  // 5, 16: chunked prefill mixed with decodes
    SCOPED_TRACE(fmt::format("step budget {}", budget));
    const std::vector<Result> batched = run(*model, prompts, 12, budget);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(batched[i].ids, alone[i].ids) << "request " << i;
      EXPECT_EQ(batched[i].finish, "length");
      EXPECT_EQ(batched[i].n_done_events, 1);
    }
  }
  // The greedy stream is the argmax of an independent path: one prefill of prompt + output into a
  // fresh contiguous cache, all positions' logits (no pages, no scheduler, no sampler).
  for (size_t i : {size_t(0), size_t(3), size_t(7)}) {
    std::vector<int32_t> all = prompts[i];
    all.insert(all.end(), alone[i].ids.begin(), alone[i].ids.end());
    const Buffer lg = prefill_logits(*model, all, 0);
    const int64_t V = model->config().vocab_size, n0 = int64_t(prompts[i].size());
    for (size_t k = 0; k < alone[i].ids.size(); ++k) {
      const float* row = lg.f32() + (n0 - 1 + int64_t(k)) * V;
      EXPECT_EQ(alone[i].ids[k], int32_t(std::max_element(row, row + V) - row)) << "request " << i << " token " << k;
    }
  }
  // generate() is the same engine for one request.
  GenRequest g;
  g.prompt = prompts[3];
  g.sampling.temperature = 0;
  g.max_tokens = 12;
  EXPECT_EQ(generate(*model, g, nullptr), alone[3].ids);
}

// Prefix cache: a request whose prompt shares a prefix with an earlier one maps the cached pages
// (and, for lightning layers, a state snapshot) and still produces the cold run's tokens — when
// the earlier request has finished, and when both run together in one batch.
TEST_P(EngineFamilies, PrefixHitEqualsCold) {
  auto model = load_model(tiny_dir(GetParam()));
  const std::vector<int32_t> system = prompt(40, 7);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = system;
    const std::vector<int32_t> tail = prompt(1 + 5 * i, 300 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  prompts.push_back(system);  // the whole prompt cached: its last token is recomputed
  prompts.push_back(std::vector<int32_t>(system.begin(), system.begin() + 32));  // ... in a shared page
  std::vector<Result> cold;
  for (const auto& p : prompts) cold.push_back(run(*model, {p}, 10, 4096)[0]);
  for (int64_t budget : {int64_t(4096), int64_t(7)}) {
    SCOPED_TRACE(fmt::format("step budget {}", budget));
    Engine e(*model, test_options(budget));
    run_on(e, {prompts[0]}, 10);  // warms the cache
    const std::vector<Result> warm = run_on(e, prompts, 10);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(warm[i].ids, cold[i].ids) << "request " << i;
      EXPECT_GT(warm[i].n_cached, 0) << "request " << i;
      EXPECT_EQ(cold[i].n_cached, 0);
    }
    // Lightning layers resume only at a state snapshot (every 16 tokens here); K/V layers reuse
    // every full page up to the last token.
    const bool hybrid = GetParam() == "minimax_text01";
    const int64_t page = e.memory().page();
    // (the requests share the 40-token system prompt with the warm-up request, no more)
    EXPECT_EQ(warm[1].n_cached, hybrid ? 32 : 40 / page * page);
    EXPECT_EQ(warm[4].n_cached, hybrid ? 32 : std::min<int64_t>(40 / page * page, 39));
    // 32 tokens = whole pages: the recomputed last row goes to a copy of the shared page.
    EXPECT_EQ(warm[5].n_cached, hybrid ? 16 : 31);
    const EngineMetrics m = e.metrics();
    EXPECT_GT(m.prefix_hits_tokens, 0);
    EXPECT_LT(m.prefix_hits_tokens, m.prefix_lookup_tokens);
  }
}

// Preemption: a KV pool far too small for 8 requests at once forces the engine to send
// sequences back to the queue and recompute them; every stream is still the one it has alone.
TEST_P(EngineFamilies, PreemptedEqualsAlone) {
  auto model = load_model(tiny_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt(10 + 7 * i, 400 + i));  // 10 .. 59 tokens
  std::vector<Result> alone;
  for (const auto& p : prompts) alone.push_back(run(*model, {p}, 12, 4096)[0]);
  EngineOptions o = test_options(48);
  const int64_t page = model->config().kv_page();
  o.kv_pages = (96 + page - 1) / page;  // ~96 tokens for 8 sequences of up to 71
  Engine e(*model, o);
  const std::vector<Result> got = run_on(e, prompts, 12);
  EXPECT_GT(e.preemptions(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].ids, alone[i].ids) << "request " << i;
    EXPECT_EQ(got[i].n_done_events, 1);
  }
}

// Sampling at temperature 1 (top-p and the penalties on, fixed seeds): each stream is the same
// alone, batched with chunked prefill, and after preemption — the seeded RNG and the penalty
// state travel with the request, and the logits do not depend on the batch.
TEST_P(EngineFamilies, SampledAloneBatchedPreemptedAgree) {
  auto model = load_model(tiny_dir(GetParam()));
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.seed = 77;
  sp.presence_penalty = 0.3f, sp.frequency_penalty = 0.2f, sp.repetition_penalty = 1.2f;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt(8 + 9 * i, 700 + i));
  std::vector<Result> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams one = sp;
    one.seed = sp.seed + i;  // the seed run_on gives request i
    alone.push_back(run(*model, {prompts[i]}, 16, 4096, 16, &one)[0]);
  }
  const std::vector<Result> batched = run(*model, prompts, 16, 16, 16, &sp);
  EngineOptions o = test_options(48);
  const int64_t page = model->config().kv_page();
  o.kv_pages = (96 + page - 1) / page;
  Engine e(*model, o);
  const std::vector<Result> preempted = run_on(e, prompts, 16, &sp);
  EXPECT_GT(e.preemptions(), 0);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i].ids, alone[i].ids) << "request " << i;
    EXPECT_EQ(preempted[i].ids, alone[i].ids) << "request " << i;
    distinct.insert(alone[i].ids);
  }
  EXPECT_EQ(distinct.size(), prompts.size());  // really sampled per request
}

// n choices of one prompt (or a burst of requests with one system prompt) arrive together: the
// first computes the shared pages, the others wait for them to be committed and hit the cache,
// and every stream is still the alone stream.
TEST_P(EngineFamilies, SimultaneousSamePromptComputedOnce) {
  auto model = load_model(tiny_dir(GetParam()));
  const std::vector<int32_t> p = prompt(70, 21);
  const std::vector<Result> alone = run(*model, {p}, 6, 4096);
  Engine e(*model, test_options(16));  // chunked: the shared prompt takes several steps
  const std::vector<Result> got = run_on(e, {p, p, p, p}, 6);
  // What a follower can map: whole pages up to token 69; lightning layers at a 16-token snapshot.
  const int64_t page = e.memory().page();
  const int64_t usable = GetParam() == "minimax_text01" ? 64 : std::min<int64_t>(70 / page * page, 69);
  EXPECT_EQ(got[0].n_cached, 0);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].ids, alone[0].ids) << "request " << i;
    if (i > 0) {
      EXPECT_EQ(got[i].n_cached, usable) << "request " << i;
    }
  }
}

// BF16 KV pages (--kv-dtype bf16): batching, chunking, prefix hits and preemption stay exact
// among BF16 runs (the rounding happens once, at the KV write, the same way in every schedule).
TEST_P(EngineFamilies, Bf16PagesBatchedPreemptedEqualAlone) {
  auto model = load_model(tiny_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> stem = prompt(24, 5);
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = stem;
    const std::vector<int32_t> tail = prompt(3 + 6 * i, 900 + uint64_t(i));
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  // M3 also with its index keys as E4M3 (--index-key-dtype f8): rounded once at the write too.
  std::vector<std::optional<DType>> ik_dtypes = {std::nullopt};
  for (const LayerCacheSpec& l : model->cache_specs())
    if (l.index_dim > 0) {
      ik_dtypes.push_back(DType::kF8E4M3);
      break;
    }
  for (const std::optional<DType> ik : ik_dtypes) {
    SCOPED_TRACE(ik ? "f8 index keys" : "bf16 index keys");
    EngineOptions o = test_options(4096);
    o.kv_dtype = DType::kBF16;
    o.ik_dtype = ik;
    std::vector<Result> alone;
    for (const auto& p : prompts) {
      Engine e(*model, o);
      alone.push_back(run_on(e, {p}, 10)[0]);
    }
    EngineOptions small = test_options(12);
    small.kv_dtype = DType::kBF16;
    small.ik_dtype = ik;
    const int64_t page = model->config().kv_page();
    small.kv_pages = (96 + page - 1) / page;
    Engine e(*model, small);
    const std::vector<Result> got = run_on(e, prompts, 10);
    EXPECT_GT(e.preemptions(), 0);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i].ids, alone[i].ids) << "request " << i;
  }
}

// Everything at once: requests sharing prefixes, a pool small enough to preempt, chunked prefill,
// and cancellations at random steps. Integrity holds after every step, the pool drains to zero,
// and every request that was not cancelled produces exactly its tokens from a roomy run.
TEST_P(EngineFamilies, RandomCancelsWithPreemptionAndPrefixHits) {
  auto model = load_model(tiny_dir(GetParam()));
  std::mt19937 rng(11);
  const std::vector<int32_t> stem = prompt(48, 9);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p(stem.begin(), stem.begin() + 8 + long(rng() % 40));
    const std::vector<int32_t> tail = prompt(1 + int(rng() % 12), 700 + uint64_t(i));
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  const std::vector<Result> roomy = run(*model, prompts, 10, 4096);

  EngineOptions o = test_options(24, 6);
  const int64_t page = model->config().kv_page();
  o.kv_pages = (96 + page - 1) / page;  // requests need up to 69 tokens
  Engine e(*model, o);
  std::vector<Result> got(prompts.size());
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenRequest r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.max_tokens = 10;
    ids.push_back(e.submit(r, [&got, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kToken) got[i].ids.push_back(ev.token);
      else if (ev.kind == GenEvent::kDone) got[i].finish = ev.finish_reason, ++got[i].n_done_events;
      else ADD_FAILURE() << ev.error;
    }));
  }
  std::set<size_t> cancelled;
  for (int steps = 0; e.step(); ++steps) {
    ASSERT_LT(steps, 10000);
    if (rng() % 6 == 0) {  // cancel a random request (maybe finished already: a no-op then)
      const size_t i = rng() % ids.size();
      e.cancel(ids[i]);
      if (got[i].n_done_events == 0) cancelled.insert(i);
    }
  }
  EXPECT_GT(e.preemptions(), 0);
  EXPECT_FALSE(cancelled.empty());
  EXPECT_EQ(e.metrics().kv_pages_used, 0);
  EXPECT_EQ(e.metrics().requests_running + e.metrics().requests_waiting, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (cancelled.count(i)) {
      EXPECT_EQ(got[i].n_done_events, 0) << "request " << i;  // no event after cancel()
      continue;
    }
    EXPECT_EQ(got[i].ids, roomy[i].ids) << "request " << i;
    EXPECT_EQ(got[i].n_done_events, 1) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, EngineFamilies, ::testing::Values("minimax_m2", "minimax_text01", "minimax_m3"));

// Logprobs (and the top alternatives) are the log-softmax of the model's logits at each step,
// checked against an fp64 log-softmax of prefill_logits over the prompt + the sampled tokens.
// An idle engine holds a lone request for batch_wait_ms so a burst can join its first step, and
// starts at once when the burst fills max_running. Only lower bounds and a generous upper bound
// on time (the tiny model's steps take milliseconds).
TEST(Engine, IdleEngineWaitsForABurst) {
  auto model = load_model(tiny_dir("minimax_m2"));
  using clk = std::chrono::steady_clock;
  auto first_token_after = [&](int n_requests, double wait_ms) {
    EngineOptions o;
    o.max_running = 2;
    o.batch_wait_ms = wait_ms;
    Engine e(*model, o);
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    clk::time_point first{};
    const clk::time_point t0 = clk::now();
    for (int i = 0; i < n_requests; ++i) {
      GenRequest r;
      r.prompt = prompt(5, 40 + uint64_t(i));
      r.sampling.temperature = 0;
      r.max_tokens = 2;
      e.submit(r, [&](const GenEvent& ev) {
        std::lock_guard<std::mutex> l(mu);
        if (ev.kind == GenEvent::kToken && first == clk::time_point{}) first = clk::now();
        if (ev.kind != GenEvent::kToken) ++done;
        cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done == n_requests; });
    return std::chrono::duration<double, std::milli>(first - t0).count();
  };
  EXPECT_GE(first_token_after(1, 300), 300.0);  // alone: it waited for company
  EXPECT_LT(first_token_after(2, 5000), 4000.0);  // a full burst starts at once
  EXPECT_LT(first_token_after(1, 0), 4000.0);
}

TEST(Engine, LogprobsAreTheLogSoftmaxOfTheLogits) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  // F32 pages, as the oracle's cache (prefill_logits): this checks the log-softmax to 1e-5, not
  // the bf16 rounding of the default pages (bounded in kv_bf16_test, docs/numerics.md).
  o.kv_dtype = DType::kF32;
  Engine e(*model, o);
  GenRequest r;
  r.prompt = prompt(9, 3);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 5;
  r.max_tokens = 6;
  r.top_logprobs = 4;
  std::vector<GenEvent> evs;
  e.submit(r, [&](const GenEvent& ev) {
    if (ev.kind == GenEvent::kToken) evs.push_back(ev);
  });
  e.run_until_idle();
  ASSERT_EQ(evs.size(), 6u);
  std::vector<int32_t> ids = r.prompt;
  for (const GenEvent& ev : evs) ids.push_back(ev.token);
  ids.pop_back();  // the last token's logits are not needed
  const Buffer logits = prefill_logits(*model, ids, 0);  // [n, vocab]
  const int64_t V = model->config().vocab_size;
  for (size_t j = 0; j < evs.size(); ++j) {
    const float* row = logits.f32() + (int64_t(r.prompt.size()) - 1 + int64_t(j)) * V;
    double mx = row[0], z = 0;
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
    auto lsm = [&](int32_t id) { return double(row[id]) - mx - std::log(z); };
    EXPECT_NEAR(evs[j].logprob, lsm(evs[j].token), 1e-5) << "token " << j;
    ASSERT_EQ(evs[j].top.size(), 4u);
    for (const TokenLogprob& t : evs[j].top) EXPECT_NEAR(t.logprob, lsm(t.id), 1e-5);
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    EXPECT_EQ(evs[j].top[0].id, best);
  }
}

// logprobs = false (what the server sends when a request does not ask for them): the same tokens,
// no log-softmax (NaN logprobs, no alternatives); top_logprobs without logprobs is refused.
TEST(Engine, LogprobsOffSkipsTheLogSoftmax) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  Engine e(*model, o);
  auto run = [&](bool lp, int top) {
    GenRequest r;
    r.prompt = prompt(9, 3);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 5;
    r.max_tokens = 6;
    r.logprobs = lp;
    r.top_logprobs = top;
    std::vector<GenEvent> evs;
    e.submit(r, [&](const GenEvent& ev) { evs.push_back(ev); });
    e.run_until_idle();
    return evs;
  };
  const std::vector<GenEvent> on = run(true, 0), off = run(false, 0);
  ASSERT_EQ(on.size(), off.size());
  for (size_t j = 0; j + 1 < on.size(); ++j) {
    EXPECT_EQ(off[j].token, on[j].token);
    EXPECT_FALSE(std::isnan(on[j].logprob));
    EXPECT_TRUE(std::isnan(off[j].logprob));
    EXPECT_TRUE(off[j].top.empty());
  }
  const std::vector<GenEvent> bad = run(false, 3);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].kind, GenEvent::kError);
  EXPECT_EQ(bad[0].refusal, GenEvent::kInvalid);
}

// ignore_eos: the model's eos ids do not stop a request (its own stop ids still do); min_tokens
// masks every stop id until that many tokens were generated.
TEST(Engine, IgnoreEosAndMinTokens) {
  auto model = load_model(tiny_dir("minimax_m2"));
  auto greedy = [&](std::vector<int32_t> eos, bool ignore_eos, int64_t min_tokens) {
    EngineOptions o;
    o.start_thread = false;
    o.eos_ids = std::move(eos);
    Engine e(*model, o);
    GenRequest r;
    r.prompt = prompt(7, 9);
    r.sampling.temperature = 0;
    r.sampling.min_tokens = min_tokens;
    r.ignore_eos = ignore_eos;
    r.max_tokens = 8;
    Result out;
    e.submit(r, [&](const GenEvent& ev) {
      if (ev.kind == GenEvent::kToken) out.ids.push_back(ev.token);
      if (ev.kind == GenEvent::kDone) out.finish = ev.finish_reason;
    });
    e.run_until_idle();
    return out;
  };
  const Result free_run = greedy({}, false, 0);
  ASSERT_EQ(free_run.ids.size(), 8u);
  const int32_t third = free_run.ids[2];  // make the 3rd greedy token an eos
  const Result stopped = greedy({third}, false, 0);
  EXPECT_EQ(stopped.finish, "stop");
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(free_run.ids.begin(), free_run.ids.begin() + 3));
  const Result ignored = greedy({third}, true, 0);
  EXPECT_EQ(ignored.finish, "length");
  EXPECT_EQ(ignored.ids, free_run.ids);
  const Result held = greedy({third}, false, 4);  // the eos is masked at step 3: another token
  EXPECT_GE(held.ids.size(), 4u);
  EXPECT_NE(held.ids[2], third);
}

TEST(Engine, CancelStopsEventsAndFreesMemory) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  Engine e(*model, o);
  GenRequest r;
  r.prompt = prompt(8, 2);
  r.max_tokens = 50;
  int tokens = 0;
  const uint64_t id = e.submit(r, [&](const GenEvent& ev) { tokens += ev.kind == GenEvent::kToken; });
  for (int i = 0; i < 4; ++i) e.step();
  EXPECT_GT(e.metrics().kv_pages_used, 0);
  e.cancel(id);
  EXPECT_EQ(e.metrics().kv_pages_used, 0);
  EXPECT_EQ(e.metrics().requests_running, 0);
  const int seen = tokens;
  e.run_until_idle();
  EXPECT_EQ(tokens, seen);
  e.cancel(id);  // idempotent
}

// Fair admission (scheduler.h): a client holding every running slot gives one up at once to a
// second client's request — whose first token comes in the very next step — and the preempted
// sequence, recomputed later, still produces exactly its stream alone. With the same request
// under the first client's name (one client: FIFO) it waits: the rule is what makes the difference.
TEST(Engine, FairAdmissionGivesAWaitingClientASlotAtOnce) {
  auto model = load_model(tiny_dir("minimax_m2"));
  for (const bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "second client" : "same client");
    Engine e(*model, test_options(4096, /*max_running=*/8));
    std::vector<std::vector<int32_t>> a_ids(8);
    for (int i = 0; i < 8; ++i) {
      GenRequest r;
      r.prompt = prompt(6 + i, 300 + uint64_t(i));
      r.sampling.temperature = 0;
      r.max_tokens = 24;
      r.client = "addr:10.0.0.1";
      e.submit(r, [&a_ids, i](const GenEvent& ev) {
        if (ev.kind == GenEvent::kToken) a_ids[size_t(i)].push_back(ev.token);
      });
    }
    for (int k = 0; k < 3; ++k) e.step();
    ASSERT_EQ(e.metrics().requests_running, 8);
    GenRequest b;
    b.prompt = prompt(9, 400);
    b.sampling.temperature = 0;
    b.max_tokens = 4;
    b.client = fair ? "addr:10.0.0.2" : "addr:10.0.0.1";
    int b_tokens = 0;
    e.submit(b, [&](const GenEvent& ev) { b_tokens += ev.kind == GenEvent::kToken; });
    e.step();
    if (fair) EXPECT_EQ(b_tokens, 1) << "its prefill ran in the first step after it arrived";
    else EXPECT_EQ(b_tokens, 0) << "FIFO: it waits for a slot";
    e.run_until_idle();
    EXPECT_EQ(b_tokens, 4);
    for (int i = 0; i < 8; ++i) {
      const std::vector<int32_t> alone = run(*model, {prompt(6 + i, 300 + uint64_t(i))}, 24, 4096)[0].ids;
      EXPECT_EQ(a_ids[size_t(i)], alone) << "request " << i;
    }
  }
}

// Three clients: one holding all 8 slots, two arriving with 4 requests each. After one step the
// slots are shared max-min fairly (counts within one of each other), never by thrashing: the
// preemptions are exactly the slots that changed hands.
TEST(Engine, FairAdmissionSharesSlotsMaxMin) {
  auto model = load_model(tiny_dir("minimax_m2"));
  Engine e(*model, test_options(4096, 8));
  auto submit = [&](const std::string& client, int n, uint64_t seed) {
    for (int i = 0; i < n; ++i) {
      GenRequest r;
      r.prompt = prompt(5, seed + uint64_t(i));
      r.sampling.temperature = 0;
      r.max_tokens = 40;
      r.client = client;
      e.submit(r, [](const GenEvent&) {});
    }
  };
  submit("a", 8, 10);
  for (int k = 0; k < 2; ++k) e.step();
  submit("b", 4, 20);
  submit("c", 4, 30);
  e.step();
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.requests_running, 8);
  EXPECT_EQ(m.preemptions, 5) << "a: 8 -> 3, b: 3, c: 2";
  for (int k = 0; k < 5; ++k) e.step();
  EXPECT_EQ(e.metrics().preemptions, 5) << "no slot changes hands while the shares are even";
  e.run_until_idle();
}

TEST(Engine, RefusalsAreTyped) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  o.max_waiting = 2;
  Engine e(*model, o);
  std::map<int, int> status;  // request index -> refusal
  GenRequest ok;
  ok.prompt = {1, 2, 3};
  // queue of 2: the third waiting request is refused as busy (the server answers 429)
  for (int i = 0; i < 3; ++i)
    e.submit(ok, [&status, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kError) status[i] = ev.refusal;
    });
  EXPECT_EQ(status.count(0) + status.count(1), 0u);
  EXPECT_EQ(status[2], GenEvent::kBusy);
  GenRequest big;
  big.prompt.assign(size_t(model->config().max_position), 1);
  int st = -1;
  e.submit(big, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? int(ev.refusal) : -1; });
  EXPECT_EQ(st, GenEvent::kInvalid);
  GenRequest bad;
  bad.prompt = {1, int32_t(model->config().vocab_size)};
  e.submit(bad, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? int(ev.refusal) : -1; });
  EXPECT_EQ(st, GenEvent::kInvalid);
  GenRequest badp;
  badp.prompt = {1};
  badp.sampling.top_p = 0;
  e.submit(badp, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? int(ev.refusal) : -1; });
  EXPECT_EQ(st, GenEvent::kInvalid);
  e.run_until_idle();
}

// The threaded mode: many requests from several threads all complete.
TEST(Engine, ThreadedServesConcurrentSubmitters) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.check_integrity = true;
  o.kv_pages = 24;  // 384 tokens for 20 requests of up to 14: some preemption under the race
  Engine e(*model, o);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        GenRequest r;
        r.prompt = prompt(4 + i, uint64_t(t * 10 + i));
        r.max_tokens = 6;
        e.submit(r, [&](const GenEvent& ev) {
          if (ev.kind == GenEvent::kToken) return;
          std::lock_guard<std::mutex> l(mu);
          ++done;
          cv.notify_all();
        });
      }
    });
  for (auto& t : ts) t.join();
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return done == 20; }));
}

}  // namespace
}  // namespace mmx

namespace mmx {
namespace {

// StepBudget learns D (decode-only step) and the line F + P·n through the extra seconds of
// steps that prefill n tokens, and allows (target - D - F) / P prefill tokens while decodes run;
// unbounded when off, before it has learned, when nothing decodes, or when fewer sequences decode
// than wait to start; never below kMinPrefill.
TEST(StepBudget, BoundsPrefillOnceLearned) {
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  StepBudget off(-1), autob(0), fixed(50);
  for (StepBudget* b : {&off, &autob, &fixed}) {
    EXPECT_EQ(b->prefill_tokens(8, 1), kInf);  // nothing learned yet
    b->observe(0.100, 8, 0);                   // decode-only step: D = 0.1 s
    EXPECT_EQ(b->prefill_tokens(8, 1), kInf);  // P unknown
    b->observe(0.100 + 100 * 0.001, 8, 100);   // + 100 prefill tokens at 1 ms each: P = 0.001
  }
  EXPECT_EQ(off.prefill_tokens(8, 1), kInf);
  EXPECT_NEAR(autob.prefill_cost().token_s, 0.001, 1e-12);
  EXPECT_EQ(autob.prefill_cost().fixed_s, 0.0);  // one n seen: no intercept
  EXPECT_NEAR(double(autob.prefill_tokens(8, 1)), (StepBudget::kAutoFactor * 0.100 - 0.100) / 0.001, 1.0);  // 50
  EXPECT_EQ(autob.prefill_tokens(0, 1), kInf);  // nobody waits
  EXPECT_EQ(autob.prefill_tokens(2, 3), kInf);  // fewer decode than wait to start
  EXPECT_NEAR(double(autob.prefill_tokens(3, 3)), 50.0, 1.0);
  EXPECT_EQ(fixed.prefill_tokens(8, 1), StepBudget::kMinPrefill);  // 50 ms < D: progress only
  StepBudget wide(1100);
  wide.observe(0.100, 8, 0);
  wide.observe(1.100, 8, 100);
  EXPECT_NEAR(double(wide.prefill_tokens(8, 1)), 100.0, 1.0);
}

// Strict: a burst of prompts that outnumbers the decodes is bounded too.
TEST(StepBudget, StrictBoundsBursts) {
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  StepBudget loose(0), strict(0, true);
  for (StepBudget* b : {&loose, &strict}) {
    b->observe(0.100, 2, 0);
    b->observe(0.100 + 100 * 0.001, 2, 100);
  }
  EXPECT_EQ(loose.prefill_tokens(2, 7), kInf);
  EXPECT_NEAR(double(strict.prefill_tokens(2, 7)), (StepBudget::kAutoFactor * 0.100 - 0.100) / 0.001, 1.0);
  EXPECT_EQ(strict.prefill_tokens(0, 7), kInf);  // nothing decodes: nobody waits
}

// D is learned per number of decodes (8 decodes of an MoE cost far more than 1); a count not
// seen yet takes the nearest one seen, the larger on a tie.
TEST(StepBudget, DecodeStepPerCount) {
  StepBudget b(0);
  EXPECT_LT(b.decode_step_s(4), 0.0);
  b.observe(0.2, 1, 0);
  b.observe(1.0, 8, 0);
  EXPECT_DOUBLE_EQ(b.decode_step_s(1), 0.2);
  EXPECT_DOUBLE_EQ(b.decode_step_s(8), 1.0);
  EXPECT_DOUBLE_EQ(b.decode_step_s(3), 0.2);
  EXPECT_DOUBLE_EQ(b.decode_step_s(6), 1.0);
  EXPECT_DOUBLE_EQ(b.decode_step_s(12), 1.0);
  // The extra of a prefill step is measured over D of its own decode count.
  b.observe(1.0 + 0.5, 8, 100);
  EXPECT_NEAR(b.prefill_cost().token_s, 0.005, 1e-12);
  EXPECT_NEAR(double(b.prefill_tokens(8, 1)), (StepBudget::kAutoFactor * 1.0 - 1.0) / 0.005, 1.0);  // 100
  EXPECT_NEAR(double(b.prefill_tokens(1, 1)), (StepBudget::kAutoFactor * 0.2 - 0.2) / 0.005, 1.0);  // 20
}

// With chunks of different sizes the fixed cost of any prefill (F) is separated from the cost
// per token (P): extra = 0.2 s + 5 ms · n is recovered exactly, and the budget leaves room for F.
TEST(StepBudget, FitsFixedAndPerTokenCost) {
  StepBudget b(1000);  // 1 s target
  b.observe(0.300, 8, 0);  // D(8) = 0.3 s
  for (int64_t n : {16, 64, 200, 32, 128})
    b.observe(0.300 + 0.200 + 0.005 * double(n), 8, n);
  EXPECT_NEAR(b.prefill_cost().fixed_s, 0.200, 1e-9);
  EXPECT_NEAR(b.prefill_cost().token_s, 0.005, 1e-12);
  EXPECT_NEAR(double(b.prefill_tokens(8, 1)), (1.0 - 0.3 - 0.2) / 0.005, 1.0);  // 100, not 140
  // A negative intercept (noise) falls back to the line through the origin.
  StepBudget c(1000);
  c.observe(0.300, 8, 0);
  c.observe(0.300 + 0.010 * 100, 8, 100);
  c.observe(0.300 + 0.001 * 10, 8, 10);
  EXPECT_EQ(c.prefill_cost().fixed_s, 0.0);
  EXPECT_NEAR(c.prefill_cost().token_s, (1.0 * 0.8 + 0.01) / (100 * 0.8 + 10), 1e-12);
}

}  // namespace
}  // namespace mmx
