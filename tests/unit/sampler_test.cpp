// Sampler: greedy ties, reproducibility by seed, each filter removes what it should, pick()
// equals the fp64 reference token for token over a grid (vocabularies up to 200K, every filter
// and penalty), and the penalties / logit_bias / min_tokens against a hand-computed case.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "base/error.h"
#include "engine/sampler_ref.h"

#include <random>

namespace mmx {
namespace {

// temperature, top_k, top_p, min_p, seed; the rest default.
SamplingParams P(float t, int k = 0, float top_p = 1.0f, float min_p = 0.0f, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
  return p;
}

std::map<int32_t, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits.data(), int64_t(logits.size()))];
  return h;
}

TEST(Sampler, GreedyPicksMaxWithLowestIdOnTies) {
  const std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  Sampler s(P(0.0f));
  EXPECT_EQ(s.sample(l.data(), 4), 1);
  EXPECT_EQ(argmax(l.data(), 4), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = std::sin(float(i));
  const SamplingParams p = P(1.0f, 0, 1.0f, 0.0f, 42);
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(l.data(), 100), b.sample(l.data(), 100));
}

TEST(Sampler, TopKKeepsOnlyK) {
  const std::vector<float> l = {1.0f, 5.0f, 4.0f, 0.0f, 3.0f};
  const auto h = histogram(P(1.0f, 2, 1.0f, 0.0f, 7), l, 2000);
  for (const auto& [id, n] : h) EXPECT_TRUE(id == 1 || id == 2) << id;
  EXPECT_EQ(h.size(), 2u);
}

TEST(Sampler, TopPKeepsSmallestPrefixWithMass) {
  // probabilities ~ {0.643, 0.237, 0.087, 0.032}: top_p 0.8 keeps the first two.
  const std::vector<float> l = {3.0f, 2.0f, 1.0f, 0.0f};
  const auto h = histogram(P(1.0f, 0, 0.8f, 0.0f, 3), l, 3000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(0) && h.count(1));
  // Ratio of the kept two follows their renormalised probabilities: e^1 ~ 2.72.
  const double ratio = double(h.at(0)) / h.at(1);
  EXPECT_NEAR(ratio, std::exp(1.0), 0.4);
}

TEST(Sampler, MinPDropsUnlikely) {
  const std::vector<float> l = {0.0f, std::log(0.5f), std::log(0.05f)};  // rel. probs 1, .5, .05
  const auto h = histogram(P(1.0f, 0, 1.0f, 0.1f, 5), l, 2000);
  EXPECT_FALSE(h.count(2));
  EXPECT_TRUE(h.count(0) && h.count(1));
}

// The probability pick() gives each id, measured over a fine grid of u (each u's token is
// deterministic, so the fraction of the grid is the probability to 1/grid).
std::vector<double> pick_probs(Sampler& s, const std::vector<float>& logits, int grid = 200000) {
  std::vector<double> p(logits.size(), 0.0);
  for (int i = 0; i < grid; ++i) p[size_t(s.pick(logits.data(), int64_t(logits.size()), (i + 0.5) / grid))] += 1.0 / grid;
  return p;
}

std::vector<double> softmax(const std::vector<double>& z) {
  double mx = z[0], sum = 0;
  for (double x : z) mx = std::max(mx, x);
  std::vector<double> p;
  for (double x : z) p.push_back(std::exp(x - mx)), sum += p.back();
  for (double& x : p) x /= sum;
  return p;
}

// logits [1, 2, -1, 0.5, 0], prompt [2], generated [0, 0, 3]; repetition 2, presence 0.5,
// frequency 0.25, logit_bias {4: +1.5}. By hand:
//   id 0: seen, 1 > 0 -> 1/2 = 0.5; generated twice -> 0.5 - (2·0.25 + 0.5) = -0.5
//   id 1: untouched 2;  id 2: seen in the prompt, -1 < 0 -> -1·2 = -2
//   id 3: seen, 0.5/2 = 0.25; generated once -> 0.25 - 0.75 = -0.5;  id 4: 0 + 1.5 = 1.5
TEST(Sampler, PenaltiesAndBiasMatchAHandComputedCase) {
  const std::vector<float> l = {1.0f, 2.0f, -1.0f, 0.5f, 0.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.25f;
  p.logit_bias = {{4, 1.5f}};
  const std::vector<int32_t> prompt = {2};
  // The history 0, 0, 3 through sample() itself, with logits that force those picks.
  const std::vector<float> force0 = {60, 0, 0, 0, 0}, force3 = {0, 0, 0, 60, 0};
  auto with_history = [&](float temperature) {
    SamplingParams q = p;
    q.temperature = temperature;
    Sampler s(q, prompt);
    EXPECT_EQ(s.sample(force0.data(), 5), 0);
    EXPECT_EQ(s.sample(force0.data(), 5), 0);
    EXPECT_EQ(s.sample(force3.data(), 5), 3);
    EXPECT_EQ(s.state().output_counts().at(0), 2);
    return s;
  };
  Sampler t1 = with_history(1.0f);
  const std::vector<double> want = softmax({-0.5, 2.0, -2.0, -0.5, 1.5});
  const std::vector<double> got = pick_probs(t1, l);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5) << "id " << i;
  Sampler greedy = with_history(0.0f);
  EXPECT_EQ(greedy.pick(l.data(), 5, 0.0), 1);  // the hand-computed argmax
}

TEST(Sampler, MinTokensMasksStopIds) {
  const std::vector<float> l = {0.0f, 3.0f, 1.0f};
  SamplingParams p;
  p.min_tokens = 2;
  Sampler s(p, {}, {1});
  std::vector<double> got = pick_probs(s, l, 100000);
  EXPECT_EQ(got[1], 0.0);  // the stop id cannot come before 2 tokens
  const std::vector<double> want = softmax({0.0, 1.0});
  EXPECT_NEAR(got[0], want[0], 2e-5);
  EXPECT_NEAR(got[2], want[1], 2e-5);
  EXPECT_TRUE(s.stops(1));
  EXPECT_FALSE(s.stops(0));
  s.sample(l.data(), 3);
  s.sample(l.data(), 3);
  got = pick_probs(s, l, 100000);
  EXPECT_GT(got[1], 0.5);  // allowed now
}

// pick() against the fp64 full-sort reference, token for token, over vocabularies, settings,
// histories and draws.
TEST(Sampler, PickEqualsTheReference) {
  std::mt19937_64 g(3);
  int checked = 0;
  for (int64_t n : {int64_t(1), int64_t(2), int64_t(7), int64_t(100), int64_t(3000), int64_t(200064)}) {
    std::vector<float> l(static_cast<size_t>(n));
    std::normal_distribution<float> d(0.0f, 2.0f);
    for (float& x : l) x = d(g);
    if (n > 10) l[size_t(g() % uint64_t(n))] = 9.0f, l[size_t(g() % uint64_t(n))] = 8.5f;
    if (n > 4) l[1] = l[3];  // a tie
    std::vector<int32_t> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back(int32_t(g() % uint64_t(n)));
    const bool big = n > 10000;
    for (float t : {0.0f, 0.6f, 1.0f, 1.8f})
      for (int k : {0, 1, 3, 40})
        for (float top_p : {1.0f, 0.9f, 0.3f})
          for (float min_p : {0.0f, 0.1f})
            for (int pen = 0; pen < 2; ++pen) {
              if (big && (min_p > 0 || pen == 1 || t == 1.8f)) continue;
              SamplingParams p;
              p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p, p.seed = g();
              if (pen) {
                p.presence_penalty = 0.7f, p.frequency_penalty = -0.4f, p.repetition_penalty = 1.3f;
                p.logit_bias = {{0, 2.0f}, {int32_t(n - 1), -3.0f}};
                p.min_tokens = 3;
              }
              const std::vector<int32_t> stops = {int32_t(n / 2)};
              Sampler s(p, prompt, stops);
              for (int step = 0; step < (big ? 2 : 5); ++step) {
                for (double u : {0.0, 0.137, 0.5, 0.86, 0.999999}) {
                  if (big && u != 0.137 && u != 0.86) continue;  // the fp64 full sort of 200K is slow
                  ASSERT_EQ(s.pick(l.data(), n, u), sample_reference(l.data(), n, p, s.state(), stops, u))
                      << "n " << n << " T " << t << " k " << k << " top_p " << top_p << " min_p " << min_p
                      << " pen " << pen << " step " << step << " u " << u;
                  ++checked;
                }
                s.sample(l.data(), n);  // grows the history the penalties see
              }
            }
  }
  EXPECT_GT(checked, 4000);
}

TEST(Sampler, RejectsBadParams) {
  EXPECT_THROW(Sampler(P(-1.0f)), Error);
  EXPECT_THROW(Sampler(P(1.0f, -1)), Error);
  EXPECT_THROW(Sampler(P(1.0f, 0, 0.0f)), Error);
  EXPECT_THROW(Sampler(P(1.0f, 0, 1.0f, 2.0f)), Error);
  SamplingParams p;
  p.repetition_penalty = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.presence_penalty = 3;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.logit_bias = {{1, 101.0f}};
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.min_tokens = -1;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace mmx
