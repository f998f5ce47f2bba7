// mmx bench rl: one RL training step (forward + CISPO loss + backward; the optimizer costs the
// same either way and is left out) over a group of G samples that share a prompt of P tokens and
// each add R of their own, three ways in alternating rounds (medians reported):
//   tree      the group packed as one prefix tree (rl/tree.h): P + G·R rows, interval attention
//   separate  each sample its own sequence, through the same interval kernel (causal chains):
//             G·(P+R) rows — the fair baseline, the same kernels on more tokens
//   plain     each sample its own causal sequence as `mmx train` runs it (full-square GEMM
//             attention) — what a user without the packer gets
// next to the token-count bound G(P+R) / (P+G·R). --agent N instead builds an agent trajectory
// of about N tokens (system prompt, turns of tool output + 2 assistant branches, continuing on
// the first) and times the packed step alone with its peak memory.
// bench/rl/run.sh runs the sweep and writes the table of docs/rl.md.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "common.h"
#include "model/config.h"
#include "ops/ops.h"
#include "rl/objective.h"
#include "rl/packed_step.h"
#include "rl/tree.h"
#include "train/kernels.h"
#include "train/params.h"

namespace mmx::cli {

namespace {

struct RlBenchOpts {
  std::string model, json;
  int64_t prompt = 2048, response = 256, group = 8, agent = 0;
  int rounds = 3, threads = 0;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// The CISPO loss of the samples (old log-probs −8, alternating advantages): a realistic loss step.
rl::TermLoss cispo(const std::vector<rl::Sample>& s) {
  auto b = std::make_shared<rl::ObjectiveBatch>();
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t k = 0; k < s[i].completion.size(); ++k) {
      b->sample.push_back(int32_t(i));
      b->old_logp.push_back(-8.0);
      b->advantage.push_back(i % 2 ? 1.0 : -1.0);
    }
    b->sample_len.push_back(int64_t(s[i].completion.size()));
  }
  return [b](const std::vector<double>& logp, std::vector<double>& g) {
    rl::ObjectiveResult r = rl::objective_loss({}, *b, logp.data());
    g = std::move(r.dloss_dlogp);
    return r.loss;
  };
}

struct Timed {
  double s = 0;
  int64_t rows = 0;
};

Timed step(const ModelConfig& cfg, train::ParamSet<float>& P, const rl::Packed& p, const rl::TermLoss& loss) {
  auto g = rl::make_packed_graph<float>(cfg, P, p);  // allocation outside the timed part
  P.zero_grad();
  const double t0 = now_s();
  rl::packed_forward_backward<float>(*g, p, loss);
  return {now_s() - t0, p.n_seqs * p.seq_len};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<rl::Sample> group_samples(int64_t P, int64_t R, int64_t G, int64_t vocab) {
  std::mt19937_64 rng(7);
  auto ids = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = int32_t(rng() % uint64_t(vocab));
    return v;
  };
  const std::vector<int32_t> prompt = ids(P);
  std::vector<rl::Sample> s;
  for (int64_t g = 0; g < G; ++g) s.push_back({prompt, ids(R)});
  return s;
}

// System prompt, then turns of (tool output / user, 1024) + 2 assistant branches of 512; the
// conversation continues on branch 0. One sample per (turn, branch).
std::vector<rl::Sample> agent_samples(int64_t tokens, int64_t vocab) {
  std::mt19937_64 rng(11);
  auto ids = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = int32_t(rng() % uint64_t(vocab));
    return v;
  };
  const int64_t sys = 1024, tool = 1024, reply = 512;
  std::vector<int32_t> history = ids(sys);
  std::vector<rl::Sample> s;
  for (int64_t have = sys; have < tokens; have += tool + 2 * reply) {
    const std::vector<int32_t> t = ids(tool);
    history.insert(history.end(), t.begin(), t.end());
    const std::vector<int32_t> a0 = ids(reply), a1 = ids(reply);
    s.push_back({history, a0});
    s.push_back({history, a1});
    history.insert(history.end(), a0.begin(), a0.end());
  }
  return s;
}

void bench_rl(const RlBenchOpts& o) {
  train::set_n_threads(o.threads);
  const ModelConfig cfg = load_config(o.model);
  train::ParamSet<float> P(train::param_layout(cfg));
  train::load_params(o.model, P);
  FILE* js = o.json.empty() ? nullptr : std::fopen(o.json.c_str(), "a");
  if (!o.json.empty() && !js) fail("{}: cannot open for appending", o.json);
  if (o.agent > 0) {
    const std::vector<rl::Sample> s = agent_samples(o.agent, cfg.vocab_size);
    const rl::Packed tree = rl::pack_tree(s);
    const rl::TermLoss loss = cispo(s);
    std::vector<double> t;
    for (int r = 0; r < o.rounds; ++r) {
      t.push_back(step(cfg, P, tree, loss).s);
      std::fprintf(stderr, "agent round %d/%d: %.2f s\n", r + 1, o.rounds, t.back());
    }
    const double med = median(t), rss = peak_rss_mib();
    std::printf("agent trajectory: %zu samples, %lld packed rows (separately %lld: bound %.1fx); step %.2f s "
                "(median of %d) = %.0f rows/s; peak RSS %.0f MiB\n",
                s.size(), (long long)tree.seq_len, (long long)rl::separate_tokens(s),
                double(rl::separate_tokens(s)) / double(tree.seq_len), med, o.rounds, double(tree.seq_len) / med, rss);
    if (js)
      std::fprintf(js, "{\"kind\":\"agent\",\"samples\":%zu,\"rows\":%lld,\"separate_rows\":%lld,\"step_s\":%.4f,"
                       "\"rounds\":[%s],\"peak_rss_mib\":%.0f,\"threads\":%d}\n",
                   s.size(), (long long)tree.seq_len, (long long)rl::separate_tokens(s), med,
                   fmt::format("{:.4f}", fmt::join(t, ",")).c_str(), rss, ops::n_threads());
  } else {
    const std::vector<rl::Sample> s = group_samples(o.prompt, o.response, o.group, cfg.vocab_size);
    const rl::Packed tree = rl::pack_tree(s), plain = rl::pack_separate(s);
    rl::Packed chains = plain;  // the same rows as chains: the interval kernel, nothing shared
    chains.parents.resize(chains.tokens.size());
    for (int64_t i = 0; i < int64_t(chains.parents.size()); ++i)
      chains.parents[size_t(i)] = i % chains.seq_len == 0 ? -1 : int32_t(i % chains.seq_len) - 1;
    const rl::TermLoss loss = cispo(s);
    std::vector<double> tt, ts, tp;
    for (int r = 0; r < o.rounds; ++r) {
      tt.push_back(step(cfg, P, tree, loss).s);
      ts.push_back(step(cfg, P, chains, loss).s);
      tp.push_back(step(cfg, P, plain, loss).s);
      std::fprintf(stderr, "round %d/%d: tree %.3f s, separate %.3f s, plain %.3f s\n", r + 1, o.rounds, tt.back(),
                   ts.back(), tp.back());
    }
    const double bound = double(o.group * (o.prompt + o.response)) / double(o.prompt + o.group * o.response);
    const double mt = median(tt), ms = median(ts), mp = median(tp);
    std::printf("P=%lld R=%lld G=%lld: tree %.3f s, separate %.3f s, plain %.3f s (medians of %d); speed-up %.2fx "
                "(vs plain %.2fx), token bound %.2fx: %.0f%% of the bound\n",
                (long long)o.prompt, (long long)o.response, (long long)o.group, mt, ms, mp, o.rounds, ms / mt, mp / mt,
                bound, 100.0 * (ms / mt) / bound);
    if (js)
      std::fprintf(js, "{\"kind\":\"group\",\"P\":%lld,\"R\":%lld,\"G\":%lld,\"tree_s\":%.4f,\"separate_s\":%.4f,"
                       "\"plain_s\":%.4f,\"tree_rounds\":[%s],\"separate_rounds\":[%s],\"plain_rounds\":[%s],"
                       "\"bound\":%.4f,\"speedup\":%.4f,\"threads\":%d}\n",
                   (long long)o.prompt, (long long)o.response, (long long)o.group, mt, ms, mp,
                   fmt::format("{:.4f}", fmt::join(tt, ",")).c_str(), fmt::format("{:.4f}", fmt::join(ts, ",")).c_str(),
                   fmt::format("{:.4f}", fmt::join(tp, ",")).c_str(), bound, ms / mt, ops::n_threads());
  }
  if (js) std::fclose(js);
}

}  // namespace

void add_bench_rl(CLI::App* bench, Action& action) {
  auto o = std::make_shared<RlBenchOpts>();
  CLI::App* c = bench->add_subcommand("rl", "RL training step: prefix-tree packing vs separate sequences");
  c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  c->add_option("--prompt", o->prompt, "Shared prompt tokens P")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--response", o->response, "Tokens of each sample's own completion R")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--group", o->group, "Samples per group G")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--agent", o->agent, "Instead: an agent trajectory of about N tokens, packed step only")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--rounds", o->rounds, "Alternating rounds (the median is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--json", o->json, "Append one JSON line of the raw timings to this file");
  c->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  c->callback([o, &action] { action = [o] { bench_rl(*o); }; });
}

}  // namespace mmx::cli
