// Thinking controls: what a conversation may say about reasoning, mapped onto the family's chat
// template (spec: M3's thinking_mode enabled / adaptive / disabled; templates reading
// enable_thinking; M2's templates have no switch: it always reasons).
#pragma once

#include <string>

#include "chat/conversation.h"
#include "chat/served_model.h"

namespace mmx::chat {

// The template variable that switches reasoning: "thinking_mode", "enable_thinking", or "" (none).
std::string thinking_control(const ServedModel& model);

// OpenAI's reasoning_effort -> the template's switch, set in c.template_kwargs:
//   thinking_mode:   none / minimal -> "disabled", low -> "adaptive", medium / high / xhigh -> "enabled"
//   enable_thinking: none / minimal -> false, any other -> true
//   no switch (M2's templates: the model always reasons, at its own length): no effect. Accepted
//   as a stated no-op (docs/api.md), as clients send it by default and nothing can honour it.
// Throws ChatError kInvalid naming reasoning_effort when template_kwargs sets the same switch.
void apply_reasoning_effort(Conversation& c, const ServedModel& model);

}  // namespace mmx::chat
