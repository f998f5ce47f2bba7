// mmx logits: all-position logits as raw little-endian float32, row-major [n_ids, vocab_size].
// This file contract is used by acceptance checks; keep it stable.
#include <cstdio>
#include <vector>

#include "base/error.h"
#include "common.h"
#include "model/model.h"
#include "model/trace.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, ids, out, dump_dir;
  int threads = 0;
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
  c->callback([o, &action] {
    action = [o] {
      ops::set_n_threads(o->threads);
      std::vector<int32_t> ids = parse_ids(o->ids);
      auto model = load_model(o->model, progress_bar);
      const ModelConfig& cfg = model->config();
      const int64_t n = int64_t(ids.size());
      if (n > cfg.max_position) fail("{} ids exceed the model context of {}", n, cfg.max_position);
      if (!o->dump_dir.empty()) trace_set_dir(o->dump_dir);
      KvCache kv = model->make_cache(n);
      std::vector<int32_t> pos(n);
      for (int64_t i = 0; i < n; ++i) pos[i] = int32_t(i);
      Buffer logits(DType::kF32, {n, cfg.vocab_size});  // [n_ids, vocab]
      const int64_t chunk = o->chunk > 0 ? o->chunk : n;
      for (int64_t b = 0; b < n; b += chunk) {
        const int64_t e = std::min(n, b + chunk);
        ForwardBatch fb;
        fb.tokens = Tensor(ids.data() + b, DType::kI32, {e - b});
        fb.positions = Tensor(pos.data() + b, DType::kI32, {e - b});
        fb.pos0 = b;
        fb.all_logits = true;
        Tensor rows = logits.t().rows_range(b, e);
        model->forward(fb, kv, rows);
      }
      FILE* f = std::fopen(o->out.c_str(), "wb");
      if (!f) fail("cannot write {}", o->out);
      const size_t bytes = logits.t().size_bytes();
      const bool ok = std::fwrite(logits.t().data, 1, bytes, f) == bytes;
      if (std::fclose(f) != 0 || !ok) fail("error writing {}", o->out);
      std::fprintf(stderr, "wrote %lld x %lld logits to %s\n", (long long)n, (long long)cfg.vocab_size,
                   o->out.c_str());
    };
  });
}

}  // namespace mmx::cli
