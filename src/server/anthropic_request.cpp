// Anthropic Messages request -> OpenAI chat body -> ChatRequest (anthropic_request.h).
#include "server/anthropic_request.h"

#include <algorithm>

#include "server/anthropic_controls.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace mmx::server {

namespace {

bool given(const ojson& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

std::string where_of(size_t i, size_t k) {
  return "messages[" + std::to_string(i) + "].content[" + std::to_string(k) + "]";
}

// The text of a `text` block; 400 when it is not {type: text, text: string, ...}.
// Its other fields: `cache_control` (no effect: our prefix cache is automatic) and `citations`
// (what an earlier reply cited: the text is what the model reads); any other is a 400 naming it,
// never ignored (e.g. a per-block `output_config`, which we do not apply per turn).
std::string text_of(const ojson& block, const std::string& where, const char* param) {
  if (!block.contains("text") || !block["text"].is_string())
    bad_request(where + ".text must be a string", param);
  for (const auto& [k, v] : block.items())
    if (k != "type" && k != "text" && k != "cache_control" && k != "citations" && !v.is_null())
      bad_request(where + "." + k + " is not a field of a text block that this server knows", param);
  return block["text"].get<std::string>();
}

// The types this server cannot read, each with the reason the 400 gives.
[[noreturn]] void refuse_block(const std::string& type, const std::string& where, const char* param) {
  if (type == "image" || type == "document")
    bad_request(where + " is an '" + type + "' block: this server reads text only (send the content as text)", param);
  if (type == "redacted_thinking")
    bad_request(where + " is a 'redacted_thinking' block: unsupported (this server never redacts thinking, so it "
                        "cannot have produced one; drop it or send the 'thinking' block)", param);
  bad_request(where + " has type '" + type + "', which is not supported here", param);
}

std::string block_type(const ojson& block, const std::string& where, const char* param) {
  if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
    bad_request(where + " must be a content block object with a 'type'", param);
  return block["type"].get<std::string>();
}

// A string, or a non-empty list of text blocks joined by blank lines.
std::string string_or_text_blocks(const ojson& v, const std::string& where, const char* param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_request(where + " must be a string or a list of text blocks", param);
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string w = where + "[" + std::to_string(k) + "]";
    const std::string type = block_type(v[k], w, param);
    if (type != "text") refuse_block(type, w, param);
    if (k > 0) out += "\n\n";
    out += text_of(v[k], w, param);
  }
  return out;
}

// One user message: text blocks -> user messages, tool_result blocks -> tool messages, in order.
// `lead`: text that goes before its first block (folded system messages), "" for none.
void convert_user(const ojson& content, size_t i, ojson& out, const std::string& lead) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", lead.empty() ? content.get<std::string>()
                                                              : lead + "\n\n" + content.get<std::string>()}});
    return;
  }
  std::string text = lead;
  bool has_text = !lead.empty();
  auto flush = [&] {
    if (has_text) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& b = content[k];
    const std::string w = where_of(i, k);
    const std::string type = block_type(b, w, "messages");
    if (type == "text") {
      if (has_text) text += "\n\n";
      text += text_of(b, w, "messages");
      has_text = true;
    } else if (type == "tool_result") {
      flush();
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
        bad_request(w + ".tool_use_id must be a string", "messages");
      std::string result;
      if (given(b, "content")) result = string_or_text_blocks(b["content"], w + ".content", "messages");
      if (given(b, "is_error")) {
        if (!b["is_error"].is_boolean()) bad_request(w + ".is_error must be a boolean", "messages");
        if (b["is_error"].get<bool>()) result = "Error: " + result;
      }
      // As Anthropic's API: a result answers a tool_use of an earlier assistant turn (the chat
      // template would otherwise fail with a message of its own).
      const auto answers = [&](const ojson& m) {
        if (m.value("role", "") != "assistant" || !m.contains("tool_calls")) return false;
        for (const ojson& c : m["tool_calls"])
          if (c.value("id", "") == b["tool_use_id"].get<std::string>()) return true;
        return false;
      };
      if (std::none_of(out.begin(), out.end(), answers))
        bad_request(w + " is a tool_result for '" + b["tool_use_id"].get<std::string>() +
                        "', but no earlier assistant message has a tool_use with that id", "messages");
      out.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
    } else if (type == "thinking" || type == "tool_use") {
      bad_request(w + " is a '" + type + "' block, which only an assistant message can hold", "messages");
    } else {
      refuse_block(type, w, "messages");
    }
  }
  flush();
}

// One assistant message: thinking -> reasoning_content, text -> content, tool_use -> tool_calls.
void convert_assistant(const ojson& content, size_t i, ojson& out) {
  ojson m = {{"role", "assistant"}};
  if (content.is_string()) {
    m["content"] = content;
    out.push_back(m);
    return;
  }
  std::string text, reasoning;
  ojson calls = ojson::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& b = content[k];
    const std::string w = where_of(i, k);
    const std::string type = block_type(b, w, "messages");
    if (type == "text") {
      text += text_of(b, w, "messages");
    } else if (type == "thinking") {  // its signature is accepted and ignored
      if (!b.contains("thinking") || !b["thinking"].is_string())
        bad_request(w + ".thinking must be a string", "messages");
      reasoning += b["thinking"].get<std::string>();
    } else if (type == "tool_use") {
      if (!b.contains("id") || !b["id"].is_string()) bad_request(w + ".id must be a string", "messages");
      if (!b.contains("name") || !b["name"].is_string()) bad_request(w + ".name must be a string", "messages");
      if (!b.contains("input") || !b["input"].is_object()) bad_request(w + ".input must be an object", "messages");
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}});
    } else if (type == "tool_result") {
      bad_request(w + " is a 'tool_result' block, which only a user message can hold", "messages");
    } else {
      refuse_block(type, w, "messages");
    }
  }
  m["content"] = text;
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = calls;
  out.push_back(m);
}

// A system message inside `messages` (Claude Code's mid-conversation system turns) as the text
// Claude Code itself puts in a user turn for the harness: the chat templates render a system
// message only as the first message, and would drop it anywhere else.
std::string system_reminder(const std::string& text) { return "<system-reminder>\n" + text + "\n</system-reminder>"; }

// Appends text to the user turn just converted: to its last user message, or as a user message
// after its tool results (what one more text block at its end would have become).
void append_user_text(ojson& out, const std::string& text) {
  ojson& last = out.back();
  if (last["role"] == "user") last["content"] = last["content"].get<std::string>() + "\n\n" + text;
  else out.push_back({{"role", "user"}, {"content", text}});
}

// messages (+ the top-level system) -> OpenAI messages. A system message is folded into the user
// turn before it when it follows one, else into the next user turn (before its blocks); with
// neither (it is last after an assistant turn, or before one) it becomes a user message of its own.
ojson convert_messages(const ojson& b) {
  ojson out = ojson::array();
  std::string pending;      // folded system text waiting for the next user turn
  bool after_user = false;  // the last message converted was a user turn
  if (given(b, "system")) out.push_back({{"role", "system"}, {"content", string_or_text_blocks(b["system"], "system", "system")}});
  if (!b.contains("messages")) bad_request("'messages' is required", "messages");
  const ojson& msgs = b["messages"];
  if (!msgs.is_array() || msgs.empty()) bad_request("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& m = msgs[i];
    const std::string w = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_request(w + " must be an object", "messages");
    for (const auto& [k, v] : m.items())
      if (k != "role" && k != "content") bad_request(w + "." + k + " is not a field of a message", "messages");
    if (!m.contains("role") || !m["role"].is_string()) bad_request(w + ".role must be a string", "messages");
    const std::string role = m["role"].get<std::string>();
    if (!m.contains("content") || !(m["content"].is_string() || m["content"].is_array()))
      bad_request(w + ".content must be a string or a list of content blocks", "messages");
    if (role == "system") {
      const std::string text = system_reminder(string_or_text_blocks(m["content"], w + ".content", "messages"));
      if (after_user) append_user_text(out, text);
      else pending += (pending.empty() ? "" : "\n\n") + text;
    } else if (role == "user") {
      convert_user(m["content"], i, out, pending);
      pending.clear();
      after_user = true;
    } else if (role == "assistant") {
      if (!pending.empty()) out.push_back({{"role", "user"}, {"content", pending}});
      pending.clear();
      convert_assistant(m["content"], i, out);
      after_user = false;
    } else {
      bad_request(w + ".role '" + role + "' is not one of user, assistant, system", "messages");
    }
  }
  if (!pending.empty()) out.push_back({{"role", "user"}, {"content", pending}});
  return out;
}

ojson convert_tools(const ojson& tools) {
  if (!tools.is_array()) bad_request("'tools' must be an array", "tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) bad_request(w + " must be an object", "tools");
    if (given(t, "type") && t["type"] != "custom")
      bad_request(w + " has type " + t["type"].dump() + ": only client tools (no type, or \"custom\") are supported; "
                  "this server runs no server tools", "tools");
    bool deferred = false;
    for (const auto& [k, v] : t.items()) {
      if (k == "name" || k == "description" || k == "input_schema" || k == "type" || k == "cache_control") continue;
      // eager_input_streaming: input always streams as the model writes it (docs/api.md); strict:
      // a forced call is always schema-valid, an unforced one is parsed by the schema's types.
      if (k == "eager_input_streaming" || k == "strict" || k == "defer_loading") {
        if (!v.is_null() && !v.is_boolean()) bad_request(w + "." + k + " must be a boolean", "tools");
        if (k == "defer_loading") deferred = v == true;
        continue;
      }
      bad_request(w + "." + k + " is not supported", "tools");
    }
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get<std::string>().empty())
      bad_request(w + ".name must be a non-empty string", "tools");
    if (!t.contains("input_schema") || !t["input_schema"].is_object())
      bad_request(w + ".input_schema must be a JSON schema object", "tools");
    ojson fn = {{"name", t["name"]}};  // in the order the template prints them: name, description, parameters
    if (given(t, "description")) {
      if (!t["description"].is_string()) bad_request(w + ".description must be a string", "tools");
      fn["description"] = t["description"];
    }
    fn["parameters"] = t["input_schema"];
    // defer_loading: not in the prompt until tool search loads it, which this server has no
    // tool_reference expansion for: the tool is left out (the model cannot see it to call it).
    if (!deferred) out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

// {type: auto | none | any | tool (+ name)} -> the OpenAI value; one_call: disable_parallel_tool_use.
ojson convert_tool_choice(const ojson& tc, bool& one_call) {
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    bad_request("'tool_choice' must be an object {\"type\": \"auto\" | \"none\" | \"any\" | \"tool\"}", "tool_choice");
  const std::string type = tc["type"].get<std::string>();
  for (const auto& [k, v] : tc.items()) {
    if (k == "type" || (k == "name" && type == "tool")) continue;
    if (k == "disable_parallel_tool_use" && type != "none") {
      if (!v.is_boolean()) bad_request("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice");
      one_call = v.get<bool>();  // the reply ends after its first tool call (anthropic_route.cpp)
      continue;
    }
    bad_request("'tool_choice." + k + "' is not a field of a \"" + type + "\" tool_choice", "tool_choice");
  }
  if (type == "auto" || type == "none") return type;
  if (type == "any") return "required";
  if (type == "tool") {
    if (!tc.contains("name") || !tc["name"].is_string())
      bad_request("'tool_choice' {\"type\": \"tool\"} needs a 'name'", "tool_choice");
    return {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  }
  bad_request("'tool_choice.type' must be \"auto\", \"none\", \"any\" or \"tool\"", "tool_choice");
}

}  // namespace


MessagesRequest parse_messages_request(const ojson& b, const chat::ServedModel& model, bool count_tokens) {
  check_fields(b, count_tokens ? Endpoint::kCountTokens : Endpoint::kMessages);
  ojson chat = ojson::object();
  if (given(b, "model")) chat["model"] = b["model"];
  else bad_request("'model' is required", "model");
  if (!count_tokens) {
    if (!given(b, "max_tokens")) bad_request("'max_tokens' is required", "max_tokens");
    chat["max_tokens"] = b["max_tokens"];
    if (given(b, "stream")) chat["stream"] = b["stream"];
  }
  chat["messages"] = convert_messages(b);
  if (given(b, "temperature")) {  // Anthropic's range is [0, 1]; the rest is checked by the chat parser
    const ojson& t = b["temperature"];
    if (t.is_number() && (t.get<double>() < 0 || t.get<double>() > 1))
      bad_request("'temperature' must be in [0, 1]", "temperature");
    chat["temperature"] = t;
  }
  for (const char* k : {"top_p", "top_k"})
    if (given(b, k)) chat[k] = b[k];
  if (given(b, "stop_sequences")) {
    if (!b["stop_sequences"].is_array()) bad_request("'stop_sequences' must be a list of strings", "stop_sequences");
    chat["stop"] = b["stop_sequences"];
  }
  if (given(b, "metadata")) {
    const ojson& md = b["metadata"];
    if (!md.is_object()) bad_request("'metadata' must be an object", "metadata");
    for (const auto& [k, v] : md.items())
      if (k != "user_id" || !(v.is_string() || v.is_null()))
        bad_request("'metadata' takes only 'user_id' (a string)", "metadata");
  }
  MessagesRequest r;
  if (given(b, "tools")) chat["tools"] = convert_tools(b["tools"]);
  if (given(b, "tool_choice")) chat["tool_choice"] = convert_tool_choice(b["tool_choice"], r.one_tool_call);
  const ReasoningControls rc = parse_reasoning_controls(b, model, count_tokens);
  if (!rc.template_kwargs.is_null()) chat["chat_template_kwargs"] = rc.template_kwargs;
  if (!rc.response_format.is_null()) chat["response_format"] = rc.response_format;
  const ContextEdits edits = parse_context_management(b);
  r.context_management = edits.given;
  ojson before_edits;
  if (edits.keep_thinking_turns >= 0) before_edits = chat["messages"];
  r.cleared_thinking_turns = clear_thinking(chat["messages"], edits.keep_thinking_turns);
  if (r.cleared_thinking_turns > 0) r.messages_before_edits = std::move(before_edits);
  try {
    r.chat = parse_chat_request(chat, model.sampling);
  } catch (const ApiError& e) {
    // The chat parser names OpenAI's spelling of two fields: say which Anthropic field it was.
    if (e.param == "stop") throw ApiError(e.status, std::string(e.what()) + " (from 'stop_sequences')", "stop_sequences");
    if (e.param == "tool_choice" && given(b, "tool_choice"))
      throw ApiError(e.status, "'tool_choice' " + b["tool_choice"].dump() + ": " + e.what(), "tool_choice", e.code);
    if (e.param == "response_format") throw ApiError(e.status, std::string(e.what()) + " (from 'output_config.format')", "output_config", e.code);
    throw;
  }
  r.thinking_budget = rc.thinking_budget;
  r.omit_thinking = rc.omit_thinking;
  return r;
}

}  // namespace mmx::server
