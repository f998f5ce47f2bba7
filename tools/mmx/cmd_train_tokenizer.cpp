// mmx train-tokenizer — train a byte-level BPE tokenizer in the MiniMax-M2 format on a text file
// (src/tokenizer/bpe_trainer.h) and write tokenizer.json + tokenizer_config.json (with the M2
// chat template) beside each other.
//
//   mmx train-tokenizer --data FILE --vocab N -o OUT/tokenizer.json [--min-frequency F]
//
// Progress goes to stderr (one updating line on a terminal, a few lines otherwise), then one
// summary line; nothing is written to stdout.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "common.h"
#include "tiny/m2_chat_template.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/m2_tokens.h"

namespace mmx::cli {

namespace {

std::string read_data(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("--data: cannot open '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot write '{}'", p.string());
  f.write(s.data(), std::streamsize(s.size()));
  if (!f) fail("error writing '{}'", p.string());
}

// Progress on stderr: a \r-updated line on a terminal; in logs one line when pre-tokenization
// ends and one per quarter of the merges. The trainer may report a stage's end more than once.
struct Progress {
  bool tty = isatty(fileno(stderr));
  bool pretokenized = false;
  bool open_line = false;  // a \r line without its newline is on the terminal
  int last_quarter = 0;

  void operator()(const tok::BpeTrainProgress& p) {
    const double pct = p.total > 0 ? 100.0 * double(p.done) / double(p.total) : 100.0;
    if (p.stage == tok::BpeTrainProgress::Stage::kPretokenize) {
      if (pretokenized) return;
      pretokenized = p.done == p.total;
      if (pretokenized) line(true, "pre-tokenized %lld bytes", (long long)p.total);
      else if (tty) line(false, "pre-tokenizing %.0f%%", pct);
    } else {
      const int q = p.total > 0 ? int(4 * p.done / p.total) : 4;
      if (tty) line(false, "merges %lld/%lld (%.0f%%)", (long long)p.done, (long long)p.total, pct);
      else if (q > last_quarter) line(true, "merges %lld/%lld (%.0f%%)", (long long)p.done, (long long)p.total, pct);
      last_quarter = std::max(last_quarter, q);
    }
  }
  // Ends an open terminal line (before the summary, or an error message).
  void finish() {
    if (open_line) std::fputc('\n', stderr);
    open_line = false;
  }

 private:
  template <typename... Args>
  void line(bool newline, const char* fmt, Args... args) {
    if (tty) std::fputs("\r\033[K", stderr);
    std::fputs("train-tokenizer: ", stderr);
    std::fprintf(stderr, fmt, args...);
    if (newline) std::fputc('\n', stderr);
    open_line = tty && !newline;
    std::fflush(stderr);
  }
};

}  // namespace

void add_train_tokenizer(CLI::App& app, Action& action) {
  struct Opts {
    std::string data, out;
    int vocab = 0;
    int64_t min_frequency = 2;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "train-tokenizer",
      "Train a byte-level BPE tokenizer (MiniMax-M2 pre-tokenizer, GPT-2 byte alphabet, M2 special tokens at "
      "the last ids) on a text file; writes tokenizer.json and tokenizer_config.json (M2 chat template) "
      "in the output's directory");
  c->add_option("--data", o->data, "Training text (UTF-8; invalid bytes are read as U+FFFD)")->required();
  c->add_option("--vocab", o->vocab,
                "Vocabulary size: 256 byte tokens + merges + " + std::to_string(tok::kM2SpecialTokens.size()) +
                    " special tokens (at least " + std::to_string(256 + tok::kM2SpecialTokens.size() + 1) + ")")
      ->required();
  c->add_option("-o,--out", o->out, "Path of the tokenizer.json to write (tokenizer_config.json goes beside it)")
      ->required();
  c->add_option("--min-frequency", o->min_frequency,
                "Never merge a pair seen fewer times than this, >= 1 (training stops early when no pair qualifies; "
                "default 2)");
  c->callback([o, &action] {
    action = [o] {
      const auto t0 = std::chrono::steady_clock::now();
      // Check the options before reading a possibly large file.
      const int min_vocab = int(256 + tok::kM2SpecialTokens.size() + 1);
      if (o->vocab < min_vocab)
        fail("--vocab {} is too small: it must be at least {} (256 byte tokens + {} special tokens + 1 merge)",
             o->vocab, min_vocab, tok::kM2SpecialTokens.size());
      if (o->min_frequency < 1) fail("--min-frequency must be at least 1 (got {})", o->min_frequency);
      std::error_code ec;
      if (!std::filesystem::exists(o->data, ec)) fail("--data: file '{}' does not exist", o->data);
      if (std::filesystem::is_directory(o->data, ec))
        fail("--data: '{}' is a directory, expected a text file", o->data);
      std::filesystem::path out(o->out);
      if (std::filesystem::is_directory(out)) out /= "tokenizer.json";
      const std::filesystem::path dir = out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
      if (!std::filesystem::is_directory(dir)) fail("-o: directory '{}' does not exist", dir.string());
      const std::string text = read_data(o->data);
      if (text.empty()) fail("--data: '{}' is empty: nothing to train on", o->data);

      tok::BpeTrainOptions opt;
      opt.vocab_size = o->vocab;
      opt.min_frequency = o->min_frequency;
      opt.chat_template = kM2ChatTemplate;
      Progress progress;
      tok::TrainedTokenizer t;
      try {
        t = tok::train_bpe(text, opt, std::ref(progress));
      } catch (...) {
        progress.finish();
        throw;
      }
      progress.finish();
      write_file(out, t.tokenizer_json);
      write_file(dir / "tokenizer_config.json", t.tokenizer_config_json);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t.stopped_early)
        std::fprintf(stderr,
                     "note: no pair reaches --min-frequency %lld: stopped after %zu merges, vocab %d instead of %d\n",
                     (long long)o->min_frequency, t.merges.size(), t.vocab_size, o->vocab);
      std::fprintf(stderr,
                   "train-tokenizer: %lld bytes, %lld pieces (%lld distinct) -> %zu merges, vocab %d (bos %d, eos %d, "
                   "pad %d) in %.2f s; wrote %s and %s\n",
                   (long long)t.n_bytes, (long long)t.n_pieces, (long long)t.n_unique_words, t.merges.size(),
                   t.vocab_size, t.bos_id, t.eos_id, t.pad_id, s, out.string().c_str(),
                   (dir / "tokenizer_config.json").string().c_str());
    };
  });
}

}  // namespace mmx::cli
