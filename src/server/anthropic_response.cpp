#include "server/anthropic_response.h"

namespace mmx::server {

std::string anthropic_sse(const std::string& event, const json& data) {
  // Never throws inside a stream: invalid UTF-8 (which cannot reach here) would be replaced.
  return "event: " + event + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_string) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  if (!stop_string.empty()) return "stop_sequence";
  return "end_turn";
}

std::string tool_use_id(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}

json tool_use_input(const std::string& arguments_json) {
  json v = json::parse(arguments_json, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return {{"arguments", arguments_json}};
  if (!v.is_object()) return {{"arguments", v}};
  return v;
}

json anthropic_usage_json(const MessageUsage& u) {
  return {{"input_tokens", u.input},
          {"output_tokens", u.output},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cache_read}};
}

json anthropic_context_management(int64_t cleared_thinking_turns, int64_t cleared_input_tokens) {
  json edits = json::array();
  if (cleared_thinking_turns > 0)
    edits.push_back({{"type", "clear_thinking_20251015"},
                     {"cleared_thinking_turns", cleared_thinking_turns},
                     {"cleared_input_tokens", cleared_input_tokens}});
  return {{"applied_edits", edits}};
}

json anthropic_message(const std::string& id, const std::string& model, const std::string& reasoning,
                       const std::string& text, const std::vector<chat::ToolCall>& calls,
                       const std::string& stop_reason, const std::string& stop_sequence, const MessageUsage& usage,
                       bool omit_thinking, const json& context_management) {
  json content = json::array();
  if (!reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", omit_thinking ? "" : reasoning}, {"signature", ""}});
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (const chat::ToolCall& c : calls)
    content.push_back({{"type", "tool_use"}, {"id", tool_use_id(c.id)}, {"name", c.name}, {"input", tool_use_input(c.arguments_json)}});
  json m = {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", content},
            {"stop_reason", stop_reason},
            {"stop_sequence", stop_sequence.empty() ? json(nullptr) : json(stop_sequence)},
            {"usage", anthropic_usage_json(usage)}};
  if (!context_management.is_null()) m["context_management"] = context_management;
  return m;
}

std::string MessageEvents::start(const std::string& id, const std::string& model, int64_t input_tokens) {
  json msg = {{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", anthropic_usage_json({input_tokens, 0, 0})}};
  return anthropic_sse("message_start", {{"type", "message_start"}, {"message", msg}});
}

std::string MessageEvents::close() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  return anthropic_sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string MessageEvents::open(Block kind, const json& content_block) {
  std::string out = close();
  open_ = kind;
  ++index_;
  out += anthropic_sse("content_block_start",
                       {{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
  return out;
}

std::string MessageEvents::delta(const chat::ParsedDelta& d) {
  std::string out;
  auto send = [&](const json& delta) {
    out += anthropic_sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  };
  if (!d.reasoning.empty()) {
    if (open_ != Block::kThinking) out += open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    if (!omit_thinking_) send({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) out += open(Block::kText, {{"type", "text"}, {"text", ""}});
    send({{"type", "text_delta"}, {"text", d.content}});
  }
  for (const chat::ToolCallDelta& p : d.tool_call_deltas) {
    if (!p.id.empty()) {  // a call's first piece opens its block
      out += open(Block::kToolUse, {{"type", "tool_use"}, {"id", tool_use_id(p.id)}, {"name", p.name}, {"input", json::object()}});
      tool_call_ = p.index;
    }
    if (open_ == Block::kToolUse && p.index == tool_call_ && !p.arguments.empty())
      send({{"type", "input_json_delta"}, {"partial_json", p.arguments}});
  }
  return out;
}

std::string MessageEvents::finish(const std::string& stop_reason, const std::string& stop_sequence,
                                  const MessageUsage& usage, const json& context_management) {
  std::string out = close();
  json md = {{"type", "message_delta"},
             {"delta", {{"stop_reason", stop_reason},
                        {"stop_sequence", stop_sequence.empty() ? json(nullptr) : json(stop_sequence)}}},
             {"usage", anthropic_usage_json(usage)}};
  if (!context_management.is_null()) md["context_management"] = context_management;
  out += anthropic_sse("message_delta", md);
  out += anthropic_sse("message_stop", {{"type", "message_stop"}});
  return out;
}

}  // namespace mmx::server
