// Generation: one HTTP request's n choices in the engine (data-flow steps 3 and 9-10).
//
//   submit n GenRequests (choice i gets seed + i) -> engine events (engine thread, pushed into
//   one queue) -> next() on the handler thread: per choice, ids -> OutputStream -> Update
//
// The engine thread only pushes into the queue; everything else runs on the handler thread (front.h) that
// owns the request. Destroying a Generation cancels every choice still running (client gone,
// error, or a stop string), so the engine never works for nobody.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "engine/engine_api.h"
#include "server/metrics.h"
#include "chat/output_stream.h"

namespace mmx::server {

// One step of one choice, as the response needs it.
struct Update {
  int choice = 0;
  chat::ParsedDelta delta;                  // newly decided text / tool calls
  std::vector<GenEvent> tokens;             // the kToken events behind it (for logprobs)
  bool finished = false;
  std::string finish_reason;                // "stop" | "length" | "tool_calls" when finished
  std::string stop_string;                  // when finished: the stop string that ended it, if one did
};

struct ChoiceUsage {
  int64_t n_generated = 0, n_cached = 0;
  bool has_tool_calls = false;
};

class Generation {
 public:
  // make_stream(i) builds the OutputStream of choice i. skip_ids: ids never shown as text (the
  // end-of-sequence tokens; the engine emits them before finishing with "stop").
  Generation(EngineApi& engine, ServerMetrics& metrics, double t_arrival, std::vector<int32_t> skip_ids,
             std::function<chat::OutputStream(int)> make_stream);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits `n` copies of `base`; choice i samples with seed base.sampling.seed + i.
  void submit(int n, const GenRequest& base);
  // Blocks until every choice has its first event; throws ApiError if the engine refused one
  // (429 queue full, 400 too long, ...), so a streaming response can still answer with a status.
  void wait_started();
  // Blocks for the next update. Throws ApiError for an engine error. Call while !done().
  Update next();
  // Same, but gives up after `timeout_ms` with std::nullopt (streams send a keep-alive then,
  // which is how a client that went away during a long prefill or decode step is noticed).
  std::optional<Update> next_for(int timeout_ms);
  bool done() const { return n_finished_ == int(choices_.size()); }
  // Cancels every running choice (idempotent).
  void cancel_all();

  const std::vector<ChoiceUsage>& usage() const { return usage_; }
  int64_t n_generated_total() const;

 private:
  struct Item {
    int choice;
    GenEvent ev;
  };
  struct Queue {  // shared with the engine callbacks: outlives us if the engine is slow to stop
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> items;
  };
  struct Choice {
    uint64_t engine_id = 0;
    bool started = false, finished = false;
    double t_last = 0;
    std::unique_ptr<chat::OutputStream> out;
  };

  std::optional<Item> pop(int timeout_ms);  // < 0: wait forever
  Update handle(Item item);

  EngineApi& engine_;
  ServerMetrics& metrics_;
  double t_arrival_;
  std::vector<int32_t> skip_ids_;
  std::function<chat::OutputStream(int)> make_stream_;
  std::shared_ptr<Queue> q_ = std::make_shared<Queue>();
  std::deque<Item> early_;  // events read by wait_started(), replayed by next()
  std::vector<Choice> choices_;
  std::vector<ChoiceUsage> usage_;
  int n_finished_ = 0;
};

}  // namespace mmx::server
