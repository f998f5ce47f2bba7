// mmx generate: stream tokens from a checkpoint.
#include <cstdio>

#include "base/error.h"
#include "common.h"
#include "engine/generate.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, prompt, ids;
  int n = 32, threads = 0;
  SamplingParams sp;
  bool stats = false;
  bool ignore_eos = false;
};
}  // namespace

void add_generate(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("generate", "Generate tokens after a prompt (prints ids, space-separated, on stdout)");
  c->add_option("-m,--model", o->model, "Checkpoint directory (Hugging Face layout)")->required();
  auto* p = c->add_option("-p,--prompt", o->prompt, "Prompt text (needs the tokenizer; not available yet — use --ids)");
  auto* i = c->add_option("--ids", o->ids, "Prompt token ids, comma-separated, e.g. 1,2,3");
  p->excludes(i);
  c->add_option("-n,--n-predict", o->n, "Number of tokens to generate")->check(CLI::NonNegativeNumber);
  c->add_option("--temp", o->sp.temperature, "Sampling temperature (0 = greedy)");
  c->add_option("--top-k", o->sp.top_k, "Top-k (0 = off)");
  c->add_option("--top-p", o->sp.top_p, "Top-p nucleus mass (1 = off)");
  c->add_option("--min-p", o->sp.min_p, "Min-p relative to the most likely token (0 = off)");
  c->add_option("--seed", o->sp.seed, "Sampling seed");
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  c->add_flag("--stats", o->stats, "Print prefill/decode speed on stderr");
  c->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the end-of-sequence token");
  c->callback([o, &action] {
    action = [o] {
      if (o->ids.empty())
        fail("text prompts need the tokenizer, which is not part of this build yet; pass token ids "
             "with --ids 1,2,3");
      ops::set_n_threads(o->threads);
      const std::vector<int32_t> prompt = parse_ids(o->ids);
      auto model = load_model(o->model, progress_bar);
      Sampler sampler(o->sp);
      GenerateStats st;
      bool first = true;
      generate(*model, prompt, o->n, sampler,
               o->ignore_eos ? std::vector<int64_t>{} : model->config().eos_token_ids,
               [&](int32_t t) {
                 std::printf(first ? "%d" : " %d", t);
                 std::fflush(stdout);
                 first = false;
                 return true;
               },
               &st);
      std::printf("\n");
      if (o->stats)
        std::fprintf(stderr, "prefill %lld tokens in %.3f s (%.1f tok/s); decode %lld tokens in %.3f s (%.1f tok/s)\n",
                     (long long)st.n_prompt, st.prefill_s, st.n_prompt / st.prefill_s,
                     (long long)st.n_generated, st.decode_s,
                     st.n_generated > 1 ? (st.n_generated - 1) / st.decode_s : 0.0);
    };
  });
}

}  // namespace mmx::cli
