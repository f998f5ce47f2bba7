// The RL loop of loop.h (its config reader: loop_config.cpp).
#include "rl/loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "engine/engine.h"
#include "formats/checkpoint.h"
#include "model/config.h"
#include "model/model.h"
#include "rl/packed_step.h"
#include "rl/rollout.h"
#include "rl/tree.h"
#include "tokenizer/tokenizer.h"
#include "train/adamw.h"
#include "train/kernels.h"
#include "train/params.h"

namespace mmx::rl {

namespace fs = std::filesystem;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void write_csv_header(std::ofstream& f) {
  f << "step,reward_mean,success,eval_success,loss,grad_norm,clip_frac_low,clip_frac_high,ratio_mean,"
       "logp_mismatch_mean,logp_mismatch_max,samples,kept,tokens,packed_rows,separate_rows,infra_errors,"
       "rollout_s,reward_s,train_s,step_s\n";
}

void write_csv_row(std::ofstream& f, const RlStepLog& l) {
  f << fmt::format("{},{:.6g},{:.6g},{:.6g},{:.8g},{:.6g},{:.6g},{:.6g},{:.8g},{:.3g},{:.3g},{},{},{},{},{},{},{:.3f},"
                   "{:.3f},{:.3f},{:.3f}\n",
                   l.step, l.reward_mean, l.success, l.eval_success, l.loss, l.grad_norm, l.diag.clip_frac_low,
                   l.diag.clip_frac_high, l.diag.ratio_mean, l.mismatch.mean_abs, l.mismatch.max_abs, l.samples,
                   l.kept, l.tokens, l.packed_rows, l.separate_rows, l.infra_errors, l.rollout_s, l.reward_s,
                   l.train_s, l.step_s);
  f.flush();
}

// reward.png from rl_log.csv (gnuplot, when installed): reward mean and held-out success per step.
void plot(const fs::path& out) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
  const fs::path script = out / "reward.gnuplot";
  std::ofstream g(script);
  g << "set terminal pngcairo size 720,420\nset output '" << (out / "reward.png").string() << "'\n"
    << "set datafile separator ','\nset key bottom right\nset grid\nset xlabel 'RL step'\n"
    << "set ylabel 'reward / success'\nset yrange [0:1]\n"
    << "plot '" << (out / "rl_log.csv").string() << "' every ::1 using 1:2 with lines lw 2 title 'train reward (mean)', "
    << "'' every ::1 using 1:($4 >= 0 ? $4 : 1/0) with linespoints pt 7 title 'held-out success (greedy)'\n";
  g.close();
  const std::string cmd = "gnuplot '" + script.string() + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "rl: gnuplot failed; rl_log.csv has the numbers\n");
}

void copy_if_exists(const fs::path& from, const fs::path& to) {
  if (fs::exists(from)) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// Held-out success: greedy completions of the eval prompts through the engine.
double evaluate(Rollouts& ro, const tok::Tokenizer& tk, const RlTask& task, const RlConfig& c,
                const std::vector<int32_t>& stops) {
  const std::vector<std::string> prompts = task.eval_prompts(c.eval_items);
  std::vector<RolloutRequest> reqs;
  for (const std::string& p : prompts) {
    RolloutRequest r;
    r.prompt = tk.encode(p);
    r.group = 1;
    r.sampling.temperature = 0;
    r.max_tokens = c.max_tokens;
    r.stop_ids = stops;
    reqs.push_back(std::move(r));
  }
  const std::vector<Rollout> out = ro.run(reqs);
  double ok = 0;
  for (const Rollout& r : out) ok += task.score(prompts[size_t(r.prompt_index)], tk.decode(r.completion, true));
  return ok / double(out.size());
}

// The sandboxed verdict of every sample: one run per sample, or per chunk with a batch checker.
std::vector<std::optional<double>> check_samples(const RlTask& task, const RlConfig& c,
                                                 const std::vector<std::string>& prompts,
                                                 const std::vector<Rollout>& rs, const std::vector<std::string>& texts) {
  std::vector<std::optional<double>> v(rs.size());
  auto note = [&](const SandboxResult& sr) {
    if (!c.quiet)
      std::fprintf(stderr, "rl: the sandboxed check failed (samples skipped): %s\n",
                   sr.infra_error ? sr.infra_error->c_str() : sr.err.substr(0, 200).c_str());
  };
  if (!task.batch_checker) {
    for (size_t k = 0; k < rs.size(); ++k) {
      const SandboxResult sr = run_sandbox(task.checker(prompts[size_t(rs[k].prompt_index)], texts[k]), c.sandbox);
      if (!sr.infra_error && sr.exit) v[k] = task.verdict(*sr.exit, sr.out);
      if (!v[k]) note(sr);
    }
    return v;
  }
  constexpr size_t kMaxChunk = 64, kMaxBytes = 128 << 10;  // argv stays far below the kernel's cap
  for (size_t a = 0; a < rs.size();) {
    std::vector<std::string> ps, cs;
    size_t bytes = 0, b = a;
    for (; b < rs.size() && ps.size() < kMaxChunk && (ps.empty() || bytes + texts[b].size() < kMaxBytes); ++b) {
      ps.push_back(prompts[size_t(rs[b].prompt_index)]);
      cs.push_back(texts[b]);
      bytes += texts[b].size();
    }
    const SandboxResult sr = run_sandbox(task.batch_checker(ps, cs), c.sandbox);
    if (!sr.infra_error && sr.exit) {
      const std::vector<std::optional<double>> got = task.batch_verdicts(*sr.exit, sr.out, ps.size());
      for (size_t i = 0; i < ps.size(); ++i) v[a + i] = got[i];
    }
    if (!v[a]) note(sr);
    a = b;
  }
  return v;
}

}  // namespace

std::vector<RlStepLog> run_rl(const RlConfig& c, const RlTask& task) {
  train::set_n_threads(c.threads);
  const ModelConfig cfg = load_config(c.model);
  const Checkpoint ck = open_checkpoint(c.model);
  if (!ck.has_tokenizer()) fail("{}: the RL loop needs the checkpoint's tokenizer.json", c.model);
  const CheckpointJson tj = ck.tokenizer();
  const tok::Tokenizer tk = tok::Tokenizer::from_json(tj.json, tj.where);
  std::vector<int32_t> stops = task.stop_ids;
  for (int64_t e : cfg.eos_token_ids) stops.push_back(int32_t(e));

  // The policy: the trainer's f32 master weights, and the engine that samples from them.
  train::ParamSet<float> P(train::param_layout(cfg));
  train::load_params(c.model, P);
  const fs::path out(c.out);
  fs::create_directories(out);
  // The engine loads an F32 copy of the start weights (out/start): whatever the checkpoint's
  // dtype (mmx train saves BF16), it then stores exactly what the trainer pushes.
  const fs::path start = out / "start";
  fs::create_directories(start);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    copy_if_exists(fs::path(c.model) / f, start / f);
  train::save_params(start.string(), P, DType::kF32);
  auto model = load_model(start.string());
  EngineOptions eo;
  eo.kv_dtype = DType::kF32;  // the sampled log-probs come from F32 K/V: the trainer's precision
  eo.max_running = int64_t(std::max<int64_t>(16, c.prompts_per_step * c.group));
  eo.batch_wait_ms = 0;
  Engine engine(*model, eo);
  push_weights(engine, P);  // the engine holds exactly the trainer's values from the start
  Rollouts ro(engine);
  train::AdamWConfig ac;
  ac.weight_decay = c.weight_decay;
  train::AdamW opt(ac, P.total());

  std::ofstream csv(out / "rl_log.csv");
  write_csv_header(csv);
  std::vector<RlStepLog> logs;
  const double t_start = now_s();
  const GroupAdvantageOptions aopt = advantage_options_for(c.objective.kind);
  RlStepLog L0;  // step 0: the start checkpoint's held-out success
  L0.reward_mean = L0.success = NAN;
  L0.eval_success = evaluate(ro, tk, task, c, stops);
  write_csv_row(csv, L0);
  logs.push_back(L0);
  const double eval0 = L0.eval_success;
  if (!c.quiet) std::fprintf(stderr, "rl: held-out success before training %.3f (%lld prompts, greedy)\n", eval0,
                             (long long)c.eval_items);
  for (int64_t step = 1; step <= c.steps; ++step) {
    RlStepLog L;
    L.step = step;
    const double t0 = now_s();
    // 1. rollouts: G samples per prompt, the raw policy's distribution (T = 1, no filters)
    const std::vector<std::string> prompts = task.train_prompts(step, c.prompts_per_step);
    std::vector<RolloutRequest> reqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      RolloutRequest r;
      r.prompt = tk.encode(prompts[i]);
      r.group = c.group;
      r.max_tokens = c.max_tokens;
      r.seed = c.seed * 1000003 + uint64_t(step) * 131 + i;
      r.stop_ids = stops;
      reqs.push_back(std::move(r));
    }
    const std::vector<Rollout> rs = ro.run(reqs);
    const double t1 = now_s();
    // 2. rewards in the sandbox: outcome 1/0 (exit 0 = correct) + the time term (−wall seconds)
    std::vector<std::string> texts(rs.size());
    for (size_t k = 0; k < rs.size(); ++k) texts[k] = tk.decode(rs[k].completion, true);
    const std::vector<std::optional<double>> verdicts = check_samples(task, c, prompts, rs, texts);
    std::vector<double> rewards;
    std::vector<int32_t> groups;
    std::vector<int32_t> usable;  // samples whose check ran (a failed check is not a 0)
    for (size_t k = 0; k < rs.size(); ++k) {
      const std::string& p = prompts[size_t(rs[k].prompt_index)];
      if (!verdicts[k]) {
        ++L.infra_errors;
        continue;
      }
      const double outcome = *verdicts[k];
      if (outcome != task.score(p, texts[k]))
        fail("rl: the sandboxed checker and the in-process score disagree on {:?} -> {:?}", p, texts[k]);
      L.success += outcome;
      rewards.push_back(composite_reward(0.0, -double(rs[k].completion.size()) / double(c.max_tokens), outcome, c.reward));
      groups.push_back(rs[k].prompt_index);
      usable.push_back(int32_t(k));
    }
    L.samples = int64_t(rs.size());
    L.success /= double(std::max<size_t>(rs.size(), 1));
    for (double r : rewards) L.reward_mean += r / double(rewards.size());
    const double t2 = now_s();
    // 3. advantages (group-relative; DAPO drops groups whose rewards are all equal)
    std::vector<double> adv = group_advantages(rewards, groups, aopt);
    std::vector<int32_t> keep(usable.size());
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = int32_t(i);
    if (c.objective.kind == ObjectiveKind::kDapo) keep = dapo_surviving_samples(rewards, groups);
    std::vector<Sample> samples;
    ObjectiveBatch ob;
    std::vector<double> engine_logp;
    for (int32_t i : keep) {
      const Rollout& r = rs[size_t(usable[size_t(i)])];
      samples.push_back({r.prompt, r.completion});
      for (size_t t = 0; t < r.completion.size(); ++t) {
        ob.sample.push_back(int32_t(samples.size() - 1));
        ob.old_logp.push_back(r.logprobs[t]);
        ob.advantage.push_back(adv[size_t(i)]);
        engine_logp.push_back(r.logprobs[t]);
      }
      ob.sample_len.push_back(int64_t(r.completion.size()));
      ob.max_len = c.max_tokens;
    }
    L.kept = int64_t(samples.size());
    // 4. one packed forward + backward of the objective, AdamW, push
    if (!samples.empty()) {
      const Packed pk = c.merge_tree ? pack_tree(samples) : pack_separate(samples);
      L.packed_rows = pk.n_seqs * pk.seq_len;
      L.separate_rows = separate_tokens(samples);
      L.tokens = int64_t(ob.sample.size());
      auto g = make_packed_graph<float>(cfg, P, pk);
      for (int u = 0; u < c.updates; ++u) {
        P.zero_grad();
        std::vector<double> logp;
        ObjectiveDiagnostics diag;
        const double loss = packed_forward_backward<float>(
            *g, pk,
            [&](const std::vector<double>& lp, std::vector<double>& dl) {
              ObjectiveResult r = objective_loss(c.objective, ob, lp.data());
              dl = std::move(r.dloss_dlogp);
              diag = r.diag;
              return r.loss;
            },
            &logp);
        if (u == 0) {  // the policy the engine sampled from: the precision mismatch alone
          L.mismatch = logprob_mismatch(logp.data(), engine_logp.data(), int64_t(logp.size()));
          L.loss = loss;
        }
        L.diag = diag;  // the last update's: how far the policy has moved from the rollout's
        L.grad_norm = train::clip_grad_norm(P, c.clip > 0 ? c.clip : 1e300);
        opt.step(P, c.lr);
      }
      push_weights(engine, P);
    }
    const double t3 = now_s();
    L.rollout_s = t1 - t0;
    L.reward_s = t2 - t1;
    L.train_s = t3 - t2;
    if ((c.eval_every > 0 && step % c.eval_every == 0) || step == c.steps) L.eval_success = evaluate(ro, tk, task, c, stops);
    L.step_s = now_s() - t0;
    write_csv_row(csv, L);
    logs.push_back(L);
    if (!c.quiet) {
      const double el = now_s() - t_start, eta = el / double(step) * double(c.steps - step);
      std::fprintf(stderr,
                   "rl step %lld/%lld  reward %.3f  success %.3f%s  clip %.3f/%.3f  ratio %.4f  |dlogp| %.1e  "
                   "%.0f tok/s  ETA %.0fs\n",
                   (long long)step, (long long)c.steps, L.reward_mean, L.success,
                   L.eval_success >= 0 ? fmt::format("  held-out {:.3f}", L.eval_success).c_str() : "",
                   L.diag.clip_frac_low, L.diag.clip_frac_high, L.diag.ratio_mean, L.mismatch.mean_abs,
                   double(L.tokens + L.packed_rows) / std::max(L.step_s, 1e-9), eta);
    }
  }
  // The checkpoint: the model's config and tokenizer files, the trained F32 weights.
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    copy_if_exists(fs::path(c.model) / f, out / f);
  train::save_params(out.string(), P, DType::kF32);
  csv.close();
  plot(out);
  if (!c.quiet) std::fprintf(stderr, "rl: wrote %s (checkpoint, rl_log.csv, reward.png)\n", out.string().c_str());
  return logs;
}

}  // namespace mmx::rl
