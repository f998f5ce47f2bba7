// mmx ppl: held-out perplexity of a checkpoint on a text file, through the inference engine.
// Contract (stable): the last stdout line is exactly
//   tokens=<n> nll=<mean nll per token, nats> ppl=<exp(nll)>
// Windows of --ctx + 1 ids overlapping by one: every id after the first is scored exactly once,
// with the window's earlier ids as context.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "common.h"
#include "engine/generate.h"
#include "ops/ops.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, file;
  int64_t ctx = 256;
  int threads = 0;
  LoadOptions load;
};
}  // namespace

void add_ppl(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("ppl", "Perplexity of a checkpoint on a text file (mean NLL per token)");
  c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  c->add_option("--file", o->file, "Text file (UTF-8), tokenized with the checkpoint's tokenizer")->required();
  c->add_option("--ctx", o->ctx, "Context window: ids are scored in windows of this many")->check(CLI::Range(1, 1 << 20));
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  add_load_options(c, &o->load);
  c->callback([o, &action] {
    action = [o] {
      ops::set_n_threads(o->threads);
      std::ifstream f(o->file, std::ios::binary);
      if (!f) fail("cannot read {}", o->file);
      std::stringstream ss;
      ss << f.rdbuf();
      const tok::Tokenizer tk = tok::Tokenizer::from_path(o->model);
      const std::vector<int32_t> ids = tk.encode(ss.str(), false);
      if (ids.size() < 2) fail("{}: fewer than 2 tokens, nothing to score", o->file);
      auto model = load_for_cli(o->model, o->load);
      const int64_t V = model->config().vocab_size, n = int64_t(ids.size());
      double nll = 0;
      int64_t scored = 0;
      for (int64_t start = 0; start + 1 < n; start += o->ctx) {
        const int64_t len = std::min(o->ctx, n - 1 - start);  // targets start+1 .. start+len
        const std::vector<int32_t> win(ids.begin() + start, ids.begin() + start + len);
        const Buffer logits = prefill_logits(*model, win, 0);
        const float* l = logits.t().f32();
        for (int64_t i = 0; i < len; ++i) nll += row_nll(l + i * V, V, ids[size_t(start + i + 1)]);
        scored += len;
        std::fprintf(stderr, "\rscored %lld/%lld tokens", (long long)scored, (long long)(n - 1));
      }
      std::fprintf(stderr, "\n");
      const double mean = nll / double(scored);
      std::printf("tokens=%lld nll=%.6f ppl=%.4f\n", (long long)scored, mean, std::exp(mean));
    };
  });
}

}  // namespace mmx::cli
