// mmx rl task-data / task-eval: the toy verifiable tasks of rl/task.h (docs/rl.md "Toy task").
//   mmx rl task-data   items of one split as training lines (prompt answer\n) or JSONL
//   mmx rl task-eval   a checkpoint's success rate on the held-out split, greedy or sampled from
//                      the raw distribution (T, no top-k / top-p), scored by score_completion
// Not here: the sandbox check (rl/sandbox.h runs checker_argv), the RL loop.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "common.h"
#include "engine/generate.h"
#include "ops/ops.h"
#include "rl/task.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {

// The task flags shared by both commands.
void add_task_options(CLI::App* c, rl::TaskSpec* s) {
  c->add_option("--task", s->kind, "rev (reverse space-separated letters) or add (a+b=)")
      ->check(CLI::IsMember({"rev", "add"}));
  c->add_option("--min-len", s->min_len, "rev: fewest letters")->check(CLI::Range(1, 12));
  c->add_option("--max-len", s->max_len, "rev: most letters")->check(CLI::Range(1, 12));
  c->add_option("--letters", s->letters, "rev: alphabet = the first N of a..z")->check(CLI::Range(2, 26));
  c->add_option("--digits", s->digits, "add: operands below 10^N")->check(CLI::Range(1, 9));
  c->add_option("--eval-fraction", s->eval_fraction, "Share of the items held out for evaluation (by hash)");
}

rl::Split parse_split(const std::string& s) { return s == "eval" ? rl::Split::kEval : rl::Split::kTrain; }

struct DataOpts {
  rl::TaskSpec spec;
  int64_t n = 100000;
  uint64_t seed = 1;
  std::string split = "train", format = "text", out;
};

void run_task_data(const DataOpts& o) {
  const std::vector<rl::TaskItem> items = rl::make_task_items(o.spec, parse_split(o.split), o.seed, o.n);
  std::ofstream f(o.out, std::ios::binary);
  if (!f) fail("cannot write {}", o.out);
  for (const rl::TaskItem& it : items) {
    if (o.format == "text") f << rl::task_line(it);
    else f << nlohmann::json{{"prompt", it.prompt}, {"answer", it.answer}, {"split", o.split}}.dump() << "\n";
  }
  if (!f.flush()) fail("writing {} failed (disk full?)", o.out);
  std::printf("task=%s split=%s n=%lld -> %s\n", o.spec.kind.c_str(), o.split.c_str(), (long long)o.n, o.out.c_str());
}

struct EvalOpts {
  rl::TaskSpec spec;
  std::string model, split = "eval", out;
  int64_t n = 200, max_tokens = 16;
  int samples = 1, threads = 0;
  uint64_t seed = 1;
  float temperature = 0;
};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void run_task_eval(const EvalOpts& o) {
  ops::set_n_threads(o.threads);
  const Checkpoint ck = open_checkpoint(o.model);
  if (!ck.has_tokenizer()) fail("{} has no tokenizer.json (task-eval prompts are text)", o.model);
  const tok::Tokenizer tk = load_tokenizer(ck);
  auto model = load_for_cli(o.model, LoadOptions{});
  const std::vector<rl::TaskItem> items =
      rl::make_task_items(o.spec, parse_split(o.split), o.seed, o.n, /*distinct=*/true);
  std::vector<int32_t> stops = rl::task_stop_ids(tk);
  for (int64_t id : model->config().eos_token_ids) stops.push_back(int32_t(id));
  const int samples = o.temperature == 0 ? 1 : o.samples;
  std::ofstream log;
  if (!o.out.empty()) {
    log.open(o.out, std::ios::binary);
    if (!log) fail("cannot write {}", o.out);
  }
  GenerateOptions go;
  go.n_valid_vocab = tk.vocab_size();
  int64_t correct = 0, mixed = 0, all_right = 0, tokens = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    GenRequest req;
    req.prompt = tk.encode(items[i].prompt);
    req.max_tokens = o.max_tokens;
    req.stop_ids = stops;
    req.logprobs = false;
    req.sampling.temperature = o.temperature;  // raw distribution: no top-k / top-p / min-p
    int right = 0;
    for (int s = 0; s < samples; ++s) {
      req.sampling.seed = mix(mix(o.seed, i), uint64_t(s));
      const std::vector<int32_t> ids = generate(*model, req, [](int32_t) { return true; }, nullptr, go);
      const std::string text = tk.decode(ids, /*skip_special_tokens=*/true);
      const double r = rl::score_completion(items[i], text);
      right += int(r);
      tokens += int64_t(ids.size());
      if (log)
        log << nlohmann::json{{"prompt", items[i].prompt}, {"answer", items[i].answer}, {"completion", text},
                              {"sample", s}, {"reward", r}}
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
    }
    correct += right;
    mixed += right > 0 && right < samples;
    all_right += right == samples;
  }
  const double n = double(items.size());
  std::printf("task=%s split=%s prompts=%zu samples=%d temperature=%g success=%.4f (%lld/%lld) "
              "all_right=%.4f mixed_groups=%.4f mean_tokens=%.2f\n",
              o.spec.kind.c_str(), o.split.c_str(), items.size(), samples, double(o.temperature),
              double(correct) / (n * samples), (long long)correct, (long long)(items.size() * samples),
              double(all_right) / n, double(mixed) / n, double(tokens) / (n * samples));
}

}  // namespace

void add_rl_task(CLI::App* rl, Action& action) {
  {
    auto o = std::make_shared<DataOpts>();
    CLI::App* c = rl->add_subcommand("task-data", "Items of a toy task's split: training lines (prompt answer) or JSONL");
    add_task_options(c, &o->spec);
    c->add_option("--n", o->n, "Items (drawn with replacement)")->check(CLI::NonNegativeNumber);
    c->add_option("--seed", o->seed, "Seed of the draw (the split does not depend on it)");
    c->add_option("--split", o->split, "train or eval (held out: never in a train corpus)")
        ->check(CLI::IsMember({"train", "eval"}));
    c->add_option("--format", o->format, "text: prompt + answer + \\n per line (mmx train --data); jsonl")
        ->check(CLI::IsMember({"text", "jsonl"}));
    c->add_option("-o,--out", o->out, "Output file")->required();
    c->callback([o, &action] { action = [o] { run_task_data(*o); }; });
  }
  {
    auto o = std::make_shared<EvalOpts>();
    CLI::App* c = rl->add_subcommand("task-eval", "A checkpoint's success rate on a toy task's held-out prompts");
    c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
    add_task_options(c, &o->spec);
    c->add_option("--n", o->n, "Distinct prompts")->check(CLI::PositiveNumber);
    c->add_option("--seed", o->seed, "Seed of the prompts and of the samples");
    c->add_option("--split", o->split, "eval (default) or train")->check(CLI::IsMember({"train", "eval"}));
    c->add_option("--temperature", o->temperature, "0 = greedy; else the raw softmax at T (no top-k / top-p)")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--samples", o->samples, "Samples per prompt when T > 0")->check(CLI::PositiveNumber);
    c->add_option("--max-tokens", o->max_tokens, "Most tokens per completion (it stops at a '\\n' token)")
        ->check(CLI::PositiveNumber);
    c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
    c->add_option("-o,--out", o->out, "JSONL of every completion and its reward");
    c->callback([o, &action] { action = [o] { run_task_eval(*o); }; });
  }
}

}  // namespace mmx::cli
