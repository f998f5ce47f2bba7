// The agent-RL loop of `mmx rl train` (docs/rl.md "The RL loop"): per step, rollouts of G samples
// per prompt from the in-process engine (rl/rollout.h), rewards checked in the sandbox
// (rl/sandbox.h), group advantages (rl/advantage.h), one packed prefix-tree forward + backward of
// the objective (rl/packed_step.h, rl/objective.h), AdamW, and the new weights pushed into the live
// engine. Writes rl_log.csv, reward.png and the final checkpoint (loads in mmx generate / serve).
// Not here: the task (rl/task.h supplies prompts and checkers through RlTask), the CLI.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rl/advantage.h"
#include "rl/objective.h"
#include "rl/sandbox.h"

namespace mmx::rl {

struct RlConfig {
  std::string model;               // start checkpoint (F32 weights: the engine stores what the trainer pushes)
  std::string out;                 // run directory
  ObjectiveOptions objective;
  bool merge_tree = true;          // prefix-tree packing (false: each sample its own sequence)
  int64_t steps = 30;
  int64_t prompts_per_step = 8;
  int group = 4;                   // G samples per prompt
  int64_t max_tokens = 8;          // per completion
  int updates = 1;                 // optimizer steps per rollout batch (each over all of it; > 1: off-policy
                                   // updates where the ratio leaves 1 and the clipping acts)
  double lr = 1e-4, weight_decay = 0, clip = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  int64_t eval_every = 10;         // held-out success (greedy) every N steps and at the start/end; 0 = start/end
  int64_t eval_items = 64;
  // Composite reward = process·0 (no process signal in these tasks) + time·(−|completion| /
  // max_tokens: shorter is faster) + outcome·(1 right / 0 wrong); outcome only by default.
  RewardWeights reward{0, 0, 1};
  SandboxOptions sandbox;          // limits of each checker run
  bool quiet = false;
};

// Reads a JSON config (docs/rl.md lists every key; unknown keys are refused). Relative paths are
// taken from the current directory.
RlConfig read_rl_config(const std::string& path);

// What a task supplies: prompts (text), the sandboxed checker and an in-process scorer (the
// evaluation's, and a cross-check of the sandbox).
struct RlTask {
  std::function<std::vector<std::string>(int64_t step, int64_t n)> train_prompts;  // n prompts of step
  std::function<std::vector<std::string>(int64_t n)> eval_prompts;                 // held-out, fixed
  // The sandbox command that checks `completion` for `prompt`, and its verdict from the run's
  // exit status and stdout (1 right, 0 wrong; nullopt: the check itself failed).
  std::function<std::vector<std::string>(const std::string& prompt, const std::string& completion)> checker;
  std::function<std::optional<double>(int exit_status, const std::string& out)> verdict;
  std::function<double(const std::string& prompt, const std::string& completion)> score;  // in-process 1 / 0
  // Optional: the check of many samples in ONE sandbox run (a start per chunk of samples instead
  // of per sample; the loop chunks by count and bytes) and its per-sample verdicts.
  std::function<std::vector<std::string>(const std::vector<std::string>& prompts,
                                         const std::vector<std::string>& completions)>
      batch_checker;
  std::function<std::vector<std::optional<double>>(int exit_status, const std::string& out, size_t n)> batch_verdicts;
  std::vector<int32_t> stop_ids;   // a completion ends with one of these (emitted); eos ids are added
};

struct RlStepLog {
  int64_t step = 0;
  double reward_mean = 0, success = 0;     // over the step's samples
  double eval_success = -1;                // held-out greedy success (-1: not evaluated this step)
  double loss = 0, grad_norm = 0;
  ObjectiveDiagnostics diag;
  LogprobMismatch mismatch;                // trainer vs engine log-probs of the sampled tokens
  int64_t samples = 0, kept = 0, tokens = 0, packed_rows = 0, separate_rows = 0, infra_errors = 0;
  double rollout_s = 0, reward_s = 0, train_s = 0, step_s = 0;
};

// Runs the loop; returns every step's log (also written to out/rl_log.csv as it goes).
std::vector<RlStepLog> run_rl(const RlConfig& c, const RlTask& task);

}  // namespace mmx::rl
