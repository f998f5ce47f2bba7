// JSON shapes of OpenAI responses (non-streaming objects and streaming chunks). Pure functions
// of their inputs; the routes decide what to send when.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "engine/engine_api.h"
#include "tokenizer/tokenizer.h"

namespace mmx::server {

using json = nlohmann::ordered_json;

// Chat logprobs entries: [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}].
json chat_logprobs_content(const tok::Tokenizer& tok, const std::vector<GenEvent>& tokens);

// Legacy completions logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
// text_offset: running byte offset of the choice's text, advanced past these tokens.
json completion_logprobs(const tok::Tokenizer& tok, const std::vector<GenEvent>& tokens, int top_n,
                         int64_t& text_offset);

// [{"index": first_index + k, "id", "type": "function", "function": {"name", "arguments"}}].
json tool_calls_json(const std::vector<chat::ToolCall>& calls, int first_index);

// Streamed pieces as a chunk's delta.tool_calls: a call's first piece is {"index", "id", "type":
// "function", "function": {"name", "arguments"}}, later ones {"index", "function": {"arguments"}}.
json tool_call_deltas_json(const std::vector<chat::ToolCallDelta>& pieces);

struct UsageInfo {
  int64_t prompt = 0, completion = 0, cached = 0;
  bool report_drop = false;               // --drop-reasoning-over is on
  int64_t dropped_turns = 0, prompt_before_drop = 0;
};
json usage_json(const UsageInfo& u);

// One element of a chunk's "choices" array.
json chat_chunk_choice(int index, json delta, json logprobs, const std::string& finish_reason);

// An SSE event: "data: <json>\n\n".
std::string sse(const json& j);

}  // namespace mmx::server
