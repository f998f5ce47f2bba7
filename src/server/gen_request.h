// The engine request of a generation route (defined in server.cpp, used by the OpenAI routes and
// the Anthropic one): checks that the prompt leaves room in the context, clamps max_tokens to
// it (default_max_tokens when the request gives none; 0 = up to the context), sets the stop ids
// (unless ignore_eos), logprobs and a logit_bias checked against the vocabulary. Throws ApiError
// 400 naming `prompt_param` when the prompt fills the context.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine_api.h"
#include "server/request.h"

namespace mmx::server {

GenRequest make_gen_request(const GenerationParams& p, std::vector<int32_t> ids, int64_t context,
                            int64_t default_max_tokens, int64_t vocab, const std::vector<int32_t>& eos,
                            const char* prompt_param);

}  // namespace mmx::server
