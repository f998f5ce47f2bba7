// Speculative decoding (engine/speculator.h): the output with drafts is the output without them.
//   * greedy, K = 1..4, every family (M2; M3 with MSA selection active; Text-01, whose lightning
//     states roll back to a checkpoint and re-feed), alone and batched, with prefix-cache hits and
//     preemption (a small pool), with a stateful token constraint: token for token, and the
//     paged memory's check_integrity() after every step (rollback == never advanced);
//   * sampled: the same seeds give the same tokens (the verifier draws from the sequence's own
//     sampler, one uniform per emitted token, as plain decoding does);
//   * the standard rule for a draft drawn from q (spec_accept): a chi-square test over many draws
//     that the output is distributed as p — and the same test fails for a wrong residual.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/speculator.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

std::string tiny_dir(const std::string& arch) { return testing::tiny_dir(arch, "f32", 5); }

// Prompts that repeat themselves, so that lookup drafts are often right (and often wrong).
std::vector<int32_t> repeating_prompt(uint64_t seed) {
  const std::vector<int32_t> unit = testing::random_ids(7 + int(seed % 5), 300, seed);
  std::vector<int32_t> p;
  for (int r = 0; r < 3; ++r) p.insert(p.end(), unit.begin(), unit.end());
  p.push_back(unit[0]);
  return p;
}

// Allows only ids whose parity differs from the last accepted id's, and not a multiple of 5
// after id 0 mod 7: a rule whose state every accepted token moves.
class ParityConstraint final : public TokenConstraint {
 public:
  void restrict(float* logits, int64_t n, int64_t, std::span<const int32_t>) override {
    for (int64_t i = 0; i < n; ++i)
      if ((last_ >= 0 && (i % 2) == (last_ % 2)) || (last_ % 7 == 0 && i % 5 == 0))
        logits[i] = -std::numeric_limits<float>::infinity();
  }
  void accept(int32_t id) override { last_ = id; }

 private:
  int32_t last_ = -1;
};

struct Outcome {
  std::vector<std::vector<int32_t>> out;
  EngineMetrics m;
};

Outcome run(Model& model, const std::vector<std::vector<int32_t>>& prompts, int64_t spec_k, float temperature,
        bool constrained = false, int64_t kv_pages = 512, int repeat = 1) {
  EngineOptions o;
  o.start_thread = false;
  o.check_integrity = true;
  o.max_batch_tokens = 4096;
  o.state_checkpoint_every = 16;
  o.kv_pages = kv_pages;
  o.spec_k = spec_k;
  if (spec_k > 0) o.drafter = std::make_shared<PromptLookupDrafter>();
  Engine e(model, o);
  Outcome r;
  r.out.resize(prompts.size() * size_t(repeat));
  for (int rep = 0; rep < repeat; ++rep) {  // the same prompts again: prefix-cache hits
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenRequest g;
      g.prompt = prompts[i];
      g.sampling.temperature = temperature;
      g.sampling.seed = 100 + i;
      g.max_tokens = 20;
      if (constrained) g.constraint = [] { return std::make_unique<ParityConstraint>(); };
      auto& out = r.out[size_t(rep) * prompts.size() + i];
      e.submit(g, [&out](const GenEvent& ev) {
        if (ev.kind == GenEvent::kToken) out.push_back(ev.token);
        if (ev.kind == GenEvent::kError) ADD_FAILURE() << ev.error;
      });
    }
    e.run_until_idle();
  }
  r.m = e.metrics();
  EXPECT_EQ(r.m.kv_pages_used, 0);
  return r;
}

class SpecFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecFamilies, GreedyWithDraftsEqualsPlain) {
  auto model = load_model(tiny_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  for (uint64_t s = 0; s < 6; ++s) prompts.push_back(repeating_prompt(s + 1));
  for (const bool constrained : {false, true}) {
    const Outcome plain = run(*model, prompts, 0, 0, constrained, 512, 2);
    for (int64_t k = 1; k <= 4; ++k) {
      SCOPED_TRACE(fmt::format("K = {}{}", k, constrained ? ", constrained" : ""));
      const Outcome spec = run(*model, prompts, k, 0, constrained, 512, 2);  // batched, then cache hits
      EXPECT_EQ(spec.out, plain.out);
      EXPECT_GT(spec.m.spec_draft_tokens, 0);
      if (!constrained) EXPECT_GT(spec.m.spec_accepted, 0) << "some drafts were right";
      EXPECT_LT(spec.m.spec_accepted, spec.m.spec_draft_tokens) << "and some wrong: rollbacks ran";
      const Outcome alone = run(*model, {prompts[2]}, k, 0, constrained);
      EXPECT_EQ(alone.out[0], plain.out[2]);
    }
  }
  // A pool too small for the batch (one request's worth, 64 tokens, and two pages): sequences
  // with drafts are preempted and recomputed.
  const int64_t pages = 64 / model->config().kv_page() + 2;
  const Outcome small_plain = run(*model, prompts, 0, 0, false, pages);
  const Outcome small_spec = run(*model, prompts, 3, 0, false, pages);
  EXPECT_GT(small_spec.m.preemptions, 0);
  EXPECT_EQ(small_spec.out, small_plain.out);
}

TEST_P(SpecFamilies, SampledWithDraftsEqualsPlain) {
  auto model = load_model(tiny_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  for (uint64_t s = 0; s < 4; ++s) prompts.push_back(repeating_prompt(s + 20));
  const Outcome plain = run(*model, prompts, 0, 0.7f);
  for (int64_t k : {1, 3}) {
    const Outcome spec = run(*model, prompts, k, 0.7f);
    EXPECT_EQ(spec.out, plain.out) << "K = " << k;
    EXPECT_GT(spec.m.spec_draft_tokens, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SpecFamilies, ::testing::Values("minimax_m2", "minimax_m3", "minimax_text01"),
                         [](const auto& info) { return info.param; });

TEST(PromptLookup, DraftsWhatFollowedTheLastOccurrence) {
  PromptLookupDrafter d;
  const std::vector<int32_t> t = {1, 2, 3, 9, 1, 2, 3, 8, 7, 5, 1, 2, 3};
  EXPECT_EQ(d.draft(t, 2), (std::vector<int32_t>{8, 7}));  // the most recent "1 2 3" before the tail
  EXPECT_EQ(d.draft(t, 10), (std::vector<int32_t>{8, 7, 5, 1, 2, 3}));
  EXPECT_EQ(d.draft(std::vector<int32_t>{4, 5, 6}, 3), std::vector<int32_t>{});  // nothing repeats
  EXPECT_EQ(d.draft(std::vector<int32_t>{4, 5, 4}, 3), (std::vector<int32_t>{5, 4}));  // a 1-gram
  EXPECT_EQ(d.draft(t, 0), std::vector<int32_t>{});
}

// chi-square of `counts` against probabilities p over n draws.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  double x = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * double(n);
    x += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return x;
}

TEST(SpecRule, OutputIsDistributedAsTheTarget) {
  const std::vector<double> p = {0.05, 0.30, 0.25, 0.15, 0.25}, q = {0.40, 0.10, 0.30, 0.15, 0.05};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const int64_t n = 200000;
  std::vector<int64_t> good(5, 0), wrong(5, 0);
  std::discrete_distribution<int> draw_q(q.begin(), q.end());
  for (int64_t i = 0; i < n; ++i) {
    const int32_t d = int32_t(draw_q(rng));
    const double ua = u(rng), ur = u(rng);
    bool accepted = false;
    ++good[size_t(spec_accept(p, q, d, ua, ur, &accepted))];
    // A wrong residual: on rejection, draw from p itself instead of the normalised max(0, p - q).
    if (ua < std::min(1.0, p[size_t(d)] / q[size_t(d)])) {
      ++wrong[size_t(d)];
    } else {
      double acc = 0, r = ur;
      size_t k = 0;
      for (; k + 1 < p.size() && r >= (acc += p[k]); ++k) {
      }
      ++wrong[k];
    }
  }
  // df = 4: P(chi2 > 18.47) = 0.001.
  const double x_good = chi_square(good, p, n), x_wrong = chi_square(wrong, p, n);
  std::printf("[ info ] chi-square: standard rule %.2f, wrong residual %.1f (df 4, 0.1 %% level 18.47)\n", x_good, x_wrong);
  EXPECT_LT(x_good, 18.47);
  EXPECT_GT(x_wrong, 18.47) << "the test can tell a wrong residual";
}

}  // namespace
}  // namespace mmx
