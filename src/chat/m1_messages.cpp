#include "chat/m1_messages.h"

#include <map>
#include <string>

#include "chat/value_typing.h"

namespace mmx::chat {

namespace {

using ojson = nlohmann::ordered_json;

std::string text_of(const ojson& content) {
  if (content.is_string()) return content.get<std::string>();
  return "";  // null (an assistant turn with only tool calls) or another scalar: no text
}

ojson text_parts(const std::string& text) {
  return ojson::array({ojson{{"type", "text"}, {"text", text}}});
}

// One M1 tool-call line: {"name": f, "arguments": {...}} (arguments parsed when a JSON string).
std::string call_line(const ojson& call) {
  const ojson& f = call.contains("function") && call["function"].is_object() ? call["function"] : call;
  ojson line = ojson::object();
  line["name"] = f.contains("name") ? f["name"] : ojson("");
  ojson args = f.contains("arguments") ? f["arguments"] : ojson::object();
  if (args.is_string()) {
    ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) args = std::move(parsed);
  }
  line["arguments"] = std::move(args);
  return dump_py(line);  // {"name": "f", "arguments": {"k": "v"}}, as the model writes it
}

}  // namespace

bool template_reads_m1_messages(std::string_view template_source) {
  return template_source.find("['content'][0]['text']") != std::string_view::npos;
}

ojson to_m1_messages(const ojson& messages) {
  if (!messages.is_array()) return messages;
  std::map<std::string, std::string> call_names;  // tool_call id -> function name
  ojson out = ojson::array();
  for (const ojson& in : messages) {
    if (!in.is_object()) {
      out.push_back(in);
      continue;
    }
    ojson m = in;
    const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    const bool has_parts = m.contains("content") && m["content"].is_array();
    if (role == "assistant") {
      std::string text;
      if (m.contains("reasoning_content") && m["reasoning_content"].is_string() &&
          !m["reasoning_content"].get<std::string>().empty())
        text += "<think>" + m["reasoning_content"].get<std::string>() + "</think>\n";
      ojson parts = has_parts ? m["content"] : text_parts(text_of(m.value("content", ojson())));
      if (!has_parts && !text.empty()) parts[0]["text"] = text + parts[0]["text"].get<std::string>();
      if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
        std::string block = "<tool_calls>\n";
        for (const ojson& call : m["tool_calls"]) {
          if (!call.is_object()) continue;
          block += call_line(call) + "\n";
          const ojson& f = call.contains("function") && call["function"].is_object() ? call["function"] : call;
          if (call.contains("id") && call["id"].is_string() && f.contains("name") && f["name"].is_string())
            call_names[call["id"].get<std::string>()] = f["name"].get<std::string>();
        }
        block += "</tool_calls>";
        parts.push_back(ojson{{"type", "text"}, {"text", block}});
      }
      m["content"] = std::move(parts);
    } else if (role == "tool") {
      if (!has_parts) {
        std::string name;
        if (m.contains("name") && m["name"].is_string()) name = m["name"].get<std::string>();
        else if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
          const auto it = call_names.find(m["tool_call_id"].get<std::string>());
          if (it != call_names.end()) name = it->second;
        }
        m["content"] = ojson::array(
            {ojson{{"type", "text"}, {"name", name}, {"text", text_of(m.value("content", ojson()))}}});
      }
    } else if (!has_parts) {
      m["content"] = text_parts(text_of(m.value("content", ojson())));
    } else {  // the template reads only content[0]['text']: the text parts joined into that one
      std::string text;
      for (const ojson& p : m["content"])
        if (p.is_string()) text += p.get<std::string>();
        else if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
      m["content"] = text_parts(text);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace mmx::chat
