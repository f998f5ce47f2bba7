// Continuous batching: greedy output is identical whether a request runs alone, in a batch of 8
// mixed lengths, or with chunked prefill mixed into decodes (small step budgets), for every
// family; cancellation frees at once and stops events; queue-full, over-context and invalid ids
// are refused with the right status; logprobs agree with the sampled token.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/generate.h"
#include "model/tiny.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

std::string tiny_dir(const std::string& arch) { return testing::tiny_dir(arch, "f32", 5); }

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string finish;
  int n_done_events = 0;
};

std::vector<int32_t> prompt(int n, uint64_t seed) { return testing::random_ids(n, 500, seed); }

// Runs the requests through one engine (driven on this thread) and collects their events.
std::vector<Result> run(Model& m, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                        int64_t batch_tokens, int64_t max_running = 16) {
  EngineOptions o;
  o.start_thread = false;
  o.max_batch_tokens = batch_tokens;
  o.max_running = max_running;
  Engine e(m, o);
  std::vector<Result> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenRequest r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    e.submit(r, [&out, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kToken) out[i].ids.push_back(ev.token), out[i].logprobs.push_back(ev.logprob);
      else if (ev.kind == GenEvent::kDone) out[i].finish = ev.finish_reason, ++out[i].n_done_events;
      else ADD_FAILURE() << ev.error;
    });
  }
  e.run_until_idle();
  EXPECT_EQ(e.metrics().kv_pages_used, 0);  // everything released
  return out;
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
  // The engine's greedy stream equals the single-sequence generate() loop.
  Sampler s(SamplingParams{0.0f});
  EXPECT_EQ(generate(*model, prompts[3], 12, s, {}, nullptr, nullptr), alone[3].ids);
}

INSTANTIATE_TEST_SUITE_P(Archs, EngineFamilies, ::testing::Values("minimax_m2", "minimax_text01", "minimax_m3"));

TEST(Engine, LogprobsMatchTheGreedyToken) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  Engine e(*model, o);
  GenRequest r;
  r.prompt = prompt(10, 1);
  r.sampling.temperature = 0;
  r.max_tokens = 5;
  r.top_logprobs = 3;
  int n = 0;
  e.submit(r, [&](const GenEvent& ev) {
    if (ev.kind != GenEvent::kToken) return;
    ++n;
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].id, ev.token);  // greedy = the most likely
    EXPECT_FLOAT_EQ(ev.top[0].logprob, ev.logprob);
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
  });
  e.run_until_idle();
  EXPECT_EQ(n, 5);
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

TEST(Engine, RefusalsCarryStatusCodes) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
  o.start_thread = false;
  o.max_waiting = 2;
  Engine e(*model, o);
  std::map<int, int> status;  // request index -> error status
  GenRequest ok;
  ok.prompt = {1, 2, 3};
  // queue of 2: the third waiting request is refused with 429
  for (int i = 0; i < 3; ++i)
    e.submit(ok, [&status, i](const GenEvent& ev) {
      if (ev.kind == GenEvent::kError) status[i] = ev.http_status;
    });
  EXPECT_EQ(status.count(0) + status.count(1), 0u);
  EXPECT_EQ(status[2], 429);
  GenRequest big;
  big.prompt.assign(size_t(model->config().max_position), 1);
  int st = 0;
  e.submit(big, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? ev.http_status : 0; });
  EXPECT_EQ(st, 400);
  GenRequest bad;
  bad.prompt = {1, int32_t(model->config().vocab_size)};
  e.submit(bad, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? ev.http_status : 0; });
  EXPECT_EQ(st, 400);
  GenRequest badp;
  badp.prompt = {1};
  badp.sampling.top_p = 0;
  e.submit(badp, [&](const GenEvent& ev) { st = ev.kind == GenEvent::kError ? ev.http_status : 0; });
  EXPECT_EQ(st, 400);
  e.run_until_idle();
}

// The threaded mode: many requests from several threads all complete.
TEST(Engine, ThreadedServesConcurrentSubmitters) {
  auto model = load_model(tiny_dir("minimax_m2"));
  EngineOptions o;
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
