#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/error.h"

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

std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int n_new,
                              Sampler& sampler, const std::function<bool(int32_t)>& on_token, GenerateStats* stats,
                              int64_t n_valid_vocab) {
  const ModelConfig& c = model.config();
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  if (n_new < 0) fail("number of tokens to generate must be >= 0");
  const int64_t capacity = int64_t(prompt.size()) + n_new;
  if (capacity > c.max_position)
    fail("prompt ({}) + new tokens ({}) exceed the model context of {} positions", prompt.size(),
         n_new, c.max_position);
  KvCache kv = model.make_cache(capacity);
  std::vector<int32_t> tokens(prompt);
  std::vector<int32_t> positions(prompt.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = int32_t(i);
  Buffer logits(DType::kF32, {1, c.vocab_size});  // [1, vocab]

  ForwardBatch b;
  b.tokens = Tensor(tokens.data(), DType::kI32, {int64_t(tokens.size())});
  b.positions = Tensor(positions.data(), DType::kI32, {int64_t(positions.size())});
  b.pos0 = 0;
  double t0 = now_s();
  model.forward(b, kv, logits.t());
  const double t1 = now_s();
  if (stats) {
    stats->n_prompt = int64_t(prompt.size());
    stats->prefill_s = t1 - t0;
  }
  const int64_t n_sample = n_valid_vocab > 0 ? std::min(n_valid_vocab, c.vocab_size) : c.vocab_size;
  std::vector<int32_t> out;
  int32_t tok = 0, pos = 0;
  b.tokens = Tensor(&tok, DType::kI32, {1});
  b.positions = Tensor(&pos, DType::kI32, {1});
  t0 = now_s();
  for (int i = 0; i < n_new; ++i) {
    tok = sampler.sample(logits.f32(), n_sample);
    out.push_back(tok);
    if (on_token && !on_token(tok)) break;
    if (sampler.stops(tok)) break;
    if (i + 1 == n_new) break;
    pos = int32_t(kv.n_past());
    b.pos0 = kv.n_past();
    model.forward(b, kv, logits.t());
  }
  if (stats) {
    stats->n_generated = int64_t(out.size());
    stats->decode_s = now_s() - t0;
  }
  return out;
}

}  // namespace mmx
