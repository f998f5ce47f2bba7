// The checkpoint's default sampling: generation_config.json's temperature, top_p, top_k, min_p
// and repetition_penalty, used when a request (or `mmx generate`) gives none — what vLLM does
// with its default `--generation-config auto`. `do_sample` is not read (as in vLLM): MiniMax
// ships temperature 1.0 / top_p 0.95 / top_k 40 without it, meaning them to be used.
#pragma once

#include <string>

#include "engine/sampler.h"

namespace mmx {

// Reads DIR/generation_config.json; without one, the SamplingParams defaults (temperature 1,
// no filters). Throws mmx::Error naming the file and key for a value of the wrong type or range.
SamplingParams generation_defaults(const std::string& dir);

}  // namespace mmx
