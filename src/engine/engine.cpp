#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/error.h"

namespace mmx {


namespace {

// Pool size when none is given: up to opts.kv_auto_bytes, at most 64 full contexts, at least one.
int64_t auto_pages(const Model& m, const EngineOptions& o) {
  const int64_t page = m.config().kv_page();
  const int64_t per_context = (m.config().max_position + page - 1) / page;
  const size_t page_bytes = std::max<size_t>(PageStore::page_bytes(m.cache_specs(), page, o.kv_dtype, o.ik_dtype), 1);
  const int64_t by_bytes = int64_t(size_t(o.kv_auto_bytes) / page_bytes);
  return std::max<int64_t>(1, std::min(by_bytes, 64 * per_context));
}

}  // namespace

Engine::Engine(Model& model, EngineOptions opts)
    : model_(model), opts_(std::move(opts)), runner_(model), budget_(opts_.max_step_ms, opts_.max_step_strict) {
  PagedMemoryOptions mo;
  mo.page = model_.config().kv_page();
  mo.n_pages = opts_.kv_pages > 0 ? opts_.kv_pages : auto_pages(model_, opts_);
  // Lightning snapshots on page boundaries; enough per sequence for one step's chunk.
  mo.checkpoint_every = (std::max<int64_t>(opts_.state_checkpoint_every, 1) + mo.page - 1) / mo.page * mo.page;
  mo.max_checkpoints = int(2 + opts_.max_batch_tokens / mo.checkpoint_every);
  mo.max_state_snapshots = opts_.max_state_snapshots;
  mo.kv_dtype = opts_.kv_dtype;
  mo.ik_dtype = opts_.ik_dtype;
  mem_ = std::make_unique<PagedMemory>(model_.cache_specs(), mo);
  sched_ = std::make_unique<Scheduler>(*mem_, SchedulerOptions{opts_.max_batch_tokens, opts_.max_running});
  stats_.kv_pages_total = mem_->n_pages();
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

// A request must fit the model's positions and the whole KV pool.
int64_t Engine::context_limit() const {
  return std::min<int64_t>(model_.config().max_position, mem_->n_pages() * mem_->page());
}

uint64_t Engine::submit(GenRequest r, std::function<void(const GenEvent&)> on_event) {
  auto q = std::make_unique<Sequence>();
  GenEvent err;
  err.kind = GenEvent::kError;
  const int64_t n_prompt = int64_t(r.prompt.size());
  if (n_prompt == 0) err.error = "the prompt is empty", err.refusal = GenEvent::kInvalid;
  else if (r.top_logprobs > 0 && !r.logprobs)
    err.error = "top_logprobs needs logprobs", err.refusal = GenEvent::kInvalid;
  else if (n_prompt >= context_limit())
    err.error = fmt::format("the prompt has {} tokens; this server's context is {} tokens", n_prompt,
                            context_limit()), err.refusal = GenEvent::kInvalid;
  else {
    try {
      validate_token_ids(Tensor(r.prompt.data(), DType::kI32, {n_prompt}), model_.config().vocab_size);
      std::vector<int32_t> stops = r.stop_ids;  // the request's, then the model's eos unless ignored
      if (!r.ignore_eos) stops.insert(stops.end(), opts_.eos_ids.begin(), opts_.eos_ids.end());
      q->sampler = std::make_unique<Sampler>(r.sampling, r.prompt, std::move(stops));
      if (r.constraint)  // the same budget the engine enforces below
        q->sampler->constrain(r.constraint(), std::max<int64_t>(1, std::min(r.max_tokens, context_limit() - n_prompt)));
    } catch (const Error& e) {
      err.error = e.what(), err.refusal = GenEvent::kInvalid;
    }
  }
  std::unique_lock<std::mutex> l(mu_);
  q->id = next_id_++;
  if (err.error.empty() && int64_t(inbox_.size()) + stats_.requests_waiting >= opts_.max_waiting)
    err.error = "the server is busy: too many queued requests, retry later", err.refusal = GenEvent::kBusy;
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
  std::unique_lock<std::mutex> step(step_mu_, std::try_to_lock);
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = inbox_.begin(); it != inbox_.end(); ++it)
    if ((*it)->id == id) {
      inbox_.erase(it);
      return;
    }
  // Events are emitted under mu_ after checking cancelled_, so none arrives once we return.
  cancelled_.insert(id);
  if (step.owns_lock()) {  // no step is running: free the memory now
    sched_->remove(id);
    cancelled_.erase(id);
    stats_.requests_waiting = int64_t(sched_->waiting().size());
    stats_.requests_running = int64_t(sched_->running().size());
    stats_.kv_pages_used = mem_->n_used();
  }
  cv_.notify_all();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineMetrics m = stats_;
  m.requests_waiting += int64_t(inbox_.size());
  return m;
}

void Engine::update_weights(std::span<const TensorValues> updates) {
  std::lock_guard<std::mutex> step_lock(step_mu_);  // between steps: no forward reads the weights
  model_.update_weights(updates);                   // throws before writing anything
  sched_->requeue_running();  // in-flight sequences give back their K/V, to be recomputed
  mem_->drop_cache();         // cached blocks and lightning snapshots came from the old weights
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.weight_updates;
  }
  publish_metrics({});
  cv_.notify_all();
}

void Engine::intake() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& r : inbox_) sched_->enqueue(std::move(r));
  inbox_.clear();
  for (uint64_t id : cancelled_) sched_->remove(id);
  cancelled_.clear();
}

void Engine::draft() {
  if (opts_.spec_k <= 0 || !opts_.drafter) return;
  for (const auto& q : sched_->running()) {
    Sequence& s = *q;
    if (!s.mem.kv || s.pending() != 1 || s.n_draft > 0) continue;
    // Never past max_tokens (the last verified row gives one more) nor the context.
    const int64_t k = std::min({opts_.spec_k, s.in.max_tokens - s.n_generated - 1,
                                context_limit() - int64_t(s.tokens.size())});
    if (k <= 0) continue;
    const std::vector<int32_t> d = opts_.drafter->draft(s.tokens, k);
    s.tokens.insert(s.tokens.end(), d.begin(), d.end());
    s.n_draft = int64_t(d.size());
  }
}

void Engine::trim_drafts(const ScheduledBatch& batch) {
  for (const ScheduledChunk& c : batch.chunks) {
    Sequence& s = *c.seq;
    if (s.n_draft > 0) s.drop_drafts(int64_t(s.tokens.size()) - (s.mem.n_past() + c.n));
  }
}

// The fused forward (ModelRunner), then each sequence whose pending tokens are all in samples (or
// verifies its drafts), and commits its new full pages.
void Engine::run(const ScheduledBatch& batch) {
  if (batch.empty()) return;
  const Buffer& logits = runner_.run(batch);
  const int64_t V = model_.config().vocab_size;
  for (size_t i = 0; i < batch.chunks.size(); ++i) {
    Sequence& s = *batch.chunks[i].seq;
    const float* rows = logits.f32() + runner_.first_row(i) * V;
    const bool ends = s.pending() == 0, drafted = ends && s.n_draft > 0;
    if (drafted) verify(s, rows);  // first: the rejected tail is rolled back before pages are committed
    if (s.mem.kv) mem_->commit(s.mem, s.tokens);
    if (ends && !drafted) sample(s, rows);
  }
}

void Engine::verify(Sequence& s, const float* rows) {
  const int64_t V = model_.config().vocab_size, K = s.n_draft;
  const int64_t base = int64_t(s.tokens.size()) - K;  // the drafts' first index
  const std::vector<int32_t> draft(s.tokens.begin() + base, s.tokens.end());
  s.tokens.resize(size_t(base));
  s.n_draft = 0;
  for (int64_t j = 0; j <= K; ++j)
    if (!sample(s, rows + j * V) || j == K || s.tokens.back() != draft[size_t(j)]) break;
  const int64_t emitted = int64_t(s.tokens.size()) - base;
  int64_t accepted = 0;
  while (accepted < std::min(emitted, K) && s.tokens[size_t(base + accepted)] == draft[size_t(accepted)]) ++accepted;
  spec_.count(K, accepted);
  // The cache holds base + K positions; valid are those before the last emitted token.
  const int64_t keep = int64_t(s.tokens.size()) - 1;
  if (s.mem.kv && s.mem.n_past() > keep) mem_->rollback(s.mem, keep);
}

void Engine::emit(Sequence& r, const GenEvent& e) {
  std::lock_guard<std::mutex> l(mu_);
  if (!cancelled_.count(r.id)) r.emit(e);
}

bool Engine::sample(Sequence& r, const float* lg) {
  const int64_t V = model_.config().vocab_size;
  const int64_t n_sample = opts_.n_valid_vocab > 0 ? std::min(opts_.n_valid_vocab, V) : V;
  int32_t tok;
  try {
    tok = r.sampler->sample(lg, n_sample);
  } catch (const Error& err) {  // a constraint that cannot go on (its grammar grew past its limits)
    finish(r, "error", err.what());
    return false;
  }
  GenEvent e;
  e.token = tok;
  e.logprob = std::numeric_limits<float>::quiet_NaN();
  // logprobs over the valid vocabulary, when asked for (submit() refuses top_logprobs without them)
  if (r.in.logprobs) {
    RawLogprobs lp = raw_logprobs(lg, n_sample, tok, r.in.top_logprobs);
    e.logprob = lp.token;
    for (const auto& [id, l] : lp.top) e.top.push_back({id, l});
  }
  r.tokens.push_back(tok);
  ++r.n_generated;
  emit(r, e);
  if (r.sampler->stops(tok)) finish(r, "stop");
  else if (r.n_generated >= r.in.max_tokens) finish(r, "length");
  return r.mem.kv != nullptr;
}

void Engine::finish(Sequence& r, const char* reason, const std::string& error) {
  GenEvent e;
  e.kind = error.empty() ? GenEvent::kDone : GenEvent::kError;
  e.finish_reason = reason;
  if (!error.empty()) e.refusal = GenEvent::kInvalid, e.error = error;
  e.n_prompt = int64_t(r.in.prompt.size());
  e.n_cached = std::max<int64_t>(r.n_cached, 0);
  e.n_generated = r.n_generated;
  mem_->release(r.mem);  // finished: the sweep in step() removes it
  {  // so /metrics read right after a client's last event already shows the memory freed
    std::lock_guard<std::mutex> l(mu_);
    stats_.kv_pages_used = mem_->n_used();
    stats_.requests_running = std::count_if(sched_->running().begin(), sched_->running().end(),
                                            [](const auto& q) { return q->mem.kv != nullptr; });
  }
  emit(r, e);
}

void Engine::publish_metrics(const ScheduledBatch& batch) {
  std::lock_guard<std::mutex> l(mu_);
  stats_.requests_waiting = int64_t(sched_->waiting().size());
  stats_.requests_running = int64_t(sched_->running().size());
  stats_.kv_pages_used = mem_->n_used();
  stats_.kv_pages_total = mem_->n_pages();
  stats_.prefix_hits_tokens = sched_->prefix_hit_tokens();
  stats_.prefix_lookup_tokens = sched_->prefix_lookup_tokens();
  stats_.preemptions = sched_->preemptions();
  stats_.last_batch_seqs = int64_t(batch.chunks.size());
  stats_.last_batch_tokens = batch.n_tokens();
  if (!batch.empty()) ++stats_.steps;
  stats_.spec_drafts = spec_.drafts;
  stats_.spec_draft_tokens = spec_.draft_tokens;
  stats_.spec_accepted = spec_.accepted;
  stats_.spec_accepted_per_pos = spec_.accepted_per_pos;
}

bool Engine::step() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  intake();
  draft();
  const ScheduledBatch batch = sched_->schedule(budget_.prefill_tokens(sched_->n_decoding(), sched_->n_starting()));
  trim_drafts(batch);
  if (batch.empty()) {  // nothing to run — or every sequence was just preempted: then retry
    publish_metrics({});
    return !sched_->waiting().empty();
  }
  const double t0 = now_s();
  run(batch);
  int64_t n_decode = 0, n_prefill = 0;
  for (const ScheduledChunk& c : batch.chunks) (c.n == 1 ? n_decode : n_prefill) += c.n;
  const double dt = now_s() - t0;
  budget_.observe(dt, n_decode, n_prefill);
  if (opts_.log_steps) {
    const StepBudget::PrefillCost pc = budget_.prefill_cost();
    fmt::print(stderr, "mmx step: {} decodes + {} prefill tokens in {} chunks: {:.1f} ms (learned: this many decodes {:.1f} ms, "
               "prefill {:.1f} ms + {:.2f} ms a token)\n", n_decode, n_prefill, batch.chunks.size() - size_t(n_decode),
               1e3 * dt, 1e3 * budget_.decode_step_s(n_decode), 1e3 * pc.fixed_s, 1e3 * pc.token_s);
  }
  sched_->retire_finished();  // finished sequences released their memory in finish()
  if (opts_.check_integrity) check_integrity();
  publish_metrics(batch);
  return true;
}

void Engine::check_integrity() const {
  std::vector<const SeqMemory*> live;
  for (const auto& s : sched_->running()) live.push_back(&s->mem);
  for (const auto& s : sched_->waiting()) {
    MMX_CHECK(!s->mem.kv, "waiting request {} holds memory", s->id);
  }
  mem_->check_integrity(live);
}

void Engine::run_until_idle() {
  while (step()) {
  }
}

void Engine::fail_all() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  for (const auto& s : sched_->running()) {
    GenEvent e;
    e.kind = GenEvent::kError;
    e.error = "internal error while generating";
    emit(*s, e);
    mem_->release(s->mem);
  }
  sched_->retire_finished();
  publish_metrics({});
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] {
        return stop_ || !inbox_.empty() || !cancelled_.empty() || stats_.requests_running > 0 ||
               stats_.requests_waiting > 0;
      });
      if (stop_) return;
      // Idle and woken by a submit: let the rest of a burst arrive (at most batch_wait_ms).
      if (opts_.batch_wait_ms > 0 && stats_.requests_running == 0 && stats_.requests_waiting == 0 &&
          int64_t(inbox_.size()) < opts_.max_running) {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::microseconds(int64_t(opts_.batch_wait_ms * 1000));
        cv_.wait_until(l, until, [&] { return stop_ || int64_t(inbox_.size()) >= opts_.max_running; });
        if (stop_) return;
      }
    }
    try {
      step();
    } catch (const std::exception& ex) {
      // A failed forward fails every running request; the engine keeps serving.
      fail_all();
    }
  }
}

}  // namespace mmx
