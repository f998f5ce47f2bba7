// The JSON config of `mmx rl train` (loop.h read_rl_config; docs/rl.md lists every key).
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "rl/loop.h"

namespace mmx::rl {

namespace {

template <class T>
void take(const nlohmann::json& j, const char* key, T& v) {
  if (j.contains(key)) v = j[key].get<T>();
}

}  // namespace

RlConfig read_rl_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open the RL config", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not JSON ({})", path, e.what());
  }
  static const char* known[] = {"model", "out", "objective", "eps_low", "eps_high", "kl_coef", "merge", "steps",
                                "prompts_per_step", "group", "max_tokens", "updates", "lr", "weight_decay", "clip", "seed",
                                "threads", "eval_every", "eval_items", "reward", "sandbox", "task", "quiet"};
  for (const auto& [k, v] : j.items())
    if (std::find_if(std::begin(known), std::end(known), [&](const char* s) { return k == s; }) == std::end(known))
      fail("{}: unknown key \"{}\" (docs/rl.md lists the keys)", path, k);
  RlConfig c;
  try {
    take(j, "model", c.model);
    take(j, "out", c.out);
    if (j.contains("objective")) c.objective.kind = parse_objective(j["objective"].get<std::string>());
    take(j, "eps_low", c.objective.eps_low);
    take(j, "eps_high", c.objective.eps_high);
    take(j, "kl_coef", c.objective.kl_coef);
    if (j.contains("merge")) {
      const std::string m = j["merge"].get<std::string>();
      if (m != "tree" && m != "none") fail("{}: \"merge\" is tree or none, not \"{}\"", path, m);
      c.merge_tree = m == "tree";
    }
    take(j, "steps", c.steps);
    take(j, "prompts_per_step", c.prompts_per_step);
    take(j, "group", c.group);
    take(j, "max_tokens", c.max_tokens);
    take(j, "updates", c.updates);
    take(j, "lr", c.lr);
    take(j, "weight_decay", c.weight_decay);
    take(j, "clip", c.clip);
    take(j, "seed", c.seed);
    take(j, "threads", c.threads);
    take(j, "eval_every", c.eval_every);
    take(j, "eval_items", c.eval_items);
    take(j, "quiet", c.quiet);
    if (j.contains("reward")) {
      for (const auto& [k, v] : j["reward"].items())
        if (k != "process" && k != "time" && k != "outcome") fail("{}: unknown reward weight \"{}\"", path, k);
      take(j["reward"], "process", c.reward.process);
      take(j["reward"], "time", c.reward.time);
      take(j["reward"], "outcome", c.reward.outcome);
    }
    if (j.contains("sandbox")) {
      for (const auto& [k, v] : j["sandbox"].items())
        if (k != "cpu_s" && k != "mem_mb" && k != "procs" && k != "wall_s" && k != "out_kb")
          fail("{}: unknown sandbox limit \"{}\" (cpu_s, mem_mb, procs, wall_s, out_kb)", path, k);
      take(j["sandbox"], "cpu_s", c.sandbox.cpu_s);
      take(j["sandbox"], "mem_mb", c.sandbox.mem_mb);
      take(j["sandbox"], "procs", c.sandbox.procs);
      take(j["sandbox"], "wall_s", c.sandbox.wall_s);
      take(j["sandbox"], "out_kb", c.sandbox.out_kb);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("{}: a value has the wrong type ({})", path, e.what());
  }
  if (c.model.empty()) fail("{}: \"model\" (the start checkpoint) is required", path);
  if (c.out.empty()) fail("{}: \"out\" (the run directory) is required", path);
  if (c.steps < 1 || c.prompts_per_step < 1 || c.group < 1 || c.max_tokens < 1 || c.updates < 1)
    fail("{}: steps, prompts_per_step, group, max_tokens and updates must be >= 1", path);
  if (!(c.lr > 0)) fail("{}: lr must be > 0", path);
  if (c.objective.kl_coef != 0)
    fail("{}: \"kl_coef\" needs a reference policy, which the RL loop does not keep yet (mmx rl grad takes "
         "ref_logprobs); leave it 0", path);
  return c;
}

}  // namespace mmx::rl
