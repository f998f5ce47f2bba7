// generation_config.json -> SamplingParams (see generation_defaults.h).
#include "engine/generation_defaults.h"

#include <algorithm>

#include "base/error.h"

namespace mmx {

SamplingParams generation_defaults(const GenerationConfig& g) {
  SamplingParams p;
  if (g.where.empty()) return p;  // no generation_config.json
  if (g.temperature) p.temperature = *g.temperature;
  if (g.top_p) p.top_p = *g.top_p;
  if (g.min_p) p.min_p = *g.min_p;
  if (g.repetition_penalty) p.repetition_penalty = *g.repetition_penalty;
  if (g.top_k) p.top_k = *g.top_k <= 0 ? 0 : int(std::min<int64_t>(*g.top_k, 1 << 30));  // HF: 0 (or -1 in vLLM) = off
  try {
    validate_sampling(p);
  } catch (const Error& e) {
    fail("{}: {}", g.where, e.what());
  }
  return p;
}

}  // namespace mmx
