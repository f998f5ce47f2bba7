// mmx logits: all-position logits as raw little-endian float32, row-major [n_ids, vocab_size].
// This file contract is used by acceptance checks; keep it stable.
#include <cstdio>
#include <vector>

#include "base/error.h"
#include "common.h"
#include "engine/generate.h"
#include "model/trace.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, ids, out, dump_dir;
  int threads = 0;
  LoadOptions load;
  int chunk = 0;
};
}  // namespace

void add_logits(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "logits", "Write the logits of every position as little-endian float32 [n_ids, vocab_size]");
  c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  c->add_option("--ids", o->ids, "Token ids, comma-separated")->required();
  c->add_option("-o,--out", o->out, "Output file")->required();
  c->add_option("--chunk", o->chunk, "Prefill in chunks of this many tokens (0 = all at once)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--dump-dir", o->dump_dir, "Also write every named intermediate as .npy here");
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  add_load_options(c, &o->load);
  c->callback([o, &action] {
    action = [o] {
      ops::set_n_threads(o->threads);
      std::vector<int32_t> ids = parse_ids(o->ids);
      auto model = load_for_cli(o->model, o->load);
      if (!o->dump_dir.empty()) trace_set_dir(o->dump_dir);
      const Buffer logits = prefill_logits(*model, ids, o->chunk);
      FILE* f = std::fopen(o->out.c_str(), "wb");
      if (!f) fail("cannot write {}", o->out);
      const size_t bytes = logits.t().size_bytes();
      const bool ok = std::fwrite(logits.t().data, 1, bytes, f) == bytes;
      if (std::fclose(f) != 0 || !ok) fail("error writing {}", o->out);
      std::fprintf(stderr, "wrote %lld x %lld logits to %s\n", (long long)logits.t().dim(0),
                   (long long)logits.t().dim(1), o->out.c_str());
    };
  });
}

}  // namespace mmx::cli
