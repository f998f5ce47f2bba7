// mmx — the one binary of minimax.cpp. Each subcommand lives in cmd_<name>.cpp.
#include <cstdio>

#include "base/error.h"
#include "common.h"

int main(int argc, char** argv) {
  CLI::App app{"mmx — run MiniMax models (Text-01/M1, M2 family, M3) on the CPU, exactly.\n"
               "Run `mmx <command> --help` for the options of each command."};
  app.require_subcommand(1);
  mmx::cli::Action action;
  mmx::cli::add_generate(app, action);
  mmx::cli::add_logits(app, action);
  mmx::cli::add_make_tiny(app, action);
  mmx::cli::add_inspect(app, action);
  mmx::cli::add_bench(app, action);
  mmx::cli::add_tokenize(app, action);
  mmx::cli::add_chat_template(app, action);
  mmx::cli::add_serve(app, action);
  mmx::cli::add_chat(app, action);
  mmx::cli::add_train_tokenizer(app, action);
  mmx::cli::add_train(app, action);
  mmx::cli::add_ppl(app, action);
  mmx::cli::add_grad(app, action);
  mmx::cli::add_rl(app, action);
  mmx::cli::add_probe(app, action);
  mmx::cli::add_convert(app, action);
  mmx::cli::add_family_tokens(app, action);
  mmx::cli::add_sandbox(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the message (or the help text, rc 0)
    return rc == 0 ? 0 : 1;      // one exit status for every usage error
  }
  try {
    action();
  } catch (const mmx::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
