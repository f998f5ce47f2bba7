// The Anthropic request fields that steer reasoning and edit the context, for
// parse_messages_request (anthropic_request.h): `thinking`, `output_config` and
// `context_management` (docs/api.md, "/v1/messages", has the table of what each value does).
//
//   thinking {type: enabled (budget_tokens) | adaptive | disabled, display: summarized | omitted}
//   output_config {effort: low | medium | high | xhigh | max, format: {type: json_schema, schema}}
//       -> the template's reasoning switch (chat/thinking.h's thinking_control), the thinking budget,
//          whether thinking text is shown, a json_schema response_format
//   context_management {edits: [{type: clear_thinking_20251015, keep}]}
//       -> which earlier assistant turns lose their reasoning before rendering (clear_thinking);
//          any other edit is 400 naming it
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/served_model.h"

namespace mmx::server {

using ojson = nlohmann::ordered_json;

struct ReasoningControls {
  ojson template_kwargs;           // {switch: value} for the chat template, or null (switch untouched)
  int64_t thinking_budget = -1;    // thinking.budget_tokens; -1: none
  bool omit_thinking = false;      // thinking.display "omitted": thinking blocks carry no text
  ojson response_format;           // output_config.format as the chat route's response_format, or null
};

// `thinking` and `output_config` of body b. Throws ApiError 400 naming the field.
ReasoningControls parse_reasoning_controls(const ojson& b, const chat::ServedModel& model, bool count_tokens);

// context_management: the number of most recent assistant turns whose reasoning is kept (-1: all,
// also when the field is absent) and whether the field was given (the response then reports the
// edits applied). Throws ApiError 400 naming an edit it cannot apply.
struct ContextEdits {
  bool given = false;
  int64_t keep_thinking_turns = -1;
};
ContextEdits parse_context_management(const ojson& b);

// Drops reasoning_content from every assistant message of the OpenAI-shaped `messages` but the
// last `keep` ones that carry reasoning; returns how many lost it (0 when keep < 0).
int64_t clear_thinking(ojson& messages, int64_t keep);

}  // namespace mmx::server
