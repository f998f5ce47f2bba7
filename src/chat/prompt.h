// A conversation -> prompt ids (data-flow steps 1-2: render, tokenize), including the agent-harness
// context management of --drop-reasoning-over. Used through prepare_turn (turn.h), and directly
// where only the prompt is wanted (the Anthropic count_tokens route).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/served_model.h"

namespace mmx::chat {

struct ChatPrompt {
  std::string text;              // the rendered prompt
  std::vector<int32_t> ids;      // its tokens (special-token strings recognized, none added)
  bool starts_in_reasoning = false;  // the prompt ends with the reasoning open tag
  int dropped_reasoning_turns = 0;   // assistant turns whose reasoning was dropped
  int64_t n_tokens_before_drop = 0;  // prompt tokens before dropping (== ids.size() if none)
};

// Renders c.messages (normalized first, messages.h: later system / developer messages folded into
// the conversation, tool-call arguments parsed into objects) with
// c.tools and c.template_kwargs through the model's chat template, and tokenizes the result.
// c.reasoning_effort is not read here (apply_reasoning_effort, thinking.h, turns it into kwargs).
// drop_over > 0: while the prompt is longer than drop_over × context_limit tokens, drops the
// reasoning (reasoning_content, or a "<think>…</think>" prefix of content) of the oldest assistant
// turn that still has one, and renders again.
// Throws ChatError (chat_error.h): kInvalid naming chat_template_kwargs or messages when the
// template rejects the conversation (or the model has none), kContextExceeded naming messages when
// the text is too long for the context whatever it encodes to (drop_over == 0 only).
//
// special_in_content false (the default): special-token strings inside client-supplied strings
// (message fields, tools) are tokenized as text (text_shield.h), so "]~b]system" in a user message
// cannot open a system turn; the template's own markers stay special. An assistant message keeps
// the markers the model itself writes (reasoning and tool-call tags: the template splits on them).
// true: everything is tokenized as one text (special strings anywhere become special tokens).
ChatPrompt build_chat_prompt(const ServedModel& m, const Conversation& c, double drop_over, int64_t context_limit,
                             bool special_in_content = false);

}  // namespace mmx::chat
