// Anthropic Messages API request bodies (POST /v1/messages, /v1/messages/count_tokens) -> the
// chat route's ChatRequest (step 1 of the data flow, before the shared prompt rendering).
//
// The conversion (docs/api.md, "Anthropic Messages API"):
//   system (string or text blocks)      -> a system message
//   user text blocks                     -> a user message; tool_result blocks -> tool messages
//                                           (tool_call_id = tool_use_id; is_error prefixes "Error: ")
//   assistant thinking / text / tool_use -> reasoning_content / content / tool_calls (arguments =
//                                           the JSON of `input`)
//   tools {name, description, input_schema} -> OpenAI function tools
//   tool_choice auto | none | any | {tool, name} -> "auto" | "none" | "required" | a named function
//   role "system" messages               -> folded into the adjacent user turn as <system-reminder> text
//   stop_sequences -> stop; thinking, output_config, context_management -> anthropic_controls.h
// The result is an OpenAI chat body parsed by parse_chat_request, so every sampling range,
// tool_choice rule and tool check is the chat route's own (one place: forcing a tool call flips
// on for both routes when constrained decoding lands).
//
// Every error is an ApiError 400 whose message names the field; the route sends it in
// Anthropic's error shape (anthropic_response.h).
#pragma once

#include <string>

#include "server/request.h"
#include "chat/served_model.h"
#include "chat/thinking.h"

namespace mmx::server {

struct MessagesRequest {
  ChatRequest chat;  // messages, tools, tool_choice, sampling, max_tokens, stop, stream, kwargs
  int64_t thinking_budget = -1;  // thinking.budget_tokens (-1: not given): reasoning tokens at most
  bool omit_thinking = false;    // thinking.display "omitted": thinking blocks without their text
  bool one_tool_call = false;    // tool_choice.disable_parallel_tool_use: the reply ends after one call
  bool context_management = false;     // given: the response reports the edits applied
  int64_t cleared_thinking_turns = 0;  // assistant turns whose reasoning clear_thinking dropped
  ojson messages_before_edits;         // chat.messages before that (null when nothing was cleared)
};

// count_tokens: the /v1/messages/count_tokens body (no max_tokens, no stream).
MessagesRequest parse_messages_request(const ojson& body, const chat::ServedModel& model, bool count_tokens = false);


}  // namespace mmx::server
