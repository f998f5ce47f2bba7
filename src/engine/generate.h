// One request, generated on the caller's thread: a thin caller of the continuous-batching Engine
// (the same Scheduler, ModelRunner, Sampler and stop rule the server uses), over a KV pool sized
// for just this request. The CLI, benchmarks and consistency tests use it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/engine_api.h"
#include "engine/speculator.h"
#include "model/model.h"

namespace mmx {

struct GenerateStats {
  int64_t n_prompt = 0, n_generated = 0;
  double prefill_s = 0, decode_s = 0;  // until the first token; from it to the last
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted = 0;  // speculative decoding (EngineMetrics)
};

struct GenerateOptions {
  int64_t n_valid_vocab = 0;  // > 0: never sample ids >= this (padded lm_head rows; spec §6.1)
  DType kv_dtype = DType::kBF16;  // K/V page storage (docs/numerics.md "BF16 KV pages"); kF32 = exact K/V
  std::optional<DType> ik_dtype;  // MSA index-key pages (none: kv_dtype; kF8E4M3: the release's form)
  int64_t max_batch_tokens = 0;  // prefill chunk (0 = the whole prompt in one step)
  int64_t spec_k = 0;             // speculative decoding: drafted tokens per step (engine/speculator.h)
  std::shared_ptr<Drafter> drafter;
};

// Generates up to r.max_tokens tokens after r.prompt with r.sampling; stops after a token of
// r.stop_ids (included in the output). on_token(id) is called per token; returning false stops.
// Throws mmx::Error for an empty prompt, invalid ids, bad sampling parameters, or when prompt +
// max_tokens exceeds the model's context.
std::vector<int32_t> generate(Model& model, const GenRequest& r, const std::function<bool(int32_t)>& on_token,
                              GenerateStats* stats = nullptr, const GenerateOptions& o = {});

// All-position logits of `ids` [n, vocab], prefilling in chunks of `chunk` tokens (0 = all at
// once) into a fresh cache. Used by `mmx logits` and the chunked == unchunked tests.
Buffer prefill_logits(Model& model, const std::vector<int32_t>& ids, int64_t chunk);

}  // namespace mmx
