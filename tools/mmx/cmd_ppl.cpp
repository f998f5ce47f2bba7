// mmx ppl: held-out perplexity of a checkpoint on a text file, through the inference engine.
// Contract (stable): the last stdout line is exactly
//   tokens=<n> nll=<mean nll per token, nats> ppl=<exp(nll)>
// Windows of --ctx + 1 ids overlapping by one: every id after the first is scored exactly once,
// with the window's earlier ids as context.
// --kl-base BASE: the same windows also through BASE (e.g. the BF16 checkpoint beside a quantized
// GGUF of it); the line before the contract line then reads
//   kl_mean=<mean KL(base || model), nats> kl_p99=<99th percentile> top1=<share where argmaxes agree>
//   base_ppl=<BASE's ppl>
// (llama-perplexity's --kl-divergence measures the same; the tokenizer is the model's).
#include <algorithm>
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
  std::string model, file, kl_base;
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
  c->add_option("--kl-base", o->kl_base,
                "Also run BASE (a checkpoint of the same vocabulary) and report KL(BASE || model) per token");
  add_load_options(c, &o->load);
  c->callback([o, &action] {
    action = [o] {
      ops::set_n_threads(o->threads);
      std::ifstream f(o->file, std::ios::binary);
      if (!f) fail("cannot read {}", o->file);
      std::stringstream ss;
      ss << f.rdbuf();
      const tok::Tokenizer tk = load_tokenizer(open_checkpoint(o->model));
      const std::vector<int32_t> ids = tk.encode(ss.str(), false);
      if (ids.size() < 2) fail("{}: fewer than 2 tokens, nothing to score", o->file);
      auto model = load_for_cli(o->model, o->load);
      const int64_t V = model->config().vocab_size, n = int64_t(ids.size());
      std::unique_ptr<Model> base;
      if (!o->kl_base.empty()) {
        base = load_for_cli(o->kl_base, o->load);
        if (base->config().vocab_size != V)
          fail("--kl-base {}: vocabulary {} differs from the model's {}", o->kl_base, base->config().vocab_size, V);
      }
      double nll = 0, base_nll = 0;
      std::vector<double> kls;
      int64_t agree = 0;
      int64_t scored = 0;
      for (int64_t start = 0; start + 1 < n; start += o->ctx) {
        const int64_t len = std::min(o->ctx, n - 1 - start);  // targets start+1 .. start+len
        const std::vector<int32_t> win(ids.begin() + start, ids.begin() + start + len);
        const Buffer logits = prefill_logits(*model, win, 0);
        const float* l = logits.t().f32();
        for (int64_t i = 0; i < len; ++i) nll += row_nll(l + i * V, V, ids[size_t(start + i + 1)]);
        if (base) {
          const Buffer bl = prefill_logits(*base, win, 0);
          for (int64_t i = 0; i < len; ++i) {
            const float* p = bl.t().f32() + i * V;
            base_nll += row_nll(p, V, ids[size_t(start + i + 1)]);
            kls.push_back(row_kl(p, l + i * V, V));
            agree += std::max_element(p, p + V) - p == std::max_element(l + i * V, l + (i + 1) * V) - (l + i * V);
          }
        }
        scored += len;
        std::fprintf(stderr, "\rscored %lld/%lld tokens", (long long)scored, (long long)(n - 1));
      }
      std::fprintf(stderr, "\n");
      const double mean = nll / double(scored);
      if (base) {
        double kl = 0;
        for (double k : kls) kl += k;
        std::sort(kls.begin(), kls.end());
        std::printf("kl_mean=%.6g kl_p99=%.6g top1=%.4f base_ppl=%.4f\n", kl / double(scored),
                    kls[std::min(kls.size() - 1, kls.size() * 99 / 100)], double(agree) / double(scored),
                    std::exp(base_nll / double(scored)));
      }
      std::printf("tokens=%lld nll=%.6f ppl=%.4f\n", (long long)scored, mean, std::exp(mean));
    };
  });
}

}  // namespace mmx::cli
