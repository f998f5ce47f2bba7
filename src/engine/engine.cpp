#include "engine/engine.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace mmx {

struct Engine::Req {
  uint64_t id = 0;
  GenRequest in;
  std::function<void(const GenEvent&)> emit;
  std::vector<int32_t> tokens;  // prompt, then generated ids
  int64_t n_done = 0;           // tokens already in the cache
  int64_t n_generated = 0;
  int64_t reserved = 0;         // cache capacity reserved for this request
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Sampler> sampler;
  bool prefilling() const { return n_done < int64_t(in.prompt.size()); }
};

Engine::Engine(Model& model, EngineOptions opts) : model_(model), opts_(std::move(opts)) {
  MMX_CHECK(opts_.max_batch_tokens >= 1 && opts_.max_running >= 1, "engine options");
  if (opts_.kv_token_budget <= 0) opts_.kv_token_budget = 64 * context_limit();
  if (opts_.start_thread) thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Engine::context_limit() const { return model_.config().max_position; }

uint64_t Engine::submit(GenRequest r, std::function<void(const GenEvent&)> on_event) {
  auto q = std::make_unique<Req>();
  GenEvent err;
  err.kind = GenEvent::kError;
  std::unique_lock<std::mutex> l(mu_);
  q->id = next_id_++;
  const int64_t n_prompt = int64_t(r.prompt.size());
  if (n_prompt == 0) err.error = "the prompt is empty", err.http_status = 400;
  else if (n_prompt >= context_limit())
    err.error = fmt::format("the prompt has {} tokens; the model's context is {} tokens", n_prompt,
                            context_limit()), err.http_status = 400;
  else {
    try {
      validate_token_ids(Tensor(r.prompt.data(), DType::kI32, {n_prompt}), model_.config().vocab_size);
      q->sampler = std::make_unique<Sampler>(r.sampling);
    } catch (const Error& e) {
      err.error = e.what(), err.http_status = 400;
    }
  }
  if (err.error.empty() && int64_t(inbox_.size()) >= opts_.max_waiting)
    err.error = "the server is busy: too many queued requests, retry later", err.http_status = 429;
  const uint64_t id = q->id;
  if (!err.error.empty()) {
    l.unlock();
    on_event(err);
    return id;
  }
  q->in = std::move(r);
  q->in.max_tokens = std::max<int64_t>(1, std::min(q->in.max_tokens, context_limit() - n_prompt));
  q->tokens = q->in.prompt;
  q->emit = std::move(on_event);
  inbox_.push_back(std::move(q));
  l.unlock();
  cv_.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  // Requests are only touched by step() under this lock, so once we return the id is dropped
  // before any further event can be emitted for it.
  for (auto it = inbox_.begin(); it != inbox_.end(); ++it)
    if ((*it)->id == id) {
      inbox_.erase(it);
      return;
    }
  for (auto it = running_.begin(); it != running_.end(); ++it)
    if ((*it)->id == id) {
      reserved_tokens_ -= (*it)->reserved;
      running_.erase(it);
      return;
    }
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineMetrics m = stats_;
  m.requests_waiting = int64_t(inbox_.size());
  m.requests_running = int64_t(running_.size());
  m.kv_pages_used = reserved_tokens_;  // tokens reserved (pages of 1 token at this stage)
  m.kv_pages_total = opts_.kv_token_budget;
  return m;
}

void Engine::admit() {
  while (!inbox_.empty() && int64_t(running_.size()) < opts_.max_running) {
    Req& r = *inbox_.front();
    const int64_t need = int64_t(r.in.prompt.size()) + r.in.max_tokens;
    if (reserved_tokens_ + need > opts_.kv_token_budget && !running_.empty()) break;  // FIFO: wait
    r.reserved = need;
    r.cache = std::make_unique<KvCache>(model_.make_cache(need));
    reserved_tokens_ += need;
    running_.push_back(std::move(inbox_.front()));
    inbox_.pop_front();
  }
}

void Engine::finish(Req& r, const char* reason) {
  GenEvent e;
  e.kind = GenEvent::kDone;
  e.finish_reason = reason;
  e.n_prompt = int64_t(r.in.prompt.size());
  e.n_generated = r.n_generated;
  r.emit(e);
}

bool Engine::step() {
  std::lock_guard<std::mutex> l(mu_);
  admit();
  if (running_.empty()) return false;
  // schedule: decodes first (1 token each), then prefill chunks, within the token budget.
  struct Item {
    Req* r;
    int64_t n;
  };
  std::vector<Item> batch;
  int64_t budget = opts_.max_batch_tokens;
  for (auto& r : running_)
    if (!r->prefilling() && budget > 0) batch.push_back({r.get(), 1}), --budget;
  for (auto& r : running_)
    if (r->prefilling() && budget > 0) {
      const int64_t n = std::min(budget, int64_t(r->in.prompt.size()) - r->n_done);
      batch.push_back({r.get(), n});
      budget -= n;
    }
  stats_.last_batch_seqs = int64_t(batch.size());
  stats_.last_batch_tokens = opts_.max_batch_tokens - budget;

  std::vector<Req*> done;
  const int64_t V = model_.config().vocab_size;
  const int64_t n_sample = opts_.n_valid_vocab > 0 ? std::min(opts_.n_valid_vocab, V) : V;
  Buffer logits(DType::kF32, {1, V});
  for (const Item& it : batch) {
    Req& r = *it.r;
    std::vector<int32_t> pos(size_t(it.n));
    for (int64_t i = 0; i < it.n; ++i) pos[size_t(i)] = int32_t(r.n_done + i);
    ForwardBatch fb;
    fb.tokens = Tensor(r.tokens.data() + r.n_done, DType::kI32, {it.n});
    fb.positions = Tensor(pos.data(), DType::kI32, {it.n});
    fb.pos0 = r.n_done;
    model_.forward(fb, *r.cache, logits.t());
    r.n_done += it.n;
    if (r.prefilling()) continue;  // mid-prompt chunk: no token yet

    // sample + logprobs (log-softmax of the raw logits over the valid vocabulary)
    const float* lg = logits.f32();
    const int32_t tok = r.sampler->sample(lg, n_sample);
    double mx = lg[0];
    for (int64_t i = 1; i < n_sample; ++i) mx = std::max(mx, double(lg[i]));
    double z = 0;
    for (int64_t i = 0; i < n_sample; ++i) z += std::exp(double(lg[i]) - mx);
    const double lz = mx + std::log(z);
    GenEvent e;
    e.token = tok;
    e.logprob = float(lg[tok] - lz);
    if (r.in.top_logprobs > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(n_sample));
      for (int64_t i = 0; i < n_sample; ++i) ids[size_t(i)] = int32_t(i);
      const int64_t k = std::min<int64_t>(r.in.top_logprobs, n_sample);
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                        [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
      for (int64_t i = 0; i < k; ++i) e.top.push_back({ids[size_t(i)], float(lg[ids[size_t(i)]] - lz)});
    }
    r.tokens.push_back(tok);
    ++r.n_generated;
    r.emit(e);
    const bool stop = std::find(r.in.stop_ids.begin(), r.in.stop_ids.end(), tok) != r.in.stop_ids.end() ||
                      std::find(opts_.eos_ids.begin(), opts_.eos_ids.end(), tok) != opts_.eos_ids.end();
    if (stop) finish(r, "stop"), done.push_back(&r);
    else if (r.n_generated >= r.in.max_tokens) finish(r, "length"), done.push_back(&r);
  }
  for (Req* r : done) {
    reserved_tokens_ -= r->reserved;
    running_.erase(std::find_if(running_.begin(), running_.end(), [&](auto& p) { return p.get() == r; }));
  }
  return true;
}

void Engine::run_until_idle() {
  while (step()) {
  }
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !inbox_.empty() || !running_.empty(); });
      if (stop_) return;
    }
    try {
      step();
    } catch (const std::exception& ex) {
      // A failed forward fails every running request; the engine keeps serving.
      std::lock_guard<std::mutex> l(mu_);
      for (auto& r : running_) {
        GenEvent e;
        e.kind = GenEvent::kError;
        e.error = "internal error while generating";
        r->emit(e);
      }
      running_.clear();
      reserved_tokens_ = 0;
    }
  }
}

}  // namespace mmx
