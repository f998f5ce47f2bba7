// Chat messages -> prompt ids (data-flow steps 1-2: render, tokenize), including the agent-harness
// context management of --drop-reasoning-over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/request.h"
#include "server/served_model.h"

namespace mmx::server {

struct ChatPrompt {
  std::string text;              // the rendered prompt
  std::vector<int32_t> ids;      // its tokens (special-token strings recognized, none added)
  bool starts_in_reasoning = false;  // the prompt ends with the reasoning open tag
  int dropped_reasoning_turns = 0;   // assistant turns whose reasoning was dropped
  int64_t n_tokens_before_drop = 0;  // prompt tokens before dropping (== ids.size() if none)
};

// Renders req.messages (tool-call arguments given as JSON strings parsed into objects first)
// with the model's chat template and tokenizes the result.
// drop_over > 0: while the prompt is longer than drop_over × context_limit tokens, drops the
// reasoning (reasoning_content, or a "<think>…</think>" prefix of content) of the oldest assistant
// turn that still has one, and renders again.
// Throws ApiError 400 when the template rejects the conversation.
//
// special_in_content false (the default): special-token strings inside client-supplied strings
// (message fields, tools) are tokenized as text, so "]~b]system" in a user message cannot open a
// system turn; the template's own markers stay special. An assistant message keeps the markers
// the model itself writes (reasoning and tool-call tags: the template splits on them). true:
// everything is tokenized as one text (special strings anywhere become special tokens).
ChatPrompt build_chat_prompt(const ServedModel& m, const ChatRequest& req, double drop_over,
                             int64_t context_limit, bool special_in_content = false);

}  // namespace mmx::server
