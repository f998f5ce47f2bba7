// generation_config.json as a checkpoint ships it: the sampling defaults for a request (or
// `mmx generate`) that gives none — what vLLM does with its default `--generation-config auto`.
// Read and type-checked here; not interpreted: engine/generation_defaults.h maps the values onto
// SamplingParams (top_k <= 0 = off, the range checks). `do_sample` is not read (as in vLLM):
// MiniMax ships temperature 1.0 / top_p 0.95 / top_k 40 without it, meaning them to be used.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mmx {

// A key absent or null in the file is unset.
struct GenerationConfig {
  std::string where;  // the file, for messages; "" when the checkpoint has none
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
};

// Reads DIR/generation_config.json; without one, every field unset. Throws mmx::Error naming the
// file and key for a value of the wrong type (or a file that is not a JSON object).
GenerationConfig read_generation_config(const std::string& dir);

}  // namespace mmx
