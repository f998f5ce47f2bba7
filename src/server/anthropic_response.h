// Anthropic Messages API response shapes: the whole message, the streamed event sequence and
// the error body. Pure functions of what the route accumulated (anthropic_route.cpp).
//
//   message  {id: "msg_…", type: "message", role: "assistant", model,
//             content: [thinking?, text?, tool_use*], stop_reason, stop_sequence, usage,
//             context_management?}
//   stream   message_start, then per block content_block_start / content_block_delta
//            (thinking_delta, text_delta, input_json_delta) / content_block_stop,
//            message_delta {stop_reason, stop_sequence, usage}, message_stop; ping as keep-alive
//   error    {"type": "error", "error": {"type": "invalid_request_error" | ..., "message"}}: written by
//            error_json (api_error.h), the one place that picks an error's shape
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "server/api_error.h"

namespace mmx::server {

using json = nlohmann::ordered_json;

// "event: NAME\ndata: {json}\n\n".
std::string anthropic_sse(const std::string& event, const json& data);

// finish_reason (generation.h) -> stop_reason: "tool_calls" -> "tool_use", "length" ->
// "max_tokens", "stop" -> "stop_sequence" when a stop string ended it, else "end_turn".
std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_string);

// A tool call's id as Anthropic spells it ("call_…" -> "toolu_…").
std::string tool_use_id(const std::string& call_id);

// The `input` of a tool_use block: the arguments' JSON object (a non-object value, which an M1
// model may write, is wrapped as {"arguments": value}; text that is not JSON as {"arguments": text}).
json tool_use_input(const std::string& arguments_json);

struct MessageUsage {
  int64_t input = 0, output = 0, cache_read = 0;  // input counts the prompt tokens not read from cache
};
json anthropic_usage_json(const MessageUsage& u);

// `context_management` of a response: {applied_edits: [{type: clear_thinking_20251015,
// cleared_thinking_turns, cleared_input_tokens}]} (the edit listed only when it cleared a turn).
json anthropic_context_management(int64_t cleared_thinking_turns, int64_t cleared_input_tokens);

// The non-streaming response. omit_thinking (thinking.display "omitted"): a thinking block with
// empty text stands for the reasoning; context_management (null: not sent) is added at the end.
json anthropic_message(const std::string& id, const std::string& model, const std::string& reasoning,
                       const std::string& text, const std::vector<chat::ToolCall>& calls,
                       const std::string& stop_reason, const std::string& stop_sequence, const MessageUsage& usage,
                       bool omit_thinking = false, const json& context_management = nullptr);

// The streamed events of one message, block by block. A block opens on the first piece of its
// kind and closes when another kind starts (or at the end): thinking, text and tool_use blocks
// get indices 0, 1, 2, … in the order they open.
// omit_thinking: a thinking block opens and closes where the reasoning is, with no thinking_delta.
class MessageEvents {
 public:
  explicit MessageEvents(bool omit_thinking = false) : omit_thinking_(omit_thinking) {}
  std::string start(const std::string& id, const std::string& model, int64_t input_tokens);
  // One parsed delta: reasoning first, then text, then tool-call pieces.
  std::string delta(const chat::ParsedDelta& d);
  // context_management (null: not sent) goes into message_delta.
  std::string finish(const std::string& stop_reason, const std::string& stop_sequence, const MessageUsage& usage,
                     const json& context_management = nullptr);

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  std::string open(Block kind, const json& content_block);
  std::string close();
  bool omit_thinking_ = false;
  Block open_ = Block::kNone;
  int index_ = -1;        // the open (or last) block's index
  size_t tool_call_ = 0;  // the parser's index of the open tool_use block
};

}  // namespace mmx::server
