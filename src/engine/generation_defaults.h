// The checkpoint's default sampling: its generation_config.json (formats/generation_config.h)
// mapped onto SamplingParams — the values a request (or `mmx generate`) that gives none starts
// from. Not here: reading the file (formats/), per-request overrides (server/, tools/).
#pragma once

#include "engine/sampler.h"
#include "formats/generation_config.h"

namespace mmx {

// The SamplingParams defaults (temperature 1, no filters) with every value the file sets; top_k
// <= 0 means off (HF: 0, vLLM: -1). Throws mmx::Error naming the file for a value out of range
// (validate_sampling).
SamplingParams generation_defaults(const GenerationConfig& g);

}  // namespace mmx
