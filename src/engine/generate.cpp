#include "engine/generate.h"

#include <algorithm>

#include "base/clock.h"
#include "base/error.h"
#include "engine/engine.h"

namespace mmx {

Buffer prefill_logits(Model& model, const std::vector<int32_t>& ids, int64_t chunk) {
  const ModelConfig& c = model.config();
  const int64_t n = int64_t(ids.size());
  if (n == 0) fail("no token ids given");
  if (n > c.max_position) fail("{} ids exceed the model context of {} positions", n, c.max_position);
  if (chunk <= 0) chunk = n;
  KvCache kv = model.make_cache(n);
  std::vector<int32_t> tok(ids), pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = int32_t(i);
  Buffer logits(DType::kF32, {n, c.vocab_size});  // [n, vocab]
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    ForwardBatch fb;
    fb.tokens = Tensor(tok.data() + b, DType::kI32, {e - b});
    fb.positions = Tensor(pos.data() + b, DType::kI32, {e - b});
    fb.pos0 = b;
    fb.all_logits = true;
    Tensor rows = logits.t().rows_range(b, e);
    model.forward(fb, kv, rows);
  }
  return logits;
}

std::vector<int32_t> generate(Model& model, const GenRequest& r, const std::function<bool(int32_t)>& on_token,
                              GenerateStats* stats, const GenerateOptions& o) {
  const ModelConfig& c = model.config();
  if (r.prompt.empty()) fail("the prompt is empty: give at least one token");
  if (r.max_tokens < 0) fail("number of tokens to generate must be >= 0");
  const int64_t capacity = int64_t(r.prompt.size()) + r.max_tokens;
  if (capacity > c.max_position)
    fail("prompt ({}) + new tokens ({}) exceed the model context of {} positions", r.prompt.size(),
         r.max_tokens, c.max_position);
  if (stats) *stats = GenerateStats{int64_t(r.prompt.size()), 0, 0, 0};
  if (r.max_tokens == 0) return {};
  EngineOptions eo;
  eo.start_thread = false;  // stepped here, on the caller's thread
  eo.max_running = 1;
  eo.max_batch_tokens = o.max_batch_tokens > 0 ? o.max_batch_tokens : int64_t(r.prompt.size());
  const int64_t page = c.kv_page();
  eo.kv_pages = (capacity + page - 1) / page + 1;  // this request's pages, and the page past its end
  eo.spec_k = o.spec_k;  // drafts never pass max_tokens: the same pages
  eo.drafter = o.drafter;
  eo.max_state_snapshots = 0;  // no prefix cache to fill
  eo.kv_dtype = o.kv_dtype;
  eo.ik_dtype = o.ik_dtype;
  eo.n_valid_vocab = o.n_valid_vocab;
  Engine engine(model, eo);

  std::vector<int32_t> out;
  std::string error;
  bool stop = false;
  const double t0 = now_s();
  double t_first = t0;
  const uint64_t id = engine.submit(r, [&](const GenEvent& e) {
    if (e.kind == GenEvent::kError) error = e.error;
    if (e.kind != GenEvent::kToken) return;
    if (out.empty()) t_first = now_s();
    out.push_back(e.token);
    if (on_token && !on_token(e.token)) stop = true;
  });
  while (!stop && error.empty() && engine.step()) {
  }
  if (stop) engine.cancel(id);
  if (!error.empty()) fail("{}", error);
  if (stats) {
    const EngineMetrics m = engine.metrics();
    stats->spec_drafts = m.spec_drafts;
    stats->spec_draft_tokens = m.spec_draft_tokens;
    stats->spec_accepted = m.spec_accepted;
    stats->n_generated = int64_t(out.size());
    stats->prefill_s = t_first - t0;
    stats->decode_s = now_s() - t_first;
  }
  return out;
}

}  // namespace mmx
