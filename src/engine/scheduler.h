// Scheduler: which sequences run in the next step, and how many tokens each (DESIGN data-flow
// step 4). Over the shared PagedMemory; knows nothing of models, sampling or events.
//
//   admit:    waiting sequences enter while max_running and the free pages allow, fairly between
//             clients (GenRequest::client): the next is the first waiting one of the client with
//             the fewest running, and when slots or pages run out, a client holding at least two
//             more than that one gives up its newest (preempted as below) — no client keeps more
//             than its share while others wait; with one client this is plain FIFO. Each maps
//             the longest usable cached prefix of its tokens. One whose prefix a running
//             sequence is still prefilling waits until those pages are committed, so n choices
//             of one prompt compute it once;
//   plan:     every running decode gets 1 token first, then prefills get chunks from what is left
//             of the step's token budget; a chunk never crosses the next lightning-state
//             checkpoint (so the fused forward never splits a sequence);
//   preempt:  a sequence that needs a page when none is free preempts the most recently admitted
//             one, which releases its pages and goes to the front of the queue to be recomputed
//             (its tokens so far become its prompt; its committed blocks usually come back as a
//             prefix-cache hit).
#pragma once

#include <cstdint>
#include <limits>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"
#include "memory/paged_memory.h"

namespace mmx {

struct SchedulerOptions {
  int64_t max_batch_tokens = 512;  // tokens per step (decodes + prefill chunks)
  int64_t max_running = 16;        // sequences in flight
};

struct ScheduledChunk {
  Sequence* seq;
  int64_t n;  // tokens to run, from seq->mem.n_past()
};

struct ScheduledBatch {
  std::vector<ScheduledChunk> chunks;
  bool empty() const { return chunks.empty(); }
  int64_t n_tokens() const;
};

class Scheduler {
 public:
  Scheduler(PagedMemory& mem, SchedulerOptions o);

  void enqueue(std::unique_ptr<Sequence> s);  // at the back of the waiting queue
  void remove(uint64_t id);                   // wherever it is; its memory is released
  // Admits what fits, then plans one step (pages reserved for every chunk): decodes first, then
  // prefill chunks of at most `prefill_budget` tokens in all (StepBudget). Empty when nothing runs.
  ScheduledBatch schedule(int64_t prefill_budget = INT64_MAX);
  int64_t n_decoding() const;  // running sequences with one pending token
  int64_t n_starting() const;  // running sequences still prefilling, plus waiting ones a free slot admits
  // Every running sequence releases its memory and goes back to the front of the queue, in
  // admission order, to be recomputed from its tokens so far (new weights: its K/V is stale).
  void requeue_running();
  // Drops running sequences whose memory was released (finished); returns how many remain.
  int64_t retire_finished();

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  int64_t preemptions() const { return preemptions_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  int64_t prefix_lookup_tokens() const { return prefix_lookup_tokens_; }

 private:
  void admit();
  std::unordered_map<std::string, int64_t> running_per_client() const;
  Sequence* fairness_victim(int64_t held) const;
  bool shares_inflight_prefill(const Sequence& s, int64_t hit) const;
  bool make_room(Sequence& s, int64_t& n, ScheduledBatch& batch);
  void preempt(Sequence& victim, ScheduledBatch& batch);

  PagedMemory& mem_;
  SchedulerOptions o_;
  std::deque<std::unique_ptr<Sequence>> waiting_;   // admitted next, front first
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  int64_t prefix_hit_tokens_ = 0, prefix_lookup_tokens_ = 0, preemptions_ = 0;
};

}  // namespace mmx
