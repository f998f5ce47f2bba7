#include "chat/messages.h"

#include <string>

#include "base/json_nesting.h"
#include "chat/chat_error.h"

namespace mmx::chat {

namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxArgumentsDepth = 64;  // as the server's body limit (it is parsed, copied and rendered recursively)

std::string role_of(const ojson& m) {
  return m.is_object() && m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
}

bool is_system(const ojson& m) {
  const std::string r = role_of(m);
  return r == "system" || r == "developer";
}

// The text of a content value: a string, or the text parts (and bare strings) of a list, joined
// as the templates join them (no separator).
std::string text_of(const ojson& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const ojson& p : content) {
      if (p.is_string()) out += p.get<std::string>();
      else if (p.is_object() && p.value("type", "") == "text" && p.contains("text") && p["text"].is_string())
        out += p["text"].get<std::string>();
    }
  return out;
}

// `prefix` + "\n\n" before the user content (a string, or a list whose first text part gets it).
void prepend(ojson& user, const std::string& prefix) {
  ojson& c = user["content"];
  if (c.is_array()) {
    for (ojson& p : c)
      if (p.is_object() && p.value("type", "") == "text" && p.contains("text") && p["text"].is_string()) {
        p["text"] = prefix + "\n\n" + p["text"].get<std::string>();
        return;
      }
    c.insert(c.begin(), ojson{{"type", "text"}, {"text", prefix + "\n\n"}});
    return;
  }
  c = prefix + "\n\n" + (c.is_string() ? c.get<std::string>() : std::string());
}

// Arguments of every assistant tool call -> a JSON object (messages.h).
void parse_arguments(ojson& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    ojson& m = messages[i];
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (size_t j = 0; j < m["tool_calls"].size(); ++j) {
      ojson& call = m["tool_calls"][j];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ojson& fn = call["function"];
      const std::string where =
          "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(j) + "].function.arguments";
      if (!fn.contains("arguments") || fn["arguments"].is_null()) {
        fn["arguments"] = ojson::object();
        continue;
      }
      ojson& a = fn["arguments"];
      if (a.is_object()) continue;
      if (!a.is_string()) invalid(where + " must be a JSON object or a string holding one", "messages");
      const std::string& text = a.get_ref<const std::string&>();
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        a = ojson::object();  // "" : a call without parameters
        continue;
      }
      if (json_nesting_depth(text) > kMaxArgumentsDepth)
        invalid(where + " is nested deeper than " + std::to_string(kMaxArgumentsDepth) + " levels", "messages");
      ojson parsed = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded())
        invalid(where + " is not valid JSON (it must be a JSON object, e.g. \"{}\")", "messages");
      if (!parsed.is_object())
        invalid(where + " must be a JSON object, got " + (text.size() > 40 ? text.substr(0, 40) + "..." : text),
                "messages");
      a = std::move(parsed);
    }
  }
}

}  // namespace

ojson normalize_messages(const ojson& in) {
  if (!in.is_array()) return in;
  ojson messages = in;
  parse_arguments(messages);  // before folding: the indices in messages are the client's
  // A tool result answers a tool call of an earlier assistant message (every template renders it
  // inside that call's turn; M2's fails with a message of its own without one).
  bool called = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string role = role_of(messages[i]);
    if (role == "assistant" && messages[i].contains("tool_calls") && messages[i]["tool_calls"].is_array() &&
        !messages[i]["tool_calls"].empty())
      called = true;
    if (role == "tool" && !called)
      invalid("messages[" + std::to_string(i) + "] is a tool result, but no earlier assistant message made a tool call",
              "messages");
  }
  ojson out = ojson::array();
  std::string pending;  // later system texts waiting for the message after them
  for (size_t i = 0; i < messages.size(); ++i) {
    ojson m = std::move(messages[i]);
    if (i == 0 && is_system(m)) {
      m["role"] = "system";
      out.push_back(std::move(m));
      continue;
    }
    if (is_system(m)) {
      const std::string text = text_of(m.value("content", ojson()));
      pending += (pending.empty() ? "" : "\n\n") + text;
      const bool user_next = i + 1 < messages.size() && role_of(messages[i + 1]) == "user";
      const bool system_next = i + 1 < messages.size() && is_system(messages[i + 1]);
      if (!user_next && !system_next) {
        out.push_back(ojson{{"role", "user"}, {"content", pending}});
        pending.clear();
      }
      continue;
    }
    if (!pending.empty()) {  // (only a user message follows a pending text)
      prepend(m, pending);
      pending.clear();
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace mmx::chat
