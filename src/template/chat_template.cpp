// ChatTemplate: the render context and template choice (see chat_template.h).
#include "template/chat_template.h"

#include <cctype>

#include "base/error.h"
#include "base/json_nesting.h"

namespace mmx {

ChatTemplate::ChatTemplate(const std::map<std::string, std::string>& templates, const json& config) {
  for (const auto& [name, src] : templates) templates_.emplace(name, jinja::Template(src));
  static const char* kSpecial[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                   "pad_token", "cls_token", "mask_token"};
  if (config.is_object()) {
    for (const char* key : kSpecial) {
      if (!config.contains(key)) continue;
      const json& t = config[key];
      std::string content;
      if (t.is_string())
        content = t.get<std::string>();
      else if (t.is_object() && t.contains("content") && t["content"].is_string())
        content = t["content"].get<std::string>();
      else
        continue;
      special_tokens_[key] = content;
    }
  }
  if (special_tokens_.contains("bos_token")) bos_token_ = special_tokens_["bos_token"].get<std::string>();
  if (special_tokens_.contains("eos_token")) eos_token_ = special_tokens_["eos_token"].get<std::string>();
}

std::vector<std::string> ChatTemplate::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : templates_) out.push_back(name);
  return out;
}

const std::string& ChatTemplate::source(const std::string& name) const {
  auto it = templates_.find(name);
  if (it == templates_.end()) fail("no chat template named '{}'", name);
  return it->second.source();
}

const jinja::Template& ChatTemplate::pick(const json& tools, const std::string& name) const {
  if (!name.empty()) {
    auto it = templates_.find(name);
    if (it == templates_.end()) fail("no chat template named '{}'", name);
    return it->second;
  }
  if (!tools.is_null() && templates_.count("tool_use")) return templates_.at("tool_use");
  if (templates_.count("default")) return templates_.at("default");
  if (templates_.size() == 1) return templates_.begin()->second;
  fail("several chat templates and none named 'default'; choose one by name");
}

void ChatTemplate::check_kwargs(const json& extra_kwargs) const {
  if (!extra_kwargs.is_object()) return;
  static const char* kOwn[] = {"messages", "add_generation_prompt", "tools", "documents"};
  for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
    const std::string& k = it.key();
    for (const char* own : kOwn)
      if (k == own) fail("chat_template_kwargs.{} is set by the server itself and cannot be passed as a kwarg", k);
    if (special_tokens_.contains(k) || k == "bos_token" || k == "eos_token")
      fail("chat_template_kwargs.{} is the tokenizer's special token and cannot be passed as a kwarg", k);
    if (jinja::is_builtin_global(k))
      fail("chat_template_kwargs.{} is a built-in name of the template language and cannot be passed as a kwarg", k);
  }
}

bool ChatTemplate::reads(const std::string& name) const {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const auto& [n, t] : templates_) {
    const std::string& src = t.source();
    for (size_t at = src.find(name); at != std::string::npos; at = src.find(name, at + 1))
      if ((at == 0 || !ident(src[at - 1])) && (at + name.size() >= src.size() || !ident(src[at + name.size()])))
        return true;
  }
  return false;
}

ChatTemplate::json ChatTemplate::context(const json& messages, const json& tools, bool add_generation_prompt,
                                         const json& extra_kwargs) const {
  check_kwargs(extra_kwargs);
  if (!messages.is_array()) fail("chat messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) fail("chat tools must be a JSON array");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) fail("chat template kwargs must be a JSON object");
  json ctx = json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it) ctx[it.key()] = it.value();
  if (extra_kwargs.is_object())
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

std::string ChatTemplate::render(const json& messages, const json& tools, bool add_generation_prompt,
                                 const json& extra_kwargs, const std::string& template_name) const {
  return pick(tools, template_name).render(context(messages, tools, add_generation_prompt, extra_kwargs));
}

ChatTemplate::json parse_tool_call_arguments(const ChatTemplate::json& messages, int max_depth) {
  using json = ChatTemplate::json;
  json out = messages;
  if (!out.is_array()) return out;
  for (json& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      json& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      const std::string& text = fn["arguments"].get_ref<const std::string&>();
      if (json_nesting_depth(text) > max_depth)
        fail("tool_calls[].function.arguments is nested deeper than {} levels", max_depth);
      json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) fn["arguments"] = std::move(parsed);
    }
  }
  return out;
}

}  // namespace mmx
