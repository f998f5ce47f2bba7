// The RL objectives and advantages (rl/objective.h, rl/advantage.h):
//   * analytic dloss/dlogp equals fp64 central finite differences of each objective's surrogate
//     (CISPO: the surrogate with its weight frozen, as sg() defines it), with and without k3 KL;
//     the loss equals an independent per-sample evaluation of the published formula;
//   * no gradient flows through CISPO's weight (the un-stopped expression's derivative differs);
//   * hand cases: Â > 0 and r = 1.5 > 1 + ε: PPO's token gradient is exactly 0, CISPO's is the
//     clipped weight · Â / N; the pessimistic min() keeps the gradient on the other side;
//   * splitting a batch into micro-batches and summing gives the whole batch's loss and gradient;
//   * group advantages (GRPO / Dr.GRPO), DAPO's drop, reward-to-go, composite rewards, mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "base/error.h"
#include "rl/advantage.h"
#include "rl/objective.h"

namespace mmx::rl {
namespace {

const ObjectiveKind kAll[] = {ObjectiveKind::kCispo, ObjectiveKind::kPpo, ObjectiveKind::kGrpo, ObjectiveKind::kDapo,
                              ObjectiveKind::kDrGrpo};

// A random optimizer batch: n_samples samples of random length, every token scored, the current
// log-probs a random step away from the old ones (|log r| up to 0.6: both clip sides are hit)
// but never within `margin` of a clip boundary (the surrogate has kinks there).
struct Case {
  ObjectiveBatch batch;
  std::vector<double> logp;
};

Case random_case(uint32_t seed, ObjectiveKind kind, double eps_low, double eps_high, bool with_ref, int n_samples = 7) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len_d(1, 12);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Case c;
  ObjectiveBatch& b = c.batch;
  const double lo = std::log(std::max(1.0 - eps_low, 1e-300)), hi = std::log(1.0 + eps_high);
  for (int s = 0; s < n_samples; ++s) {
    const int len = len_d(rng);
    b.sample_len.push_back(len);
    const double adv = 1.5 * u(rng);
    for (int t = 0; t < len; ++t) {
      const double old = -0.2 - 3.0 * std::fabs(u(rng));
      double step;
      do step = 0.6 * u(rng);
      while (std::fabs(step - lo) < 1e-3 || std::fabs(step - hi) < 1e-3);
      b.sample.push_back(s);
      b.old_logp.push_back(old);
      b.advantage.push_back(adv);
      c.logp.push_back(old + step);
      if (with_ref) b.ref_logp.push_back(old + 0.5 * u(rng));
    }
  }
  b.max_len = kind == ObjectiveKind::kDrGrpo ? 16 : 0;
  return c;
}

// The published surrogate, evaluated independently of objective.cpp: per sample, then aggregated
// as the paper writes it. frozen_w (CISPO only): the weights sg(clip(r)) held constant.
// abs_sum (optional): the same aggregation of |each token's term| — the scale a sum's rounding
// error is relative to.
double reference_loss(ObjectiveKind kind, double eps_low, double eps_high, double kl_coef, const ObjectiveBatch& b,
                      const std::vector<double>& logp, const std::vector<double>* frozen_w, double* abs_sum = nullptr) {
  const size_t B = b.sample_len.size();
  std::vector<double> per_sample(B, 0.0), per_sample_abs(B, 0.0);
  for (size_t k = 0; k < logp.size(); ++k) {
    const double r = std::exp(logp[k] - b.old_logp[k]), A = b.advantage[k];
    const double rc = std::min(std::max(r, 1.0 - eps_low), 1.0 + eps_high);
    double j = kind == ObjectiveKind::kCispo ? (frozen_w ? (*frozen_w)[k] : rc) * A * logp[k] : std::min(r * A, rc * A);
    if (kl_coef != 0) {
      const double d = b.ref_logp[k] - logp[k];
      j -= kl_coef * (std::exp(d) - d - 1.0);
    }
    per_sample[b.sample[k]] += j;
    per_sample_abs[b.sample[k]] += std::fabs(j);
  }
  double total_len = 0;
  for (int64_t len : b.sample_len) total_len += static_cast<double>(len);
  auto aggregate = [&](const std::vector<double>& v) {
    double J = 0;
    switch (kind) {
      case ObjectiveKind::kCispo:
      case ObjectiveKind::kPpo:
      case ObjectiveKind::kDapo:  // 1/Σ|o_i| Σ_i Σ_t
        for (double s : v) J += s;
        return J / total_len;
      case ObjectiveKind::kGrpo:  // 1/G Σ_i 1/|o_i| Σ_t
        for (size_t i = 0; i < B; ++i) J += v[i] / static_cast<double>(b.sample_len[i]);
        return J / static_cast<double>(B);
      case ObjectiveKind::kDrGrpo:  // 1/(G·L) Σ_i Σ_t
        for (double s : v) J += s;
        return J / (static_cast<double>(B) * static_cast<double>(b.max_len));
    }
    return J;
  };
  if (abs_sum) *abs_sum = aggregate(per_sample_abs);
  return -aggregate(per_sample);
}

ObjectiveOptions options(ObjectiveKind kind, double kl_coef) {
  ObjectiveOptions o;
  o.kind = kind;
  o.kl_coef = kl_coef;
  return o;
}

// Analytic gradient vs central differences of the surrogate (CISPO: with frozen weights).
TEST(RlObjective, GradientEqualsFiniteDifferencesOfTheSurrogate) {
  for (ObjectiveKind kind : kAll) {
    for (double kl_coef : {0.0, 0.3}) {
      const double el = default_eps_low(kind), eh = default_eps_high(kind);
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(fmt::format("{} kl_coef {} seed {}", objective_name(kind), kl_coef, seed));
        // CISPO's defaults clip only at r > 4: test a tight ε too so both branches are covered.
        ObjectiveOptions o = options(kind, kl_coef);
        if (kind == ObjectiveKind::kCispo && seed == 3) o.eps_low = 0.2, o.eps_high = 0.2;
        const double eps_low = std::isnan(o.eps_low) ? el : o.eps_low;
        const double eps_high = std::isnan(o.eps_high) ? eh : o.eps_high;
        Case c = random_case(seed * 101 + static_cast<uint32_t>(kind), kind, eps_low, eps_high, kl_coef != 0);
        const ObjectiveResult res = objective_loss(o, c.batch, c.logp.data());
        std::vector<double> frozen;
        for (size_t k = 0; k < c.logp.size(); ++k)
          frozen.push_back(
              std::min(std::max(std::exp(c.logp[k] - c.batch.old_logp[k]), 1.0 - eps_low), 1.0 + eps_high));
        const std::vector<double>* fw = kind == ObjectiveKind::kCispo ? &frozen : nullptr;
        EXPECT_NEAR(res.loss, reference_loss(kind, eps_low, eps_high, kl_coef, c.batch, c.logp, fw),
                    1e-13 * std::max(1.0, std::fabs(res.loss)));
        const double h = 1e-6;
        double max_err = 0, max_g = 0;
        for (size_t k = 0; k < c.logp.size(); ++k) {
          std::vector<double> lp = c.logp;
          lp[k] = c.logp[k] + h;
          const double fp = reference_loss(kind, eps_low, eps_high, kl_coef, c.batch, lp, fw);
          lp[k] = c.logp[k] - h;
          const double fm = reference_loss(kind, eps_low, eps_high, kl_coef, c.batch, lp, fw);
          const double fd = (fp - fm) / (2 * h);
          max_err = std::max(max_err, std::fabs(fd - res.dloss_dlogp[k]));
          max_g = std::max(max_g, std::fabs(res.dloss_dlogp[k]));
        }
        EXPECT_LT(max_err, 1e-8 * std::max(1.0, max_g)) << "max |fd - analytic| over " << c.logp.size() << " tokens";
        EXPECT_GT(max_g, 0.0);
        // The batch exercised the clip: tokens beyond a bound on each side (CISPO's default lower
        // bound 0 is never crossed).
        if (!(kind == ObjectiveKind::kCispo && seed != 3)) {
          EXPECT_GT(res.diag.clip_frac_low, 0.0);
          EXPECT_GT(res.diag.clip_frac_high, 0.0);
        }
        if (kind != ObjectiveKind::kCispo) {
          EXPECT_GT(res.diag.zero_grad_frac, 0.0);
        }
      }
    }
  }
}

// CISPO's weight is a stop-gradient: the analytic gradient is exactly −w·Â/N per token, and the
// derivative of the un-stopped expression (w = r inside the clip range, so d(r·logp) = r·(1+logp))
// is different — a gradient through the weight fails here.
TEST(RlObjective, NoGradientFlowsThroughCispoWeight) {
  ObjectiveOptions o = options(ObjectiveKind::kCispo, 0.0);
  Case c = random_case(7, ObjectiveKind::kCispo, 1.0, 3.0, false);
  const ObjectiveResult res = objective_loss(o, c.batch, c.logp.data());
  double N = 0;
  for (int64_t len : c.batch.sample_len) N += static_cast<double>(len);
  double max_diff_unstopped = 0;
  const double h = 1e-6;
  for (size_t k = 0; k < c.logp.size(); ++k) {
    const double w = std::min(std::max(std::exp(c.logp[k] - c.batch.old_logp[k]), 0.0), 4.0);
    EXPECT_EQ(res.dloss_dlogp[k], -(1.0 / N) * (w * c.batch.advantage[k])) << "token " << k;
    // FD of the loss objective_loss reports, weight recomputed at each point (no sg).
    std::vector<double> lp = c.logp;
    lp[k] = c.logp[k] + h;
    const double fp = objective_loss(o, c.batch, lp.data()).loss;
    lp[k] = c.logp[k] - h;
    const double fm = objective_loss(o, c.batch, lp.data()).loss;
    max_diff_unstopped = std::max(max_diff_unstopped, std::fabs((fp - fm) / (2 * h) - res.dloss_dlogp[k]));
  }
  EXPECT_GT(max_diff_unstopped, 1e-3) << "the un-stopped expression must have a different derivative";
}

// One sample of 4 tokens (N = 4), one of them in this micro-batch, π_old = e^−1.
ObjectiveBatch one_token(double adv) {
  ObjectiveBatch b;
  b.sample = {0};
  b.old_logp = {-1.0};
  b.advantage = {adv};
  b.sample_len = {4};
  b.max_len = 8;
  return b;
}

TEST(RlObjective, HandCasesClippedTokens) {
  const double log_r = std::log(1.5);
  // Â > 0, r = 1.5 > 1 + ε: PPO-family gradient exactly 0, loss the clipped value.
  for (ObjectiveKind kind : {ObjectiveKind::kPpo, ObjectiveKind::kGrpo, ObjectiveKind::kDapo, ObjectiveKind::kDrGrpo}) {
    SCOPED_TRACE(objective_name(kind));
    ObjectiveOptions o = options(kind, 0.0);
    o.eps_low = o.eps_high = 0.2;
    ObjectiveBatch b = one_token(1.0);
    const double logp = -1.0 + log_r;
    const ObjectiveResult res = objective_loss(o, b, &logp);
    EXPECT_EQ(res.dloss_dlogp[0], 0.0);
    const double c = kind == ObjectiveKind::kGrpo ? 1.0 / 4 : kind == ObjectiveKind::kDrGrpo ? 1.0 / 8 : 1.0 / 4;
    EXPECT_DOUBLE_EQ(res.loss, -c * 1.2);
    EXPECT_EQ(res.diag.clip_frac_high, 1.0);
    EXPECT_EQ(res.diag.zero_grad_frac, 1.0);
    // Â < 0, r = 1.5: the min() picks the unclipped r·Â: the gradient stays −c·r·Â.
    b.advantage = {-1.0};
    const ObjectiveResult neg = objective_loss(o, b, &logp);
    EXPECT_DOUBLE_EQ(neg.dloss_dlogp[0], c * 1.5);
    EXPECT_EQ(neg.diag.zero_grad_frac, 0.0);
    // Â < 0, r = 0.5 < 1 − ε: clipped, gradient 0; Â > 0, r = 0.5: kept, −c·r·Â.
    const double low = -1.0 + std::log(0.5);
    EXPECT_EQ(objective_loss(o, b, &low).dloss_dlogp[0], 0.0);
    b.advantage = {1.0};
    EXPECT_DOUBLE_EQ(objective_loss(o, b, &low).dloss_dlogp[0], -c * 0.5);
  }
  // CISPO, same token: gradient = −clip(r)·Â/N = −1.2/4, not 0.
  ObjectiveOptions o = options(ObjectiveKind::kCispo, 0.0);
  o.eps_low = o.eps_high = 0.2;
  ObjectiveBatch b = one_token(1.0);
  const double logp = -1.0 + log_r;
  const ObjectiveResult res = objective_loss(o, b, &logp);
  EXPECT_EQ(res.dloss_dlogp[0], -(1.0 / 4) * ((1.0 + 0.2) * 1.0));
  EXPECT_DOUBLE_EQ(res.loss, -(1.0 / 4) * 1.2 * logp);
  EXPECT_EQ(res.diag.clip_frac_high, 1.0);
  EXPECT_EQ(res.diag.zero_grad_frac, 0.0);
  // CISPO defaults: no lower bound (r = 0.5 keeps weight 0.5), weight capped at 1 + 3 = 4.
  ObjectiveOptions d = options(ObjectiveKind::kCispo, 0.0);
  const double low = -1.0 + std::log(0.5), high = -1.0 + std::log(6.0);
  EXPECT_DOUBLE_EQ(objective_loss(d, b, &low).dloss_dlogp[0], -(1.0 / 4) * 0.5);
  EXPECT_EQ(objective_loss(d, b, &high).dloss_dlogp[0], -(1.0 / 4) * 4.0);
}

// Aggregation weights by hand: samples of length 1 and 3 at r = 1, Â = 1, so the gradient of
// every token is −c_k.
TEST(RlObjective, HandCasesAggregation) {
  ObjectiveBatch b;
  b.sample = {0, 1, 1, 1};
  b.old_logp = {-1, -2, -3, -4};
  b.advantage = {1, 1, 1, 1};
  b.sample_len = {1, 3};
  b.max_len = 8;
  const std::vector<double> logp = b.old_logp;
  const std::map<ObjectiveKind, std::vector<double>> want = {
      {ObjectiveKind::kPpo, {0.25, 0.25, 0.25, 0.25}},
      {ObjectiveKind::kDapo, {0.25, 0.25, 0.25, 0.25}},
      {ObjectiveKind::kCispo, {0.25, 0.25, 0.25, 0.25}},
      {ObjectiveKind::kGrpo, {0.5, 1.0 / 6, 1.0 / 6, 1.0 / 6}},
      {ObjectiveKind::kDrGrpo, {1.0 / 16, 1.0 / 16, 1.0 / 16, 1.0 / 16}}};
  for (const auto& [kind, c] : want) {
    SCOPED_TRACE(objective_name(kind));
    const ObjectiveResult res = objective_loss(options(kind, 0.0), b, logp.data());
    for (size_t k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(res.dloss_dlogp[k], -c[k]);
    EXPECT_DOUBLE_EQ(res.diag.ratio_mean, 1.0);
  }
  // Dr.GRPO without a max_len: L = 1 (1/G Σ_i Σ_t).
  b.max_len = 0;
  EXPECT_DOUBLE_EQ(objective_loss(options(ObjectiveKind::kDrGrpo, 0.0), b, logp.data()).dloss_dlogp[0], -0.5);
  // k3 KL by hand: ref = logp + log 2: k3 = 2 − log 2 − 1, d k3/d logp = 1 − 2 = −1.
  b.ref_logp = {logp[0] + std::log(2.0), logp[1], logp[2], logp[3]};
  b.advantage = {0, 0, 0, 0};
  const ObjectiveResult kl = objective_loss(options(ObjectiveKind::kDapo, 0.5), b, logp.data());
  EXPECT_DOUBLE_EQ(kl.dloss_dlogp[0], 0.25 * 0.5 * -1.0);
  EXPECT_DOUBLE_EQ(kl.loss, 0.25 * 0.5 * (1.0 - std::log(2.0)));
  EXPECT_DOUBLE_EQ(kl.diag.kl_mean, (1.0 - std::log(2.0)) / 4);
  EXPECT_DOUBLE_EQ(kl.diag.kl_loss, kl.loss);
}

// Micro-batches: tokens shuffled and cut into 3 parts; the sums equal the whole batch.
TEST(RlObjective, MicroBatchSplittingLeavesTheGradientUnchanged) {
  for (ObjectiveKind kind : kAll) {
    for (int seed = 0; seed < 3; ++seed) {
      SCOPED_TRACE(fmt::format("{} seed {}", objective_name(kind), seed));
      ObjectiveOptions o = options(kind, 0.2);
      Case c = random_case(11 + 7 * seed + static_cast<uint32_t>(kind), kind, 0.2, 0.28, true, 9);
      const ObjectiveResult whole = objective_loss(o, c.batch, c.logp.data());
      const size_t n = c.logp.size();
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::mt19937 rng(5);
      std::shuffle(order.begin(), order.end(), rng);
      const size_t cuts[] = {0, n / 4, (2 * n) / 3, n};
      double loss = 0;
      std::vector<double> grad(n, 0.0);
      ObjectiveDiagnostics diag;
      for (int m = 0; m < 3; ++m) {
        ObjectiveBatch mb;
        mb.sample_len = c.batch.sample_len;
        mb.max_len = c.batch.max_len;
        std::vector<double> lp;
        for (size_t i = cuts[m]; i < cuts[m + 1]; ++i) {
          const size_t k = order[i];
          mb.sample.push_back(c.batch.sample[k]);
          mb.old_logp.push_back(c.batch.old_logp[k]);
          mb.advantage.push_back(c.batch.advantage[k]);
          mb.ref_logp.push_back(c.batch.ref_logp[k]);
          lp.push_back(c.logp[k]);
        }
        const ObjectiveResult r = objective_loss(o, mb, lp.data());
        loss += r.loss;
        for (size_t i = cuts[m]; i < cuts[m + 1]; ++i) grad[order[i]] += r.dloss_dlogp[i - cuts[m]];
        diag = combine(diag, r.diag);
      }
      // Relative to the sum of the terms' magnitudes: the loss itself may cancel to near 0.
      double scale = 0;
      reference_loss(kind, default_eps_low(kind), default_eps_high(kind), o.kl_coef, c.batch, c.logp, nullptr, &scale);
      EXPECT_NEAR(loss, whole.loss, 1e-14 * scale);
      for (size_t k = 0; k < n; ++k)
        EXPECT_NEAR(grad[k], whole.dloss_dlogp[k], 1e-14 * std::fabs(whole.dloss_dlogp[k])) << "token " << k;
      EXPECT_EQ(diag.tokens, whole.diag.tokens);
      EXPECT_NEAR(diag.clip_frac_high, whole.diag.clip_frac_high, 1e-14);
      EXPECT_NEAR(diag.clip_frac_low, whole.diag.clip_frac_low, 1e-14);
      EXPECT_NEAR(diag.ratio_mean, whole.diag.ratio_mean, 1e-14);
      EXPECT_NEAR(diag.kl_mean, whole.diag.kl_mean, 1e-14);
      EXPECT_EQ(diag.ratio_max, whole.diag.ratio_max);
    }
  }
}

TEST(RlObjective, RefusesBadInput) {
  EXPECT_EQ(parse_objective("drgrpo"), ObjectiveKind::kDrGrpo);
  try {
    parse_objective("reinforce");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cispo, ppo, grpo, dapo, drgrpo"), std::string::npos) << e.what();
  }
  ObjectiveBatch b = one_token(1.0);
  const double logp = -1.0;
  EXPECT_THROW(objective_loss(options(ObjectiveKind::kPpo, 0.1), b, &logp), Error);  // KL without ref_logp
  b.sample = {1};
  EXPECT_THROW(objective_loss(options(ObjectiveKind::kPpo, 0.0), b, &logp), Error);  // sample id outside
  b.sample = {0};
  b.sample_len = {0};
  EXPECT_THROW(objective_loss(options(ObjectiveKind::kPpo, 0.0), b, &logp), Error);  // more tokens than |o_i|
  b.sample_len = {4};
  const double nan = NAN;
  EXPECT_THROW(objective_loss(options(ObjectiveKind::kPpo, 0.0), b, &nan), Error);
  ObjectiveOptions o = options(ObjectiveKind::kDapo, 0.0);
  o.eps_high = -0.1;
  EXPECT_THROW(objective_loss(o, b, &logp), Error);
}

TEST(RlAdvantage, GroupRelativeHandCases) {
  const std::vector<double> rewards = {1, 0, 0, 1, 5, 5, 2};
  const std::vector<int32_t> group = {3, 3, 3, 3, 8, 8, 1};  // group 1 has one sample
  const std::vector<double> dr = group_advantages(rewards, group, drgrpo_advantage_options());
  const std::vector<double> want_dr = {0.5, -0.5, -0.5, 0.5, 0, 0, 0};
  for (size_t i = 0; i < rewards.size(); ++i) EXPECT_DOUBLE_EQ(dr[i], want_dr[i]) << i;
  // GRPO: ÷ (unbiased std + 1e-6); group 3: std = sqrt(4 · 0.25 / 3).
  const std::vector<double> g = group_advantages(rewards, group, grpo_advantage_options());
  const double sd = std::sqrt(1.0 / 3.0) + 1e-6;
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(g[i], want_dr[i] / sd) << i;
  for (size_t i = 4; i < 7; ++i) EXPECT_EQ(g[i], 0.0) << i;
  GroupAdvantageOptions pop = grpo_advantage_options();
  pop.unbiased_std = false;  // population std of {1,0,0,1} = 0.5
  EXPECT_DOUBLE_EQ(group_advantages(rewards, group, pop)[0], 0.5 / (0.5 + 1e-6));
  EXPECT_THROW(group_advantages({1, 2}, {0}), Error);
  EXPECT_FALSE(advantage_options_for(ObjectiveKind::kDrGrpo).normalize_std);
  EXPECT_TRUE(advantage_options_for(ObjectiveKind::kCispo).normalize_std);
}

TEST(RlAdvantage, DapoDropsGroupsWithEqualRewards) {
  const std::vector<double> rewards = {1, 1, 1, 0, 1, 0, 0, 0, 0.5};
  const std::vector<int32_t> group = {0, 0, 0, 1, 1, 2, 2, 2, 3};
  EXPECT_EQ(dapo_surviving_samples(rewards, group), (std::vector<int32_t>{3, 4}));
  // Non-adjacent members; tol: rewards within 0.1 count as equal.
  EXPECT_EQ(dapo_surviving_samples({0.0, 1.0, 0.05, 1.0}, {7, 9, 7, 9}, 0.1), (std::vector<int32_t>{}));
  EXPECT_EQ(dapo_surviving_samples({0.0, 1.0, 0.5, 1.0}, {7, 9, 7, 9}, 0.1), (std::vector<int32_t>{0, 2}));
}

TEST(RlAdvantage, RewardToGoWithTrajectoryBaseline) {
  // Two trajectories of one task: returns 3 and 0, baseline 1.5.
  const auto a = reward_to_go_advantages({{1, 0, 2}, {0, 0, 0}}, {0, 0});
  EXPECT_EQ(a[0], (std::vector<double>{1.5, 0.5, 0.5}));
  EXPECT_EQ(a[1], (std::vector<double>{-1.5, -1.5, -1.5}));
  // γ = 0.5: rtg = {1 + 0.5·0 + 0.25·2, 0 + 0.5·2, 2} = {1.5, 1, 2}; baseline (1.5 + 0) / 2.
  const auto g = reward_to_go_advantages({{1, 0, 2}, {0, 0, 0}}, {0, 0}, 0.5);
  EXPECT_EQ(g[0], (std::vector<double>{0.75, 0.25, 1.25}));
  EXPECT_EQ(g[1], (std::vector<double>{-0.75, -0.75, -0.75}));
  // One step each, γ = 1: the GRPO advantages exactly.
  const std::vector<double> rewards = {1, 0, 0, 1, 3};
  const std::vector<int32_t> group = {0, 0, 0, 0, 1};
  std::vector<std::vector<double>> steps;
  for (double r : rewards) steps.push_back({r});
  const auto one = reward_to_go_advantages(steps, group, 1.0, grpo_advantage_options());
  const auto grpo = group_advantages(rewards, group, grpo_advantage_options());
  for (size_t i = 0; i < rewards.size(); ++i) EXPECT_EQ(one[i][0], grpo[i]) << i;
  EXPECT_THROW(reward_to_go_advantages({{}}, {0}), Error);
}

TEST(RlAdvantage, CompositeRewards) {
  const RewardWeights w{0.1, 0.5, 2.0};
  EXPECT_DOUBLE_EQ(composite_reward(1.0, -0.4, 1.0, w), 0.1 - 0.2 + 2.0);
  EXPECT_EQ(composite_step_rewards({1, 0, 1}, -0.4, 1.0, w), (std::vector<double>{0.1, 0.0, 0.1 + (-0.2 + 2.0)}));
  const RewardWeights outcome_only{0, 0, 1};
  EXPECT_EQ(composite_step_rewards({5, 5}, -3, 1, outcome_only), (std::vector<double>{0, 1}));
}

TEST(RlDiagnostics, LogprobMismatch) {
  const std::vector<double> a = {-1.0, -2.0, -0.5};
  const std::vector<double> b = {-1.0, -2.5, -0.25};  // Δ = {0, 0.5, −0.25}
  const LogprobMismatch m = logprob_mismatch(a.data(), b.data(), 3);
  EXPECT_EQ(m.tokens, 3);
  EXPECT_DOUBLE_EQ(m.mean_abs, 0.75 / 3);
  EXPECT_DOUBLE_EQ(m.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(m.mean_delta, 0.25 / 3);
  const double r = (std::exp(0.5) - 1 + std::exp(-0.25) - 1) / 3;
  EXPECT_NEAR(m.mean_ratio_minus_1, r, 1e-15);
  EXPECT_NEAR(m.kl_k3, r - 0.25 / 3, 1e-15);
  const std::vector<float> af = {-1.0f, -2.0f}, bf = {-1.0f, -2.0f};
  const LogprobMismatch z = logprob_mismatch(af.data(), bf.data(), 2);
  EXPECT_EQ(z.max_abs, 0.0);
  EXPECT_EQ(z.kl_k3, 0.0);
}

}  // namespace
}  // namespace mmx::rl
