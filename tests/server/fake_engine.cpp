#include "fake_engine.h"

#include <algorithm>
#include <chrono>

namespace mmx::testing {

FakeEngine::~FakeEngine() {
  std::vector<std::thread> ts;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, run] : runs_) {
      std::lock_guard<std::mutex> rl(run->mu);
      run->cancelled = true;
    }
    ts.swap(threads_);
  }
  for (std::thread& t : ts) t.join();
}

uint64_t FakeEngine::submit(GenRequest r, std::function<void(const GenEvent&)> on_event) {
  auto run = std::make_shared<Run>();
  run->emit = std::move(on_event);
  uint64_t id = 0;
  bool refuse = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    id = next_id_++;
    requests_.push_back(r);
    refuse = int(runs_.size()) >= max_in_flight;
    if (!refuse) {
      runs_[id] = run;
      threads_.emplace_back([this, id, r, run] { play(id, r, run); });
    }
  }
  if (refuse) {
    GenEvent e;
    e.kind = GenEvent::kError;
    e.error = "the server is busy: too many queued requests, retry later";
    e.refusal = GenEvent::kBusy;
    run->emit(e);
  }
  return id;
}

void FakeEngine::play(uint64_t id, GenRequest r, std::shared_ptr<Run> run) {
  int64_t n = 0;
  std::string reason = "stop";
  bool stop = false;
  for (size_t i = 0; i < script.size() && !stop; ++i) {
    if (int(i) == fail_after) {
      GenEvent e;
      e.kind = GenEvent::kError;
      e.error = "the engine failed";
      e.refusal = GenEvent::kInternal;
      std::lock_guard<std::mutex> rl(run->mu);
      if (!run->cancelled) run->emit(e);
      run->cancelled = true;
      break;
    }
    if (token_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(token_delay_ms));
    GenEvent e;
    e.token = script[i];
    e.logprob = -0.25f * float(i % 4 + 1);
    for (int k = 0; k < r.top_logprobs; ++k) e.top.push_back({script[i] + k, e.logprob - float(k)});
    {
      std::lock_guard<std::mutex> rl(run->mu);
      if (run->cancelled) return;
      run->emit(e);
    }
    ++n;
    stop = std::find(r.stop_ids.begin(), r.stop_ids.end(), e.token) != r.stop_ids.end();
    if (!stop && n >= r.max_tokens) {
      reason = "length";
      break;
    }
  }
  if (int(n) == fail_after) {
    std::lock_guard<std::mutex> l(mu_);
    runs_.erase(id);
    return;
  }
  GenEvent d;
  d.kind = GenEvent::kDone;
  d.finish_reason = reason;
  d.n_prompt = int64_t(r.prompt.size());
  d.n_generated = n;
  d.n_cached = n_cached;
  {
    std::lock_guard<std::mutex> rl(run->mu);
    if (run->cancelled) return;
    run->emit(d);
    run->cancelled = true;  // finished: nothing more
  }
  std::lock_guard<std::mutex> l(mu_);
  runs_.erase(id);
}

void FakeEngine::cancel(uint64_t id) {
  std::shared_ptr<Run> run;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = runs_.find(id);
    if (it == runs_.end()) return;
    run = it->second;
    runs_.erase(it);
  }
  std::lock_guard<std::mutex> rl(run->mu);
  if (!run->cancelled) ++n_cancelled_;
  run->cancelled = true;
}

EngineMetrics FakeEngine::metrics() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineMetrics m;
  m.requests_running = int64_t(runs_.size());
  m.kv_pages_used = 3;
  m.kv_pages_total = 100;
  m.prefix_hits_tokens = 5;
  m.prefix_lookup_tokens = 20;
  m.last_batch_seqs = 1;
  m.last_batch_tokens = 1;
  return m;
}

std::vector<GenRequest> FakeEngine::requests() const {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}

int FakeEngine::n_in_flight() const {
  std::lock_guard<std::mutex> l(mu_);
  return int(runs_.size());
}

}  // namespace mmx::testing
