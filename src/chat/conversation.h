// A conversation as the model sees it, before rendering: the messages so far, the tools the model
// may call, the chat template's variables and the reasoning switch. Built by the server from an
// OpenAI or Anthropic body (server/request.h, server/anthropic_request.h), by `mmx chat` from its
// history and, next, by RL rollouts; rendered by build_chat_prompt (prompt.h) and prepared for the
// engine by prepare_turn (turn.h). Not here: sampling, limits, HTTP fields (turn.h's TurnOptions
// has the first two; the third stays in server/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mmx::chat {

using ojson = nlohmann::ordered_json;

struct Conversation {
  ojson messages = ojson::array();    // [{role, content, ...}]; tool-call arguments as JSON strings or objects
  ojson tools;                        // OpenAI function tools (array), or null for none
  std::string tool_choice = "auto";   // "auto" | "none" | "required" | "function" (forced_tool)
  std::string forced_tool;            // the named tool of tool_choice "function"
  ojson template_kwargs;              // extra chat-template variables (object), or null
  std::string reasoning_effort;       // "" | none | minimal | low | medium | high | xhigh (thinking.h maps it)
};

}  // namespace mmx::chat
