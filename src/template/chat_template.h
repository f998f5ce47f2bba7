// ChatTemplate: a checkpoint's chat template, rendered the way transformers does it.
//
// Built from the template sources and tokenizer_config.json that formats/checkpoint.h finds in a
// checkpoint (chat_template_files(): chat_template.jinja, tokenizer_config.json "chat_template",
// or a GGUF file's tokenizer.chat_template). With several templates, "default" is the plain one
// and "tool_use" is picked automatically when tools are given. Special tokens
// (bos/eos/unk/sep/pad/cls/mask) come from tokenizer_config.json, as strings or AddedToken
// objects {"content": ...}.
//
// Rendering context (same as transformers.js apply_chat_template): messages,
// add_generation_prompt, tools (null when absent), documents (null), the special tokens, then
// the extra kwargs (which may override any of these, e.g. enable_thinking, model_identity).
// Messages are passed through unchanged: the template itself decides what to do with
// reasoning_content, <think> inside content, tool_calls with dict or string arguments.
//
// Not here: finding or reading files (formats/), tokenization of the result (tokenizer/), parsing
// model output (chat/).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "template/jinja.h"

namespace mmx {

class ChatTemplate {
 public:
  using json = nlohmann::ordered_json;

  // templates: name -> source (a single template is named "default"); tokenizer_config: the
  // parsed tokenizer_config.json (only the special-token fields are read), or null. Throws
  // jinja::TemplateError if a template does not parse.
  ChatTemplate(const std::map<std::string, std::string>& templates, const json& tokenizer_config);

  // messages: JSON array of {role, content, ...}; tools: JSON array or null; extra_kwargs: JSON
  // object or null. template_name: "" = automatic choice (see above).
  std::string render(const json& messages, const json& tools = nullptr, bool add_generation_prompt = false,
                     const json& extra_kwargs = nullptr, const std::string& template_name = "") const;
  // Throws mmx::Error naming the first key of `extra_kwargs` (chat_template_kwargs) that would
  // replace a variable render() sets itself (messages, tools, add_generation_prompt, documents,
  // bos_token, eos_token and the other special tokens) or clash with a Jinja global (range,
  // namespace, raise_exception, ...). HF's apply_chat_template(messages, **kwargs) cannot take
  // such a kwarg either.
  void check_kwargs(const json& extra_kwargs) const;
  // Whether a template source mentions `name` as an identifier (the server refuses a kwarg no
  // template reads: it would be silently ignored).
  bool reads(const std::string& name) const;
  // The variables render() passes to the template.
  json context(const json& messages, const json& tools, bool add_generation_prompt, const json& extra_kwargs) const;

  std::vector<std::string> names() const;
  const std::string& source(const std::string& name = "default") const;
  // "" when tokenizer_config.json does not set it.
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  const jinja::Template& pick(const json& tools, const std::string& name) const;
  std::map<std::string, jinja::Template> templates_;
  json special_tokens_ = json::object();  // name -> content, in SPECIAL_TOKEN_ATTRIBUTES order
  std::string bos_token_, eos_token_;
};

// OpenAI clients send tool_calls[].function.arguments as a JSON string; templates such as
// MiniMax-M2's iterate it as a dict. Returns a copy of `messages` where every such string that
// parses as a JSON object is replaced by that object (anything else is left as it is).
// Throws mmx::Error for an arguments string nested deeper than `max_depth` (it would be parsed,
// copied and rendered recursively).
nlohmann::ordered_json parse_tool_call_arguments(const nlohmann::ordered_json& messages, int max_depth = 64);

}  // namespace mmx
