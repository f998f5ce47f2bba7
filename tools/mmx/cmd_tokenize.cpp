// mmx tokenize / mmx detokenize — the command-line face of src/tokenizer.
//
//   mmx tokenize   (-m DIR | --tokenizer FILE) [--file F | -p TEXT] [--add-special]
//       prints the ids separated by single spaces on one line (stdin when neither --file nor -p)
//   mmx detokenize (-m DIR | --tokenizer FILE) --ids 1,2,3 [--skip-special]
//       prints the decoded text (no trailing newline added)
// These output contracts are used by acceptance checks: keep them stable.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "common.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {
struct TokOpts {
  std::string model_dir, tokenizer_file;
  tok::Tokenizer load() const {
    if (!model_dir.empty() && !tokenizer_file.empty()) fail("give either -m DIR or --tokenizer FILE, not both");
    if (!model_dir.empty()) return load_tokenizer(open_checkpoint(model_dir));
    if (!tokenizer_file.empty()) return tok::Tokenizer::from_file(tokenizer_file);
    fail("no tokenizer given: use -m DIR (holding tokenizer.json) or --tokenizer FILE");
  }
};

void add_source_options(CLI::App* c, TokOpts& o) {
  c->add_option("-m,--model", o.model_dir, "Model directory holding tokenizer.json");
  c->add_option("--tokenizer", o.tokenizer_file, "Path of a tokenizer.json");
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open input file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

void add_tokenize(CLI::App& app, Action& action) {
  struct Opts {
    TokOpts src;
    std::string file, prompt, ids;
    bool has_prompt = false, add_special = false, skip_special = false;
  };
  auto o = std::make_shared<Opts>();

  CLI::App* t = app.add_subcommand("tokenize", "Text -> token ids (one line, separated by spaces)");
  add_source_options(t, o->src);
  t->add_option("--file", o->file, "Read the text from this file (bytes as they are)");
  CLI::Option* p = t->add_option("-p,--prompt", o->prompt, "The text to tokenize");
  t->add_flag("--add-special", o->add_special, "Add the post-processor's special tokens (e.g. BOS)");
  t->callback([o, p, &action] {
    o->has_prompt = p->count() > 0;
    action = [o] {
      if (o->has_prompt && !o->file.empty()) fail("give either --file or -p, not both");
      const tok::Tokenizer tk = o->src.load();
      std::string text;
      if (o->has_prompt) text = o->prompt;
      else if (!o->file.empty()) text = read_file(o->file);
      else text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      const std::vector<int32_t> ids = tk.encode(text, o->add_special);
      std::string line;
      line.reserve(ids.size() * 7);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line.push_back(' ');
        line += std::to_string(ids[i]);
      }
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), stdout);
    };
  });

  CLI::App* d = app.add_subcommand("detokenize", "Token ids -> text");
  add_source_options(d, o->src);
  d->add_option("--ids", o->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  d->add_flag("--skip-special", o->skip_special, "Drop special tokens from the output");
  d->callback([o, &action] {
    action = [o] {
      const tok::Tokenizer tk = o->src.load();
      const std::vector<int32_t> ids = o->ids.empty() ? std::vector<int32_t>{} : parse_ids(o->ids);
      for (int32_t id : ids)
        if (!tk.has_id(id)) fail("--ids: token id {} is not in the vocabulary (vocab_size {})", id, tk.vocab_size());
      const std::string text = tk.decode(ids, o->skip_special);
      std::fwrite(text.data(), 1, text.size(), stdout);
    };
  });
}

}  // namespace mmx::cli
