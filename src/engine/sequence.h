// Sequence: one request as the engine holds it — its tokens so far, its memory while admitted,
// its sampler (RNG and penalty state travel with it, so a preempted sequence resumes exactly).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine_api.h"
#include "engine/sampler.h"
#include "memory/paged_memory.h"

namespace mmx {

struct Sequence {
  uint64_t id = 0;
  GenRequest in;
  std::function<void(const GenEvent&)> emit;
  std::vector<int32_t> tokens;  // prompt, then generated ids
  int64_t n_generated = 0;
  int64_t n_cached = -1;        // prompt tokens served from the prefix cache (first admission)
  SeqMemory mem;                // pages + lightning states while admitted (mem.kv null otherwise)
  std::unique_ptr<Sampler> sampler;
  // Drafted tokens at the end of `tokens`, not yet verified (engine/speculator.h); 0 when none.
  int64_t n_draft = 0;
  // Tokens not yet in the cache: 1 for a decode (1 + n_draft with drafts), more while (re)prefilling.
  int64_t pending() const { return int64_t(tokens.size()) - mem.n_past(); }
  bool decoding() const { return mem.kv && pending() == 1 + n_draft; }
  // Forgets unverified drafts (preempted, or not scheduled in full).
  void drop_drafts(int64_t n) {
    n = std::min(n, n_draft);
    tokens.resize(tokens.size() - size_t(n));
    n_draft -= n;
  }
};

}  // namespace mmx
