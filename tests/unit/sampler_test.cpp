// Sampler: greedy ties, reproducibility by seed, and that each filter removes what it should.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "base/error.h"

namespace mmx {
namespace {

std::map<int32_t, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits.data(), int64_t(logits.size()))];
  return h;
}

TEST(Sampler, GreedyPicksMaxWithLowestIdOnTies) {
  const std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  Sampler s({0.0f});
  EXPECT_EQ(s.sample(l.data(), 4), 1);
  EXPECT_EQ(argmax(l.data(), 4), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = std::sin(float(i));
  SamplingParams p{1.0f, 0, 1.0f, 0.0f, 42};
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(l.data(), 100), b.sample(l.data(), 100));
}

TEST(Sampler, TopKKeepsOnlyK) {
  const std::vector<float> l = {1.0f, 5.0f, 4.0f, 0.0f, 3.0f};
  const auto h = histogram({1.0f, 2, 1.0f, 0.0f, 7}, l, 2000);
  for (const auto& [id, n] : h) EXPECT_TRUE(id == 1 || id == 2) << id;
  EXPECT_EQ(h.size(), 2u);
}

TEST(Sampler, TopPKeepsSmallestPrefixWithMass) {
  // probabilities ~ {0.643, 0.237, 0.087, 0.032}: top_p 0.8 keeps the first two.
  const std::vector<float> l = {3.0f, 2.0f, 1.0f, 0.0f};
  const auto h = histogram({1.0f, 0, 0.8f, 0.0f, 3}, l, 3000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(0) && h.count(1));
  // Ratio of the kept two follows their renormalised probabilities: e^1 ~ 2.72.
  const double ratio = double(h.at(0)) / h.at(1);
  EXPECT_NEAR(ratio, std::exp(1.0), 0.4);
}

TEST(Sampler, MinPDropsUnlikely) {
  const std::vector<float> l = {0.0f, std::log(0.5f), std::log(0.05f)};  // rel. probs 1, .5, .05
  const auto h = histogram({1.0f, 0, 1.0f, 0.1f, 5}, l, 2000);
  EXPECT_FALSE(h.count(2));
  EXPECT_TRUE(h.count(0) && h.count(1));
}

TEST(Sampler, RejectsBadParams) {
  EXPECT_THROW(Sampler({-1.0f}), Error);
  EXPECT_THROW(Sampler({1.0f, -1}), Error);
  EXPECT_THROW(Sampler({1.0f, 0, 0.0f}), Error);
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, 2.0f}), Error);
}

}  // namespace
}  // namespace mmx
