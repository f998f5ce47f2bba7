// Engine: continuous batching over one Model, behind EngineApi (engine_api.h).
//
// One engine thread runs step() in a loop: admit -> schedule -> run -> sample -> emit.
//   admit:    waiting requests enter FIFO while the running set and the KV memory budget allow
//             (a request reserves prompt + max_tokens rows of per-sequence memory at admission);
//   schedule: every running decode gets 1 token first (priority to running decodes), then
//             prefills get chunks of their prompt from what is left of the step's token budget;
//   run:      each scheduled sequence's chunk is one model forward over its own KvCache;
//   sample:   the sequence's seeded Sampler over the last logits row; logprobs from log-softmax;
//   emit:     kToken events; kDone on a stop id, max_tokens or the context limit.
// Cancellation removes a request and frees its memory at the start of the next step.
//
// Stage note (serving issue): sequences run as separate forwards and memory is reserved per
// request (so nothing is ever preempted). Paged KV shared between sequences, the prefix cache
// and fused multi-sequence forwards replace this inside the same step() structure.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine_api.h"
#include "model/model.h"

namespace mmx {

struct EngineOptions {
  int64_t max_batch_tokens = 512;  // tokens per step (decodes + prefill chunks)
  int64_t max_running = 16;        // sequences in flight
  int64_t max_waiting = 256;       // queue length before 429
  int64_t kv_token_budget = 0;     // total reserved tokens over running requests (0 = 64 × context)
  int64_t n_valid_vocab = 0;       // > 0: never sample ids >= this (padded lm_head rows)
  std::vector<int32_t> eos_ids;    // always stop ids
  bool start_thread = true;        // false: the caller drives step() (deterministic tests)
};

class Engine final : public EngineApi {
 public:
  Engine(Model& model, EngineOptions opts);
  ~Engine() override;  // stops the thread; pending requests are dropped without events

  uint64_t submit(GenRequest r, std::function<void(const GenEvent&)> on_event) override;
  void cancel(uint64_t id) override;
  EngineMetrics metrics() const override;
  int64_t context_limit() const override;

  // One scheduling step on the caller's thread (with start_thread = false). Returns false when
  // there was nothing to do. run_until_idle() steps until every request has finished.
  bool step();
  void run_until_idle();

 private:
  struct Req;
  void loop();
  void admit();
  void finish(Req& r, const char* reason);

  Model& model_;
  EngineOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Req>> inbox_;             // submitted, not yet admitted
  std::vector<std::unique_ptr<Req>> running_;          // admission order
  std::unordered_map<uint64_t, bool> cancelled_;       // ids to drop at the next step
  uint64_t next_id_ = 1;
  int64_t reserved_tokens_ = 0;
  EngineMetrics stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mmx
