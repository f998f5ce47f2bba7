// OpenAI Responses API request bodies (POST /v1/responses) -> the chat route's ChatRequest (step
// 1 of the data flow, before the shared prompt rendering), as anthropic_request.h does for
// /v1/messages.
//
// The conversion (docs/api.md, "OpenAI Responses API"):
//   instructions + the leading system / developer messages -> one system message first (joined
//       by blank lines: the M2 template reads only the first system message)
//   input: a string                       -> one user message
//   input items (type "message" or none)  -> user / assistant messages; a system / developer
//       message after the conversation began -> a user message (M2's template would drop it)
//       (content: a string or input_text / output_text / refusal parts)
//   reasoning, assistant message and function_call items in a row -> one assistant turn
//       (reasoning_content, content, tool_calls: the M2 template re-renders its thinking)
//   function_call_output                  -> a tool message (tool_call_id = call_id)
//   item_reference                        -> the kept item of that id (responses_store.h)
//   previous_response_id                  -> that response's whole conversation first
//   tools: function                       -> OpenAI function tools
//          namespace {name, tools}        -> its functions, offered as NAMESPACE__NAME
//                                            (flat_tool_name; the response maps calls back)
//          any other type (web_search, file_search, computer_use_preview, code_interpreter,
//          image_generation, local_shell, custom, mcp, ...) -> not offered to the model, listed
//          in the response's `mmx_ignored_tools`
//   tool_choice auto | none | required | {type: function, name} | {type: allowed_tools, ...}
//   max_output_tokens -> max_tokens; text.format json_schema / json_object -> response_format;
//   reasoning.effort -> reasoning_effort (see parse_responses_request)
// The result is an OpenAI chat body parsed by parse_chat_request, so every sampling range,
// tool_choice rule and tool check is the chat route's own.
//
// Every error is an ApiError 400 whose message names the field (input[3].content[0].type, ...).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "chat/served_model.h"
#include "server/request.h"
#include "server/responses_store.h"

namespace mmx::server {

// The name a namespaced function is offered under: "mcp__fs__" + "read" -> "mcp__fs__read",
// "multi_agent_v1" + "spawn_agent" -> "multi_agent_v1__spawn_agent" ("__" unless the namespace
// already ends with it, as Codex's MCP namespaces do).
std::string flat_tool_name(const std::string& ns, const std::string& name);

struct ResponsesRequest {
  ChatRequest chat;                // messages, tools, tool_choice, sampling, max_tokens, stream
  bool parallel_tool_calls = true;  // false: the response ends after the first tool call
  bool store = true;                // the API's default: kept for previous_response_id
  bool summary = false;             // reasoning.summary asked: the reasoning is also sent as its summary
  std::string previous_response_id;
  std::map<std::string, std::pair<std::string, std::string>> namespaced;  // flat name -> {namespace, name}
  ojson ignored_tools = ojson::array();  // [{type, name?}]: tools given and not offered to the model
  ojson conversation = ojson::array();   // the turn's items so far, input-item form (what `store` keeps)
  ojson echo = ojson::object();          // request fields the response object repeats
};

// `store` resolves previous_response_id and item_reference (400 when one is not kept).
ResponsesRequest parse_responses_request(const ojson& body, const chat::ServedModel& model, ResponseStore& store);

}  // namespace mmx::server
