// mmx bench: placeholder registered so --help lists it; filled in with bench/.
#include "base/error.h"
#include "common.h"

namespace mmx::cli {

void add_bench(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("bench", "Benchmarks (see bench/README.md)");
  c->callback([&action] { action = [] { fail("mmx bench: not implemented yet"); }; });
}

}  // namespace mmx::cli
