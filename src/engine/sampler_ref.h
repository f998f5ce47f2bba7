// The fp64 reference of the Sampler's rules (sampler.h), written for clarity: the adjusted
// logits in double, a full sort of the vocabulary, the kept set, the draw. Tests compare the
// Sampler's pick() with it token for token; bench/sampler times both.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampler.h"

namespace mmx {

int32_t sample_reference(const float* logits, int64_t n, const SamplingParams& p, const SamplerState& st,
                         const std::vector<int32_t>& stop_ids, double u);

}  // namespace mmx
