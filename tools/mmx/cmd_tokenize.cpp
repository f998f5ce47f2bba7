// mmx tokenize / detokenize — placeholder until the tokenizer lands.
#include "base/error.h"
#include "common.h"

namespace mmx::cli {

void add_tokenize(CLI::App& app, Action& action) {
  app.add_subcommand("tokenize", "Text -> token ids (not available yet)")->callback([&action] {
    action = [] { fail("mmx tokenize: the tokenizer is not part of this build yet"); };
  });
}

}  // namespace mmx::cli
