// The engine as the HTTP server (and RL rollouts, rl/rollout.h) see it: submit a tokenized
// request, receive its tokens as events, cancel it; push new weights into it (RL). Thread-safe; events are delivered on the engine's thread (the callback must
// not block and must not call back into the engine — push into a queue and act from another
// thread). engine/engine.h implements this; tests/server uses a scripted fake.
//
// Not here: text, chat templates, output parsing, stop strings — the server owns those; the
// engine sees token ids only (DESIGN: the model sees tensors, the engine sees ids).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "model/tensor_values.h"

namespace mmx {

struct GenRequest {
  std::vector<int32_t> prompt;      // validated ids, non-empty
  SamplingParams sampling;
  int64_t max_tokens = 16;          // >= 1; the engine also stops at the context limit
  std::vector<int32_t> stop_ids;    // finish with reason "stop" after emitting one of these
  bool ignore_eos = false;          // the model's eos ids do not stop it (only stop_ids do)
  // false: the engine skips the log-softmax over the vocabulary (1.3 ms a token at 200K ids, on
  // the engine thread while the other cores wait) and sends NaN as each token's logprob.
  bool logprobs = true;
  int top_logprobs = 0;             // 0..20 (needs logprobs): alternatives per emitted token
  int64_t priority = 0;             // reserved
  // Who asked (the server: "key:N" or "addr:IP"; "" for everyone else). The scheduler shares the
  // running slots fairly between the clients that wait (engine/scheduler.h).
  std::string client;
  ConstraintFactory constraint;     // structured output: one TokenConstraint per sequence (empty: none)
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;  // log-softmax of the raw logits (before temperature / filters)
};

struct GenEvent {
  enum Kind : uint8_t { kToken, kDone, kError } kind = kToken;
  // kToken
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // top_logprobs alternatives, descending
  // kDone
  std::string finish_reason;      // "stop" (stop id / eos), "length" (max_tokens or context)
  int64_t n_prompt = 0;           // prompt tokens
  int64_t n_cached = 0;           // prompt tokens served from the prefix cache
  int64_t n_generated = 0;
  // kError: a typed refusal (the server maps it to a status code) and a user-facing message
  enum Refusal : uint8_t { kInvalid, kBusy, kInternal } refusal = kInternal;
  std::string error;
};

struct EngineMetrics {
  int64_t requests_waiting = 0, requests_running = 0;
  int64_t kv_pages_used = 0, kv_pages_total = 0;
  int64_t prefix_hits_tokens = 0, prefix_lookup_tokens = 0;
  int64_t last_batch_tokens = 0, last_batch_seqs = 0;
  int64_t preemptions = 0;  // sequences sent back to the queue for recompute (pages ran out)
  int64_t weight_updates = 0;  // update_weights() calls that took effect
  int64_t steps = 0;           // steps that ran a batch
  // Speculative decoding (engine/speculator.h, vLLM's spec_decode_num_* counters): steps that
  // verified drafts, drafted tokens, accepted ones, accepted ones by draft position.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted = 0;
  std::vector<int64_t> spec_accepted_per_pos;
};

class EngineApi {
 public:
  virtual ~EngineApi() = default;
  // Returns a request id. `on_event` receives kToken events, then exactly one kDone or kError.
  // Throws nothing: a request that cannot be accepted gets a kError event (kBusy: queue full;
  // kInvalid: a prompt longer than the context, an id outside the vocabulary, bad sampling).
  virtual uint64_t submit(GenRequest r, std::function<void(const GenEvent&)> on_event) = 0;
  // Stops the request (client gone or stop string hit) and frees its memory at once. Idempotent;
  // once it returns, no further events are delivered for that id.
  virtual void cancel(uint64_t id) = 0;
  virtual EngineMetrics metrics() const = 0;
  virtual int64_t context_limit() const = 0;  // max prompt + generated tokens per request
  // Requests the engine queues at once (--max-queue): a submit beyond it is refused kBusy, so a request
  // of n choices with n above this could never succeed (the server answers 400 instead).
  virtual int64_t max_queued() const = 0;
  // Replaces the model's weights by checkpoint name (Model::update_weights: encoded in the
  // model's storage dtypes), without a restart. It waits for the step in progress and runs before
  // the next one; the prefix cache is dropped (its K/V came from the old weights), and requests in
  // flight are recomputed from their tokens so far: what they emit from then on comes from the new
  // weights, what they emitted before stays as it was. Throws mmx::Error, changing nothing, for an
  // unknown tensor, a wrong size or a block-scaled (FP8) one. This default refuses.
  virtual void update_weights(std::span<const TensorValues> updates) {
    (void)updates;
    fail("this engine does not take weight updates");
  }
};

}  // namespace mmx
