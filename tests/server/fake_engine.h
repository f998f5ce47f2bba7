// FakeEngine: an EngineApi that replays a scripted token sequence for every request, for
// testing the HTTP layer without a model. One thread per request; optional per-token delay;
// a queue limit that answers 429; records prompts, requests and cancellations.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_api.h"

namespace mmx::testing {

class FakeEngine final : public EngineApi {
 public:
  // What to say: the ids each request replays (then kDone "stop"), unless max_tokens ends it
  // first ("length") or a stop id is emitted ("stop", the stop id included as a token).
  std::vector<int32_t> script;
  int64_t context = 4096;
  int max_in_flight = 1000;   // more concurrent requests than this get a 429 error event
  int token_delay_ms = 0;
  int64_t n_cached = 0;       // reported in kDone
  int fail_after = -1;        // >= 0: after this many tokens, a kError 500 instead of the rest

  ~FakeEngine() override;
  uint64_t submit(GenRequest r, std::function<void(const GenEvent&)> on_event) override;
  void cancel(uint64_t id) override;
  EngineMetrics metrics() const override;
  int64_t context_limit() const override { return context; }
  int64_t queue_capacity = 1000;  // what max_queued() reports (the server's n check)
  int64_t max_queued() const override { return queue_capacity; }

  // Observations (thread-safe).
  std::vector<GenRequest> requests() const;
  int n_cancelled() const { return n_cancelled_; }
  int n_in_flight() const;

 private:
  struct Run {
    std::mutex mu;  // held while emitting: cancel() returning means no further events
    bool cancelled = false;
    std::function<void(const GenEvent&)> emit;
  };
  void play(uint64_t id, GenRequest r, std::shared_ptr<Run> run);

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Run>> runs_;
  std::vector<GenRequest> requests_;
  std::vector<std::thread> threads_;
  std::atomic<int> n_cancelled_{0};
};

}  // namespace mmx::testing
