// Advantages and rewards of advantage.h: per-group statistics over the caller's group ids.
#include "rl/advantage.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/error.h"

namespace mmx::rl {

GroupAdvantageOptions grpo_advantage_options() { return {true, true, 1e-6}; }
GroupAdvantageOptions drgrpo_advantage_options() { return {false, true, 1e-6}; }
GroupAdvantageOptions advantage_options_for(ObjectiveKind kind) {
  return kind == ObjectiveKind::kDrGrpo ? drgrpo_advantage_options() : grpo_advantage_options();
}

namespace {

struct Stats {
  double mean = 0, std = 0;
};

// Mean and std of values per group id (values[i] in group[i]).
std::map<int32_t, Stats> group_stats(const std::vector<double>& values, const std::vector<int32_t>& group,
                                     bool unbiased) {
  std::map<int32_t, std::pair<double, int64_t>> sum;
  for (size_t i = 0; i < values.size(); ++i) {
    auto& s = sum[group[i]];
    s.first += values[i];
    s.second += 1;
  }
  std::map<int32_t, Stats> st;
  for (const auto& [g, s] : sum) st[g].mean = s.first / static_cast<double>(s.second);
  std::map<int32_t, double> sq;
  for (size_t i = 0; i < values.size(); ++i) {
    const double d = values[i] - st[group[i]].mean;
    sq[group[i]] += d * d;
  }
  for (auto& [g, s] : st) {
    const int64_t m = sum[g].second;
    const double denom = unbiased ? static_cast<double>(m - 1) : static_cast<double>(m);
    s.std = denom > 0 ? std::sqrt(sq[g] / denom) : 0.0;
  }
  return st;
}

void check_rewards(const std::vector<double>& rewards, const std::vector<int32_t>& group, const char* what) {
  if (rewards.size() != group.size())
    fail("rl {}: {} rewards but {} group ids (give one group id per sample)", what, rewards.size(), group.size());
  for (size_t i = 0; i < rewards.size(); ++i)
    if (!std::isfinite(rewards[i])) fail("rl {}: sample {} has a non-finite reward {}", what, i, rewards[i]);
}

}  // namespace

std::vector<double> group_advantages(const std::vector<double>& rewards, const std::vector<int32_t>& group,
                                     const GroupAdvantageOptions& o) {
  check_rewards(rewards, group, "advantages");
  if (!(o.eps >= 0)) fail("rl advantages: eps must be >= 0, got {}", o.eps);
  const auto st = group_stats(rewards, group, o.unbiased_std);
  std::vector<double> adv(rewards.size());
  for (size_t i = 0; i < rewards.size(); ++i) {
    const Stats& s = st.at(group[i]);
    const double centred = rewards[i] - s.mean;
    adv[i] = o.normalize_std ? (s.std + o.eps > 0 ? centred / (s.std + o.eps) : 0.0) : centred;
  }
  return adv;
}

std::vector<int32_t> dapo_surviving_samples(const std::vector<double>& rewards, const std::vector<int32_t>& group,
                                            double tol) {
  check_rewards(rewards, group, "dapo filter");
  std::map<int32_t, std::pair<double, double>> range;  // group -> (min, max)
  for (size_t i = 0; i < rewards.size(); ++i) {
    auto it = range.find(group[i]);
    if (it == range.end()) {
      range[group[i]] = {rewards[i], rewards[i]};
    } else {
      it->second.first = std::min(it->second.first, rewards[i]);
      it->second.second = std::max(it->second.second, rewards[i]);
    }
  }
  std::vector<int32_t> keep;
  for (size_t i = 0; i < rewards.size(); ++i) {
    const auto& r = range.at(group[i]);
    if (r.second - r.first > tol) keep.push_back(static_cast<int32_t>(i));
  }
  return keep;
}

std::vector<std::vector<double>> reward_to_go_advantages(const std::vector<std::vector<double>>& step_rewards,
                                                         const std::vector<int32_t>& group, double gamma,
                                                         const GroupAdvantageOptions& o) {
  if (step_rewards.size() != group.size())
    fail("rl reward-to-go: {} trajectories but {} group ids", step_rewards.size(), group.size());
  if (!(gamma >= 0 && gamma <= 1)) fail("rl reward-to-go: gamma must be in [0, 1], got {}", gamma);
  if (!(o.eps >= 0)) fail("rl reward-to-go: eps must be >= 0, got {}", o.eps);
  // rtg[j][t] = r_t + γ · rtg[j][t+1]; the trajectory's return is rtg[j][0].
  std::vector<std::vector<double>> rtg(step_rewards.size());
  std::vector<double> returns(step_rewards.size());
  for (size_t j = 0; j < step_rewards.size(); ++j) {
    const auto& r = step_rewards[j];
    if (r.empty()) fail("rl reward-to-go: trajectory {} has no steps", j);
    rtg[j].assign(r.size(), 0.0);
    double acc = 0;
    for (size_t t = r.size(); t-- > 0;) {
      if (!std::isfinite(r[t])) fail("rl reward-to-go: trajectory {} step {} has a non-finite reward", j, t);
      acc = r[t] + gamma * acc;
      rtg[j][t] = acc;
    }
    returns[j] = rtg[j][0];
  }
  const auto st = group_stats(returns, group, o.unbiased_std);
  for (size_t j = 0; j < rtg.size(); ++j) {
    const Stats& s = st.at(group[j]);
    for (double& a : rtg[j]) {
      a -= s.mean;
      if (o.normalize_std && s.std > 0) a /= s.std + o.eps;  // equal returns: no scale to divide by
    }
  }
  return rtg;
}

double composite_reward(double process, double time, double outcome, const RewardWeights& w) {
  return w.process * process + w.time * time + w.outcome * outcome;
}

std::vector<double> composite_step_rewards(const std::vector<double>& process, double time, double outcome,
                                           const RewardWeights& w) {
  if (process.empty()) fail("rl composite reward: an episode needs at least one step");
  std::vector<double> r(process.size());
  for (size_t t = 0; t < process.size(); ++t) r[t] = w.process * process[t];
  r.back() += w.time * time + w.outcome * outcome;
  return r;
}

}  // namespace mmx::rl
