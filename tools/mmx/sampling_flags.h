// The sampling flags of the commands that generate (mmx generate, mmx chat): --temp, --top-k,
// --top-p, --min-p, optionally the three penalties, and --seed. One helper adds them to a CLI11
// subcommand; what is not given keeps the value the caller starts from (the checkpoint's
// generation_config.json).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>

#include "engine/sampler.h"

namespace mmx::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, presence, frequency, repetition;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;

  // The given flags over `sp`; the seed from --seed, else random (seed_given() says which).
  void apply(SamplingParams& sp) const;
  bool seed_given() const { return seed.has_value(); }
};

// What differs between the commands: the --temp text (which says what the defaults are), the
// --seed text, and whether the penalties (--repeat-penalty, --presence-penalty,
// --frequency-penalty) are offered.
struct SamplingFlagsHelp {
  const char* temperature;
  const char* seed;
  bool penalties = false;
};

void add_sampling_flags(CLI::App* c, SamplingFlags* f, const SamplingFlagsHelp& help);

}  // namespace mmx::cli
