// Advantages and rewards for the RL objectives (docs/rl.md "Objectives", "Advantages and rewards"):
//   * group-relative advantages: Â_i = (R_i − mean_g R) [ / (std_g R + eps) ] over the samples of
//     the same prompt (group g); GRPO divides by the std, Dr.GRPO does not;
//   * DAPO's dynamic sampling: drop the groups whose rewards are all equal (their Â are all 0);
//   * reward-to-go with a trajectory baseline for multi-step episodes (seed 004, Forge):
//     Â_{j,t} = Σ_{t'≥t} γ^{t'−t} r_{j,t'} − b_g,  b_g = mean over the group's trajectories of
//     their return Σ_t γ^t r_{j,t}; optionally / (std_g of the returns + eps);
//   * composite rewards: process + completion time + outcome, weights configurable.
// Every function is pure; samples are indexed in the caller's order, group ids need not be
// adjacent or dense. Not here: the objectives (rl/objective.h), the sandbox that checks answers.
#pragma once

#include <cstdint>
#include <vector>

#include "rl/objective.h"

namespace mmx::rl {

struct GroupAdvantageOptions {
  bool normalize_std = true;  // GRPO: true; Dr.GRPO: false (no std normalisation)
  bool unbiased_std = true;   // std with 1/(G−1) (torch.std, as verl and TRL compute it); false: 1/G
  double eps = 1e-6;          // added to the std (a group with equal rewards gets Â = 0)
};
GroupAdvantageOptions grpo_advantage_options();    // {true, true, 1e-6}
GroupAdvantageOptions drgrpo_advantage_options();  // {false, ...}: mean-centred only
// The advantage each objective is published with: Dr.GRPO mean-centred; CISPO (M1 report Eq. 2),
// GRPO, DAPO group-normalised; PPO has no critic here, so it gets GRPO's advantages too.
GroupAdvantageOptions advantage_options_for(ObjectiveKind kind);

// rewards [m], group [m] -> Â [m]. A group of one sample has Â = 0. Throws mmx::Error on sizes
// that disagree or a non-finite reward.
std::vector<double> group_advantages(const std::vector<double>& rewards, const std::vector<int32_t>& group,
                                     const GroupAdvantageOptions& o = {});

// DAPO dynamic sampling: the indices (ascending) of the samples whose group has at least two
// different rewards (|R_i − R_j| > tol for some pair). The dropped groups carry no gradient.
std::vector<int32_t> dapo_surviving_samples(const std::vector<double>& rewards, const std::vector<int32_t>& group,
                                            double tol = 0.0);

// Reward-to-go with a trajectory baseline. step_rewards[j] = r_{j,0..T_j−1} (T_j >= 1) of
// trajectory j, group[j] its task's group. Returns Â[j][t] (one advantage per step; the caller
// repeats it over the step's tokens). With T_j = 1 and γ = 1 this is group_advantages. With
// normalize_std and a group whose returns are all equal (std 0) the advantages stay centred, not
// divided by eps (the steps of one trajectory still differ).
std::vector<std::vector<double>> reward_to_go_advantages(const std::vector<std::vector<double>>& step_rewards,
                                                         const std::vector<int32_t>& group, double gamma = 1.0,
                                                         const GroupAdvantageOptions& o = {false, true, 1e-6});

// Composite reward of one step or trajectory: w_p · process + w_t · time + w_o · outcome.
struct RewardWeights {
  double process = 1.0;  // dense per-step behaviour feedback
  double time = 1.0;     // task completion time (the caller's score, e.g. −seconds / budget)
  double outcome = 1.0;  // the verifiable final result (sandbox: pass = 1, fail = 0)
};
double composite_reward(double process, double time, double outcome, const RewardWeights& w);

// Per-step rewards of one episode for reward_to_go_advantages: r_t = w_p · process[t], and the
// last step adds w_t · time + w_o · outcome (both known only at the end). process: [T >= 1].
std::vector<double> composite_step_rewards(const std::vector<double>& process, double time, double outcome,
                                           const RewardWeights& w);

}  // namespace mmx::rl
