// Engine: continuous batching over one Model and one shared paged KV pool, behind EngineApi.
//
// One engine thread runs step() in a loop:
//   intake:   move submitted requests into the waiting queue, drop cancelled ones (their pages
//             are freed there — or at once inside cancel() when no step is running);
//   admit:    waiting requests enter FIFO while max_running and the free pages allow; each maps
//             the longest usable cached prefix of its tokens (memory/paged_memory.h). A request
//             whose prefix a running request is still prefilling waits until those pages are
//             committed, so n choices of one prompt compute it once;
//   schedule: every running decode gets 1 token first (priority to running decodes), then
//             prefills get chunks from what is left of the step's token budget. A sequence that
//             needs a page when none is free preempts the most recently admitted sequence, which
//             releases its pages and waits at the front of the queue to be recomputed (its
//             tokens so far become its prompt; its committed blocks usually come back as a
//             prefix-cache hit);
//   run:      one fused Model::forward_multi over every scheduled chunk (weights read once);
//   sample:   the sequence's seeded Sampler over its last logits row; logprobs from log-softmax;
//   emit:     kToken events; kDone on a stop id, max_tokens or the context limit.
// HTTP threads only touch the inbox and the cancel set (under mu_); everything else belongs to
// the engine thread, so forwards run without holding the lock.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "engine/engine_api.h"
#include "memory/paged_memory.h"
#include "model/model.h"

namespace mmx {

struct EngineOptions {
  int64_t max_batch_tokens = 512;  // tokens per step (decodes + prefill chunks)
  int64_t max_running = 16;        // sequences in flight
  int64_t max_waiting = 256;       // queue length before 429
  int64_t kv_pages = 0;            // pages in the shared KV pool (0 = auto: see kv_pages_auto)
  int64_t kv_auto_bytes = int64_t(2) << 30;  // auto pool size cap in bytes
  DType kv_dtype = DType::kF32;    // K/V page storage: kF32 or kBF16 (half the bytes per page)
  int64_t state_checkpoint_every = 1024;     // lightning snapshot spacing (rounded to pages)
  int max_state_snapshots = 8;     // lightning prefix snapshots kept (each = one sequence's states)
  int64_t n_valid_vocab = 0;       // > 0: never sample ids >= this (padded lm_head rows)
  std::vector<int32_t> eos_ids;    // stop ids of every request that does not set ignore_eos
  bool start_thread = true;        // false: the caller drives step() (deterministic tests)
  bool check_integrity = false;    // run memory.check_integrity() after every step (tests)
};

class Engine final : public EngineApi {
 public:
  Engine(Model& model, EngineOptions opts);
  ~Engine() override;  // stops the thread; pending requests are dropped without events

  uint64_t submit(GenRequest r, std::function<void(const GenEvent&)> on_event) override;
  void cancel(uint64_t id) override;
  EngineMetrics metrics() const override;
  int64_t context_limit() const override;
  int64_t max_queued() const override { return opts_.max_waiting; }

  // One scheduling step on the caller's thread (with start_thread = false). Returns false when
  // there was nothing to do. run_until_idle() steps until every request has finished.
  bool step();
  void run_until_idle();
  // Aborts (MMX_CHECK) unless page ref counts, block tables and the prefix cache agree.
  void check_integrity() const;
  int64_t preemptions() const { return preemptions_; }
  const PagedMemory& memory() const { return *mem_; }

 private:
  struct Req;
  struct Item {
    Req* r;
    int64_t n;  // tokens to run
  };
  void loop();
  void intake();
  void drop(uint64_t id);
  void admit();
  bool shares_inflight_prefill(const Req& r, int64_t hit) const;
  std::vector<Item> schedule();
  bool make_room(Req& r, int64_t& n, std::vector<Item>& batch);
  void preempt(Req& victim, std::vector<Item>& batch);
  void run(const std::vector<Item>& batch);
  void sample(Req& r, const float* logits);
  void emit(Req& r, const GenEvent& e);
  void finish(Req& r, const char* reason);
  void publish_metrics(const std::vector<Item>& batch);
  void fail_all();

  Model& model_;
  EngineOptions opts_;
  std::unique_ptr<PagedMemory> mem_;
  // Shared with the HTTP threads (under mu_):
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Req>> inbox_;  // submitted, not yet seen by the engine thread
  std::unordered_set<uint64_t> cancelled_;  // ids to drop at the next intake
  uint64_t next_id_ = 1;
  EngineMetrics stats_;
  bool stop_ = false;
  // The engine thread's own (step_mu_ is held by step(); cancel() frees at once if it is free):
  std::mutex step_mu_;
  std::deque<std::unique_ptr<Req>> waiting_;   // admitted next, front first
  std::vector<std::unique_ptr<Req>> running_;  // admission order
  int64_t prefix_hit_tokens_ = 0, prefix_lookup_tokens_ = 0, preemptions_ = 0;
  std::thread thread_;
};

}  // namespace mmx
