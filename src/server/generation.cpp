#include "server/generation.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "server/api_error.h"

namespace mmx::server {

namespace {
// The engine's typed refusal -> the HTTP answer: invalid 400, busy 429 (retry), internal 500.
ApiError refusal_error(const GenEvent& ev) {
  switch (ev.refusal) {
    case GenEvent::kInvalid: return ApiError(400, ev.error);
    case GenEvent::kBusy: return ApiError(429, ev.error);
    case GenEvent::kInternal: break;
  }
  return ApiError(500, ev.error);
}
}  // namespace

Generation::Generation(EngineApi& engine, ServerMetrics& metrics, double t_arrival,
                       std::vector<int32_t> skip_ids, std::function<chat::OutputStream(int)> make_stream)
    : engine_(engine), metrics_(metrics), t_arrival_(t_arrival), skip_ids_(std::move(skip_ids)),
      make_stream_(std::move(make_stream)) {}

Generation::~Generation() { cancel_all(); }

void Generation::submit(int n, const GenRequest& base) {
  choices_.resize(size_t(n));
  usage_.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    choices_[i].out = std::make_unique<chat::OutputStream>(make_stream_(i));
    GenRequest r = base;
    r.sampling.seed = base.sampling.seed + uint64_t(i);
    std::shared_ptr<Queue> q = q_;
    choices_[i].engine_id = engine_.submit(std::move(r), [q, i](const GenEvent& ev) {
      {
        std::lock_guard<std::mutex> l(q->mu);
        q->items.push_back({i, ev});
      }
      q->cv.notify_one();
    });
  }
}

void Generation::cancel_all() {
  for (Choice& c : choices_)
    if (!c.finished) {
      engine_.cancel(c.engine_id);
      c.finished = true;
      ++n_finished_;
    }
}

int64_t Generation::n_generated_total() const {
  int64_t n = 0;
  for (const ChoiceUsage& u : usage_) n += u.n_generated;
  return n;
}

std::optional<Generation::Item> Generation::pop(int timeout_ms) {
  if (!early_.empty()) {
    Item it = std::move(early_.front());
    early_.pop_front();
    return it;
  }
  std::unique_lock<std::mutex> l(q_->mu);
  auto ready = [&] { return !q_->items.empty(); };
  if (timeout_ms < 0) q_->cv.wait(l, ready);
  else if (!q_->cv.wait_for(l, std::chrono::milliseconds(timeout_ms), ready)) return std::nullopt;
  Item it = std::move(q_->items.front());
  q_->items.pop_front();
  return it;
}

void Generation::wait_started() {
  auto all_started = [&] {
    return std::all_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.started; });
  };
  while (!all_started()) {
    std::unique_lock<std::mutex> l(q_->mu);
    q_->cv.wait(l, [&] { return !q_->items.empty(); });
    Item it = std::move(q_->items.front());
    q_->items.pop_front();
    l.unlock();
    choices_[it.choice].started = true;
    if (it.ev.kind == GenEvent::kError) {
      choices_[it.choice].finished = true;
      ++n_finished_;
      throw refusal_error(it.ev);  // the destructor cancels the others
    }
    early_.push_back(std::move(it));
  }
}

Update Generation::next() { return handle(*pop(-1)); }

std::optional<Update> Generation::next_for(int timeout_ms) {
  std::optional<Item> it = pop(timeout_ms);
  if (!it) return std::nullopt;
  return handle(std::move(*it));
}

Update Generation::handle(Item item) {
  Update u;
  u.choice = item.choice;
  Choice& c = choices_[item.choice];
  ChoiceUsage& use = usage_[item.choice];
  const GenEvent& ev = item.ev;
  c.started = true;
  if (c.finished) return u;  // a late event after our own cancel: ignored
  if (ev.kind == GenEvent::kError) {
    c.finished = true;
    ++n_finished_;
    throw refusal_error(ev);
  }
  if (ev.kind == GenEvent::kToken) {
    const double t = now_s();
    if (use.n_generated == 0) metrics_.observe_ttft(t - t_arrival_);
    else metrics_.observe_itl(t - c.t_last);
    c.t_last = t;
    ++use.n_generated;
    u.tokens.push_back(ev);
    if (std::find(skip_ids_.begin(), skip_ids_.end(), ev.token) == skip_ids_.end())
      u.delta = c.out->push(ev.token);
    if (!c.out->stopped()) {
      use.has_tool_calls |= !u.delta.tool_calls.empty();
      return u;
    }
    engine_.cancel(c.engine_id);  // a stop string ended this choice
    u.finish_reason = "stop";
  } else {  // kDone
    use.n_cached = ev.n_cached;
    u.finish_reason = ev.finish_reason.empty() ? "stop" : ev.finish_reason;
  }
  u.delta.append(c.out->finish());
  u.stop_string = c.out->matched_stop();
  use.has_tool_calls |= !u.delta.tool_calls.empty();
  if (use.has_tool_calls) u.finish_reason = "tool_calls";
  u.finished = true;
  c.finished = true;
  ++n_finished_;
  return u;
}

}  // namespace mmx::server
