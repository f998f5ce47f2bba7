// Engine: continuous batching over one Model and one shared paged KV pool, behind EngineApi —
// the loop and the request state machine; the rooms it calls are
//   Scheduler   (scheduler.h)     admission, the step's chunks, preemption, over PagedMemory;
//   ModelRunner (model_runner.h)  one fused forward over the chunks -> logits rows;
//   Sampler     (sampler.h)       logits row -> token (penalties, filters, seeded RNG), the stop rule.
//
// One engine thread runs step() in a loop (a request that wakes an idle engine first waits up to
// batch_wait_ms for the rest of a burst, so the burst is prefilled in one step and decodes in step):
//   intake:   move submitted requests into the scheduler's queue, drop cancelled ones (their
//             memory is freed there — or at once inside cancel() when no step is running);
//   schedule: Scheduler::schedule() admits and plans the step (pages reserved), prefill chunks
//             within what StepBudget allows so running decodes keep their pace;
//   draft:    (with a Drafter) each decoding sequence appends up to spec_k drafted tokens
//             (engine/speculator.h), verified in the same step;
//   run:      ModelRunner::run(); each sequence, when its pending tokens are all in, samples — or
//             verifies its drafts row by row through its Sampler and rolls the rejected tail back —
//             then commits its new full pages;
//   emit:     kToken events (logprobs: log-softmax of the raw logits); kDone on a stop id,
//             max_tokens or the context limit.
// HTTP threads only touch the inbox and the cancel set (under mu_); everything else belongs to
// the engine thread, so forwards run without holding the lock.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <optional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "engine/engine_api.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "engine/speculator.h"
#include "engine/step_budget.h"
#include "memory/paged_memory.h"
#include "model/model.h"

namespace mmx {

struct EngineOptions {
  int64_t max_batch_tokens = 2048;  // tokens per step (decodes + prefill chunks); llama-server's n_batch
  // Target step time while sequences decode (StepBudget: prefill chunks shrink so decodes are not
  // stalled): < 0 off (tests: deterministic chunking), 0 auto (StepBudget::kAutoFactor x a decode-only step), > 0 ms.
  double max_step_ms = -1;
  // With max_step_ms: bound every step, also those beside a burst of prompts that outnumber the
  // decodes (StepBudget's strict mode).
  bool max_step_strict = false;
  int64_t max_running = 16;        // sequences in flight
  // When the engine is idle, a request waits up to this long for others to join its first step
  // (a burst is prefilled together and then decodes in step instead of stalling its first
  // arrivals; measured against llama-server on the M2 slice). 0 = start at once.
  double batch_wait_ms = 10;
  int64_t max_waiting = 256;       // queue length before a kBusy refusal
  int64_t kv_pages = 0;            // pages in the shared KV pool (0 = auto: see kv_pages_auto)
  int64_t kv_auto_bytes = int64_t(2) << 30;  // auto pool size cap in bytes
  DType kv_dtype = DType::kBF16;   // K/V page storage: kBF16 (default: half the bytes per page) or kF32
  std::optional<DType> ik_dtype;   // MSA index-key pages: kF32, kBF16 or kF8E4M3 (none: kv_dtype)
  int64_t state_checkpoint_every = 1024;     // lightning snapshot spacing (rounded to pages)
  int max_state_snapshots = 8;     // lightning prefix snapshots kept (each = one sequence's states)
  int64_t n_valid_vocab = 0;       // > 0: never sample ids >= this (padded lm_head rows)
  std::vector<int32_t> eos_ids;    // stop ids of every request that does not set ignore_eos
  bool start_thread = true;        // false: the caller drives step() (deterministic tests)
  bool check_integrity = false;    // run memory.check_integrity() after every step (tests)
  bool log_steps = false;          // one stderr line per step: decodes, prefill tokens, seconds (tuning)
  // Speculative decoding (engine/speculator.h): up to spec_k drafted tokens per decoding sequence
  // and step, from `drafter` (none: off). Output is the same as without (greedy: token for token).
  int64_t spec_k = 0;
  std::shared_ptr<Drafter> drafter;
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
  void update_weights(std::span<const TensorValues> updates) override;

  // One scheduling step on the caller's thread (with start_thread = false). Returns false when
  // there was nothing to do. run_until_idle() steps until every request has finished.
  bool step();
  void run_until_idle();
  // Aborts (MMX_CHECK) unless page ref counts, block tables and the prefix cache agree.
  void check_integrity() const;
  int64_t preemptions() const { return sched_->preemptions(); }
  const PagedMemory& memory() const { return *mem_; }

 private:
  void loop();
  void intake();
  void draft();  // drafts for the decoding sequences (with a drafter)
  void trim_drafts(const ScheduledBatch& batch);  // drafts a chunk does not cover are dropped
  void run(const ScheduledBatch& batch);
  // Samples the next token from a logits row, emits it, finishes the request if done; false when
  // it finished (or failed).
  bool sample(Sequence& s, const float* logits);
  // A drafted chunk's rows [1 + n_draft, vocab]: sampled in order while they agree with the drafts.
  void verify(Sequence& s, const float* rows);
  void emit(Sequence& s, const GenEvent& e);
  // Done with `reason`; with an `error`, a kError (kInvalid) event instead of kDone.
  void finish(Sequence& s, const char* reason, const std::string& error = "");
  void publish_metrics(const ScheduledBatch& batch);
  void fail_all();

  Model& model_;
  EngineOptions opts_;
  std::unique_ptr<PagedMemory> mem_;
  // Shared with the HTTP threads (under mu_):
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> inbox_;  // submitted, not yet seen by the engine thread
  std::unordered_set<uint64_t> cancelled_;  // ids to drop at the next intake
  uint64_t next_id_ = 1;
  EngineMetrics stats_;
  bool stop_ = false;
  // The engine thread's own (step_mu_ is held by step(); cancel() frees at once if it is free):
  std::mutex step_mu_;
  std::unique_ptr<Scheduler> sched_;
  ModelRunner runner_;
  StepBudget budget_;
  SpecStats spec_;
  std::thread thread_;
};

}  // namespace mmx
