// mmx rl: the agent-RL commands (docs/rl.md).
//   mmx rl train  RL on a toy verifiable task (rl/loop.h): --config FILE
//   mmx rl grad   the policy-gradient loss of a batch of scored samples and every parameter's
//                 gradient, merged as a prefix tree or run separately (the same numbers)
//   mmx rl task-data, task-eval   the toy verifiable tasks (cmd_rl_task.cpp)
#include <cstdio>

#include "base/error.h"
#include "common.h"
#include "model/config.h"
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/checkpoint.h"
#include "rl/loop.h"
#include "rl/objective.h"
#include "rl/task_rl.h"
#include "tokenizer/tokenizer.h"
#include "rl/packed_step.h"
#include "rl/samples.h"
#include "rl/tree.h"
#include "train/kernels.h"
#include "train/params.h"

namespace mmx::cli {

namespace {

struct GradOpts {
  std::string model, samples, out, objective = "cispo", merge = "tree", dtype = "f64";
  double eps_low = NAN, eps_high = NAN, kl_coef = 0;
  int threads = 0;
};

template <class R>
void run_rl_grad(const GradOpts& o) {
  const ModelConfig cfg = load_config(o.model);
  const std::vector<rl::ScoredSample> samples = rl::read_samples_jsonl(o.samples, cfg.vocab_size);
  rl::ObjectiveOptions opt;
  opt.kind = rl::parse_objective(o.objective);
  opt.eps_low = o.eps_low;
  opt.eps_high = o.eps_high;
  opt.kl_coef = o.kl_coef;
  const rl::ObjectiveBatch ob = rl::objective_batch(samples);
  if (opt.kl_coef != 0 && ob.ref_logp.empty())
    fail("{}: --kl-coef needs \"ref_logprobs\" on every sample", o.samples);
  const std::vector<rl::Sample> ids = rl::sample_ids(samples);
  const rl::Packed packed = o.merge == "tree" ? rl::pack_tree(ids) : rl::pack_separate(ids);

  train::ParamSet<R> P(train::param_layout(cfg));
  train::load_params(o.model, P);
  auto graph = rl::make_packed_graph<R>(cfg, P, packed);
  P.zero_grad();
  rl::ObjectiveDiagnostics diag;
  const double loss = rl::packed_forward_backward<R>(
      *graph, packed, [&](const std::vector<double>& logp, std::vector<double>& g) {
        rl::ObjectiveResult r = rl::objective_loss(opt, ob, logp.data());
        g = std::move(r.dloss_dlogp);
        diag = r.diag;
        return r.loss;
      });
  train::save_grads(o.out, loss, P);
  std::printf("loss=%.17g samples=%zu scored=%zu rows=%lld (separate %lld) clip_low=%.4g clip_high=%.4g ratio=%.6g\n",
              loss, samples.size(), packed.scored.size(), (long long)(packed.n_seqs * packed.seq_len),
              (long long)rl::separate_tokens(ids), diag.clip_frac_low, diag.clip_frac_high, diag.ratio_mean);
}

void add_rl_grad(CLI::App* rl, Action& action) {
  auto o = std::make_shared<GradOpts>();
  CLI::App* c = rl->add_subcommand("grad", "Policy-gradient loss of scored samples and every parameter's gradient");
  c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  c->add_option("--samples", o->samples,
                "JSONL, one sample a line: {\"prompt\": [ids], \"completion\": [ids], \"advantage\": A, "
                "\"old_logprobs\": [one per completion id]}")
      ->required();
  c->add_option("--objective", o->objective, "cispo, ppo, grpo, dapo or drgrpo (docs/rl.md)")
      ->check(CLI::IsMember({"cispo", "ppo", "grpo", "dapo", "drgrpo"}));
  c->add_option("--eps-low", o->eps_low, "Lower clip ε_low (default: the objective's, docs/rl.md)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--eps-high", o->eps_high, "Upper clip ε_high (default: the objective's)")->check(CLI::NonNegativeNumber);
  c->add_option("--kl-coef", o->kl_coef, "k3 KL to the reference policy (needs ref_logprobs)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--merge", o->merge, "tree: shared prefixes once (prefix-tree packing); none: each sample alone")
      ->check(CLI::IsMember({"tree", "none"}));
  c->add_option("--dtype", o->dtype, "Arithmetic: f64 or f32")->check(CLI::IsMember({"f64", "f32"}));
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  c->add_option("-o,--out", o->out, "Output safetensors (F64): loss [1] and d loss / d θ per tensor")->required();
  c->callback([o, &action] {
    action = [o] {
      train::set_n_threads(o->threads);
      if (o->dtype == "f64") run_rl_grad<double>(*o);
      else run_rl_grad<float>(*o);
    };
  });
}

struct TrainOpts {
  std::string config;
};

void run_rl_train(const TrainOpts& o) {
  const rl::RlConfig c = rl::read_rl_config(o.config);
  std::ifstream in(o.config);
  const nlohmann::json j = nlohmann::json::parse(in);
  if (!j.contains("task")) fail("{}: \"task\" is required (e.g. {{\"kind\": \"rev\"}}; docs/rl.md)", o.config);
  const rl::TaskSpec spec = rl::task_spec_from_json(j["task"], o.config);
  const Checkpoint ck = open_checkpoint(c.model);
  if (!ck.has_tokenizer()) fail("{}: no tokenizer.json (the task's prompts are text)", c.model);
  const tok::Tokenizer tk = load_tokenizer(ck);
  const std::vector<rl::RlStepLog> logs = rl::run_rl(c, rl::make_rl_task(spec, c.seed, tk));
  const rl::RlStepLog& first = logs.front();
  const rl::RlStepLog& last = logs.back();
  std::printf("held-out success %.3f -> %.3f over %lld steps (%s)\n", first.eval_success, last.eval_success,
              (long long)c.steps, rl::objective_name(c.objective.kind));
}

void add_rl_train(CLI::App* rl, Action& action) {
  auto o = std::make_shared<TrainOpts>();
  CLI::App* c = rl->add_subcommand("train", "RL on a verifiable task: rollouts from the engine, rewards in the sandbox");
  c->add_option("--config", o->config, "JSON config (docs/rl.md \"The RL loop\" lists every key)")->required();
  c->callback([o, &action] { action = [o] { run_rl_train(*o); }; });
}

}  // namespace

void add_rl(CLI::App& app, Action& action) {
  CLI::App* rl = app.add_subcommand("rl", "Agent reinforcement learning: objectives, prefix-tree training");
  rl->require_subcommand(1);
  add_rl_grad(rl, action);
  add_rl_train(rl, action);
  add_rl_task(rl, action);
}

}  // namespace mmx::cli
