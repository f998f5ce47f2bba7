// mmx probe: the long-range retrieval probe (src/train/probe.h) over one or more checkpoints, side
// by side, through the inference engine. Per model and distance: the answer's mean NLL planted and
// in the control, the gain (control - planted, nats/token) and the exact-copy rate (every answer id
// the argmax under teacher forcing, i.e. greedy decoding would write the value).
// --synthetic: models trained by `mmx train --task retrieval` on that task (retrieval_task.h); the
// control column is then a uniform guess over the 256 values (ln 256 nats, 0.39 %).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/error.h"
#include "common.h"
#include "engine/generate.h"
#include "ops/ops.h"
#include "tokenizer/tokenizer.h"
#include "train/probe.h"
#include "train/retrieval_task.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::vector<std::string> models;
  std::string file, csv, plot;
  std::vector<int64_t> distances = {16, 64, 128, 192, 448, 960};
  int64_t n = 100;
  uint64_t seed = 1;
  int threads = 0;
  bool synthetic = false;
  int64_t pairs = 16;
  int64_t window = 0;
  LoadOptions load;
};

// --synthetic: the retrieval task's sequences (retrieval_task.h) with `filler` = the distance; the
// mean NLL and argmax accuracy over every query. Returns {nll sum, exact count, queries, length}.
struct SynthScore {
  double nll = 0;
  int64_t exact = 0, queries = 0, len = 0;
};
SynthScore score_synthetic(Model& model, uint64_t seed, int64_t pairs, int64_t filler, int64_t window, int64_t index) {
  SynthScore r;
  r.len = std::max(window, 4 * pairs + filler);  // leading filler up to the trained window
  std::vector<int32_t> tokens(static_cast<size_t>(r.len)), targets(static_cast<size_t>(r.len));
  train::retrieval_sequence(~seed ^ 0x5eed, (uint64_t(filler) << 32) + uint64_t(index), r.len, pairs, filler,
                            tokens.data(), targets.data());
  tokens.pop_back();  // the last id is an answer, never an input
  const Buffer logits = prefill_logits(model, tokens, 0);
  const int64_t V = model.config().vocab_size;
  for (int64_t i = 0; i + 1 < r.len; ++i) {
    if (targets[size_t(i)] < 0) continue;
    const float* row = logits.t().f32() + i * V;
    r.nll += row_nll(row, V, targets[size_t(i)]);
    r.exact += std::max_element(row, row + V) - row == targets[size_t(i)];
    ++r.queries;
  }
  return r;
}

struct Score {
  double nll = 0;    // summed over the answer's ids
  bool exact = true; // every answer id was the argmax
};

Score score(Model& model, const train::RetrievalSample& s) {
  std::vector<int32_t> ids = s.context;
  ids.insert(ids.end(), s.answer.begin(), s.answer.end() - 1);
  const Buffer logits = prefill_logits(model, ids, 0);
  const int64_t V = model.config().vocab_size, first = int64_t(s.context.size()) - 1;
  Score r;
  for (size_t j = 0; j < s.answer.size(); ++j) {
    const float* row = logits.t().f32() + (first + int64_t(j)) * V;
    r.nll += row_nll(row, V, s.answer[j]);
    for (int64_t v = 0; v < V; ++v)
      if (row[v] > row[s.answer[j]]) { r.exact = false; break; }
  }
  return r;
}

void plot(const std::string& csv, const std::string& png, const std::vector<std::string>& models) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "note: gnuplot not found; %s not drawn (apt install gnuplot-nox)\n", png.c_str());
    return;
  }
  std::string lines;
  for (size_t m = 0; m < models.size(); ++m) {
    std::string name = models[m];
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    name = name.substr(name.find_last_of('/') + 1);  // the directory's own name
    lines += fmt::format("{}'{}' using 2:($1 == {} ? $7 : 1/0) with linespoints lw 2 pt 7 title '{}'",
                         m ? ", \\\n     " : "", csv, m, name);
  }
  const std::string script = fmt::format(
      "set terminal png size 900,540\nset output '{}'\nset datafile separator ','\nset key outside right\n"
      "set xlabel 'distance (filler tokens between the plant and the query)'\n"
      "set ylabel 'exact copies of the planted value (%)'\nset yrange [0:105]\nset grid\nplot {}\n",
      png, lines);
  const std::string gp = png + ".gnuplot";
  std::ofstream(gp) << script;
  if (std::system(("gnuplot '" + gp + "' 2>/dev/null").c_str()) != 0)
    std::fprintf(stderr, "note: gnuplot failed; %s not drawn\n", png.c_str());
}
}  // namespace

void add_probe(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "probe", "Long-range retrieval probe: a key = \"value\" line planted in held-out text, queried after "
               "N filler tokens; how often each model copies the value back");
  c->add_option("-m,--model", o->models, "Checkpoint directory (repeat to compare models side by side)")->required();
  c->add_option("--file", o->file, "Held-out text (UTF-8) the lead and filler are cut from (not with --synthetic)");
  c->add_flag("--synthetic", o->synthetic,
              "Probe models trained by `mmx train --task retrieval` on that task's sequences instead "
              "(the distance is the filler between the pairs and the queries)");
  c->add_option("--pairs", o->pairs, "--synthetic: key-value pairs per sequence (as trained)")->check(CLI::Range(1, 256));
  c->add_option("--window", o->window,
                "--synthetic: pad sequences with leading filler to at least this many ids (the trained "
                "--seq-len, so short distances look as in training)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  c->add_option("--distances", o->distances, "Filler lengths in tokens")->delimiter(',')->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  c->add_option("--n", o->n, "Samples per distance (each also scored as its control)")->check(CLI::Range(1, 1 << 20));
  c->add_option("--seed", o->seed, "Seed of the keys, values and filler offsets");
  c->add_option("--csv", o->csv, "Also write the table as CSV here");
  c->add_option("--plot", o->plot, "Also draw exact copies vs distance as a PNG here (needs --csv; gnuplot)");
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  add_load_options(c, &o->load);
  c->callback([o, &action] {
    action = [o] {
      if (!o->plot.empty() && o->csv.empty()) fail("--plot draws from the CSV: give --csv FILE too");
      if (o->synthetic == !o->file.empty()) fail("mmx probe: give --file (text probe) or --synthetic, not both");
      ops::set_n_threads(o->threads);
      std::stringstream ss;
      if (!o->synthetic) {
        std::ifstream f(o->file, std::ios::binary);
        if (!f) fail("cannot read {}", o->file);
        ss << f.rdbuf();
      }
      std::FILE* csv = nullptr;
      if (!o->csv.empty()) {
        csv = std::fopen(o->csv.c_str(), "w");
        if (!csv) fail("cannot write {}", o->csv);
        std::fprintf(csv, "model_index,distance,context,nll_planted,nll_control,gain,exact_pct,exact_control_pct\n");
      }
      std::printf("%-28s %8s %8s %12s %12s %8s %8s %8s\n", "model", "distance", "context", "nll planted",
                  "nll control", "gain", "exact %", "ctrl %");
      for (size_t mi = 0; mi < o->models.size(); ++mi) {
        const std::string& dir = o->models[mi];
        if (o->synthetic) {
          auto model = load_for_cli(dir, o->load);
          if (model->config().vocab_size != train::kRetrievalVocab)
            fail("{}: vocab {} is not the retrieval task's {} (train it with `mmx train --task retrieval`)", dir,
                 model->config().vocab_size, train::kRetrievalVocab);
          for (const int64_t d : o->distances) {
            SynthScore sum;
            for (int64_t i = 0; i < o->n; ++i) {
              const SynthScore r = score_synthetic(*model, o->seed, o->pairs, d, o->window, i);
              sum.nll += r.nll, sum.exact += r.exact, sum.queries += r.queries, sum.len = r.len;
              std::fprintf(stderr, "\r%s  distance %lld  %lld/%lld", dir.c_str(), (long long)d, (long long)(i + 1),
                           (long long)o->n);
            }
            std::fprintf(stderr, "\n");
            const double p = sum.nll / double(sum.queries), e = 100.0 * double(sum.exact) / double(sum.queries);
            const double chance = 100.0 / 256;
            std::printf("%-28s %8lld %8lld %12.3f %12.3f %8.3f %8.1f %8.1f\n", dir.c_str(), (long long)d,
                        (long long)sum.len, p, std::log(256.0), std::log(256.0) - p, e, chance);
            std::fflush(stdout);
            if (csv)
              std::fprintf(csv, "%zu,%lld,%lld,%.6f,%.6f,%.6f,%.2f,%.2f\n", mi, (long long)d, (long long)sum.len, p,
                           std::log(256.0), std::log(256.0) - p, e, chance);
          }
          continue;
        }
        const tok::Tokenizer tk = load_tokenizer(open_checkpoint(dir));
        const std::vector<int32_t> held_out = tk.encode(ss.str(), false);
        const std::vector<std::string> words = train::retrieval_words(ss.str());
        auto model = load_for_cli(dir, o->load);
        for (const int64_t d : o->distances) {
          double nll[2] = {0, 0};
          int64_t exact[2] = {0, 0}, n_ids = 0, ctx = 0;
          for (int64_t i = 0; i < o->n; ++i) {
            for (int planted = 0; planted < 2; ++planted) {
              const train::RetrievalSample s = train::make_retrieval_sample(tk, held_out, words, d, o->seed, i, planted);
              const Score r = score(*model, s);
              nll[planted] += r.nll;
              exact[planted] += r.exact;
              if (planted) n_ids += int64_t(s.answer.size()), ctx = std::max(ctx, int64_t(s.context.size()));
            }
            std::fprintf(stderr, "\r%s  distance %lld  %lld/%lld", dir.c_str(), (long long)d, (long long)(i + 1),
                         (long long)o->n);
          }
          std::fprintf(stderr, "\n");
          const double p = nll[1] / double(n_ids), q = nll[0] / double(n_ids);
          const double e = 100.0 * double(exact[1]) / double(o->n), ec = 100.0 * double(exact[0]) / double(o->n);
          std::printf("%-28s %8lld %8lld %12.3f %12.3f %8.3f %8.1f %8.1f\n", dir.c_str(), (long long)d,
                      (long long)ctx, p, q, q - p, e, ec);
          std::fflush(stdout);
          if (csv) std::fprintf(csv, "%zu,%lld,%lld,%.6f,%.6f,%.6f,%.2f,%.2f\n", mi, (long long)d, (long long)ctx, p, q, q - p, e, ec);
        }
      }
      if (csv) std::fclose(csv);
      if (!o->plot.empty()) plot(o->csv, o->plot, o->models);
    };
  });
}

}  // namespace mmx::cli
