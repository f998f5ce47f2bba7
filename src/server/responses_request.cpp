// Responses request -> OpenAI chat body -> ChatRequest (responses_request.h).
#include "server/responses_request.h"

#include <algorithm>

#include "chat/thinking.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace mmx::server {

std::string flat_tool_name(const std::string& ns, const std::string& name) {
  const bool ends_sep = ns.size() >= 2 && ns.compare(ns.size() - 2, 2, "__") == 0;
  return ends_sep ? ns + name : ns + "__" + name;
}

namespace {

bool given(const ojson& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

std::string input_at(size_t i) { return "input[" + std::to_string(i) + "]"; }

const ojson& string_field(const ojson& o, const char* key, const std::string& where, const char* param) {
  if (!o.contains(key) || !o.at(key).is_string()) bad_request(where + "." + key + " must be a string", param);
  return o.at(key);
}

// The fields each input item type may carry (anything else is a 400 naming it).
void check_item_fields(const ojson& item, const std::string& type, const std::string& where) {
  static const std::map<std::string, std::vector<std::string>> known = {
      {"message", {"type", "id", "role", "content", "status", "phase"}},
      {"function_call", {"type", "id", "call_id", "name", "arguments", "status", "namespace"}},
      {"function_call_output", {"type", "id", "call_id", "output", "status"}},
      {"reasoning", {"type", "id", "summary", "content", "encrypted_content", "status"}},
      {"item_reference", {"type", "id"}}};
  const auto& fields = known.at(type);
  for (const auto& [k, v] : item.items())
    if (std::find(fields.begin(), fields.end(), k) == fields.end())
      bad_request(where + "." + k + " is not a field of a '" + type + "' item", "input");
}

// Message content -> the chat body's content: a string, or [{type: text, text}] parts.
ojson message_content(const ojson& c, const std::string& where) {
  if (c.is_string()) return c;
  if (!c.is_array()) bad_request(where + " must be a string or a list of content parts", "input");
  ojson parts = ojson::array();
  for (size_t k = 0; k < c.size(); ++k) {
    const ojson& p = c[k];
    const std::string w = where + "[" + std::to_string(k) + "]";
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      bad_request(w + " must be a content part object with a 'type'", "input");
    const std::string type = p["type"].get<std::string>();
    if (type == "input_text" || type == "output_text" || type == "text") {
      parts.push_back({{"type", "text"}, {"text", string_field(p, "text", w, "input")}});
    } else if (type == "refusal") {
      parts.push_back({{"type", "text"}, {"text", string_field(p, "refusal", w, "input")}});
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      bad_request(w + " is an '" + type + "' part: this server reads text only (send the content as text)", "input");
    } else {
      bad_request(w + ".type '" + type + "' is not a content part type (input_text, output_text, refusal)", "input");
    }
  }
  return parts;
}

// A reasoning item's text: its reasoning_text content when it has some, else its summary.
std::string reasoning_text(const ojson& item, const std::string& where) {
  if (given(item, "encrypted_content") && !(item["encrypted_content"].is_string() && item["encrypted_content"] == ""))
    bad_request(where + ".encrypted_content is set: this server encrypts no reasoning, so it cannot have written "
                        "it (send the reasoning as 'content' or 'summary' text, or drop the item)", "input");
  auto join = [&](const char* key, const char* part_type) {
    std::string out;
    if (!given(item, key)) return out;
    const ojson& list = item[key];
    if (!list.is_array()) bad_request(where + "." + key + " must be a list", "input");
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string w = where + "." + key + "[" + std::to_string(k) + "]";
      const ojson& p = list[k];
      if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
        bad_request(w + " must be a part object with a 'type'", "input");
      if (p["type"] != part_type && !(std::string(key) == "content" && p["type"] == "text"))
        bad_request(w + ".type must be \"" + part_type + "\"", "input");
      if (!out.empty()) out += "\n\n";
      out += string_field(p, "text", w, "input").get<std::string>();
    }
    return out;
  };
  std::string content = join("content", "reasoning_text");
  std::string summary = join("summary", "summary_text");
  return content.empty() ? summary : content;
}

// function_call_output.output: a string, or input_text parts (joined).
std::string tool_output(const ojson& o, const std::string& where) {
  if (!o.contains("output")) bad_request(where + ".output is required", "input");
  const ojson& out = o["output"];
  if (out.is_string()) return out.get<std::string>();
  if (!out.is_array()) bad_request(where + ".output must be a string or a list of input_text parts", "input");
  std::string text;
  for (size_t k = 0; k < out.size(); ++k) {
    const std::string w = where + ".output[" + std::to_string(k) + "]";
    const ojson& p = out[k];
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      bad_request(w + " must be a content part object with a 'type'", "input");
    const std::string type = p["type"].get<std::string>();
    if (type == "input_image" || type == "input_file")
      bad_request(w + " is an '" + type + "' part: this server reads text only (send the tool's output as text)", "input");
    if (type != "input_text" && type != "output_text") bad_request(w + ".type must be \"input_text\"", "input");
    text += string_field(p, "text", w, "input").get<std::string>();
  }
  return text;
}

// input (a string or items) -> items in input-item form: every item typed, item_reference resolved.
ojson normalize_input(const ojson& input, ResponseStore& store) {
  ojson items = ojson::array();
  if (input.is_string()) {
    items.push_back({{"type", "message"}, {"role", "user"}, {"content", input}});
    return items;
  }
  if (!input.is_array()) bad_request("'input' must be a string or a list of items", "input");
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string w = input_at(i);
    ojson item = input[i];
    if (!item.is_object()) bad_request(w + " must be an object", "input");
    if (!item.contains("type")) {  // an "easy input message": {role, content}
      if (!item.contains("role")) bad_request(w + " has no 'type' (and no 'role', so it is not a message)", "input");
      item["type"] = "message";
    }
    if (!item["type"].is_string()) bad_request(w + ".type must be a string", "input");
    const std::string type = item["type"].get<std::string>();
    if (type != "message" && type != "function_call" && type != "function_call_output" && type != "reasoning" &&
        type != "item_reference")
      bad_request(w + ".type '" + type + "' is not an input item this server knows (message, function_call, "
                      "function_call_output, reasoning, item_reference)", "input");
    check_item_fields(item, type, w);
    if (type == "item_reference") {
      const std::string id = string_field(item, "id", w, "input").get<std::string>();
      std::optional<ojson> found = store.item(id);
      if (!found) bad_request(w + " references item '" + id + "', which this server does not hold (it keeps the "
                                  "items of the last stored responses in memory only)", "input");
      items.push_back(std::move(*found));
      continue;
    }
    items.push_back(std::move(item));
  }
  return items;
}

// Items (normalized) -> chat messages, after `instructions`' system message.
class MessageBuilder {
 public:
  void add(const ojson& item, const std::string& w) {
    const std::string type = item["type"].get<std::string>();
    if (type == "message") return message(item, w);
    if (type == "reasoning") {
      const std::string text = reasoning_text(item, w);
      if (text.empty()) return;
      if (!open_ || has_content_ || has_calls_) start();
      reasoning_ += text;
      return;
    }
    if (type == "function_call") {
      const std::string call_id = string_field(item, "call_id", w, "input").get<std::string>();
      std::string name = string_field(item, "name", w, "input").get<std::string>();
      if (given(item, "namespace")) name = flat_tool_name(string_field(item, "namespace", w, "input"), name);
      if (!item.contains("arguments") || !item["arguments"].is_string())
        bad_request(w + ".arguments must be a string (the call's JSON arguments)", "input");
      if (!open_) start();
      calls_.push_back({{"id", call_id}, {"type", "function"},
                        {"function", {{"name", name}, {"arguments", item["arguments"]}}}});
      has_calls_ = true;
      return;
    }
    // function_call_output
    flush();
    const std::string call_id = string_field(item, "call_id", w, "input").get<std::string>();
    out_.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", tool_output(item, w)}});
  }

  ojson finish() {
    flush();
    ojson out = ojson::array();
    if (has_system_) out.push_back({{"role", "system"}, {"content", system_}});
    for (ojson& m : out_) out.push_back(std::move(m));
    return out;
  }
  // instructions, then the leading system / developer messages: one system message, joined by
  // blank lines.
  void system(const std::string& text) {
    if (has_system_) system_ += "\n\n";
    system_ += text;
    has_system_ = true;
  }

 private:
  void message(const ojson& item, const std::string& w) {
    const std::string role = string_field(item, "role", w, "input").get<std::string>();
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      bad_request(w + ".role '" + role + "' is not one of user, assistant, system, developer", "input");
    if (!item.contains("content")) bad_request(w + ".content is required", "input");
    ojson content = message_content(item["content"], w + ".content");
    if ((role == "system" || role == "developer") && out_.empty() && !open_) {
      system(text_of(content));  // still leading: part of the one system message
      return;
    }
    if (role != "assistant") {
      flush();
      // A later system / developer message is a user turn (the M2 template reads one system
      // message, the first, and would drop it).
      out_.push_back({{"role", "user"}, {"content", std::move(content)}});
      return;
    }
    if (!open_ || has_calls_) start();
    if (content.is_string()) content_.push_back({{"type", "text"}, {"text", content}});
    else for (ojson& p : content) content_.push_back(std::move(p));
    has_content_ = true;
  }
  void start() {
    flush();
    open_ = true;
  }
  void flush() {
    if (!open_) return;
    ojson m = {{"role", "assistant"}};
    // One text part is sent as a string (the form the chat route's clients send).
    if (content_.size() == 1) m["content"] = content_[0]["text"];
    else if (content_.empty()) m["content"] = "";
    else m["content"] = content_;
    if (!reasoning_.empty()) m["reasoning_content"] = reasoning_;
    if (!calls_.empty()) m["tool_calls"] = calls_;
    out_.push_back(std::move(m));
    open_ = has_content_ = has_calls_ = false;
    content_ = ojson::array();
    calls_ = ojson::array();
    reasoning_.clear();
  }
  static std::string text_of(const ojson& content) {
    if (content.is_string()) return content.get<std::string>();
    std::string t;
    for (const ojson& p : content) t += (t.empty() ? "" : "\n\n") + p["text"].get<std::string>();
    return t;
  }
  std::string system_;
  bool has_system_ = false;
  ojson out_ = ojson::array();
  bool open_ = false, has_content_ = false, has_calls_ = false;
  ojson content_ = ojson::array(), calls_ = ojson::array();
  std::string reasoning_;
};

ojson function_tool(const ojson& t, const std::string& name, const std::string& w) {
  for (const auto& [k, v] : t.items())
    if (k != "type" && k != "name" && k != "description" && k != "parameters" && k != "strict" && k != "defer_loading")
      bad_request(w + "." + k + " is not a field of a function tool", "tools");
  ojson fn = {{"name", name}};  // in the order the template prints them: name, description, parameters
  if (given(t, "description")) {
    if (!t["description"].is_string()) bad_request(w + ".description must be a string", "tools");
    fn["description"] = t["description"];
  }
  if (given(t, "parameters")) {
    if (!t["parameters"].is_object()) bad_request(w + ".parameters must be a JSON schema object", "tools");
    fn["parameters"] = t["parameters"];
  } else {
    fn["parameters"] = {{"type", "object"}, {"properties", ojson::object()}};
  }
  if (given(t, "strict") && !t["strict"].is_boolean()) bad_request(w + ".strict must be a boolean", "tools");
  return {{"type", "function"}, {"function", fn}};
}

const ojson& tool_name(const ojson& t, const std::string& w) {
  if (!t.contains("name") || !t["name"].is_string() || t["name"].get<std::string>().empty())
    bad_request(w + ".name must be a non-empty string", "tools");
  return t["name"];
}

void convert_tools(const ojson& tools, ResponsesRequest& r, ojson& out) {
  if (!tools.is_array()) bad_request("'tools' must be an array", "tools");
  auto add = [&](ojson tool, const std::string& w) {
    const std::string& name = tool["function"]["name"].get_ref<const std::string&>();
    for (const ojson& t : out)
      if (t["function"]["name"] == name)
        bad_request(w + " is named '" + name + "', as another tool is (a namespaced tool is offered as "
                    "NAMESPACE__NAME)", "tools");
    out.push_back(std::move(tool));
  };
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
      bad_request(w + " must be a tool object with a 'type'", "tools");
    const std::string type = t["type"].get<std::string>();
    if (type == "function") {
      add(function_tool(t, tool_name(t, w), w), w);
    } else if (type == "namespace") {
      const std::string ns = tool_name(t, w);
      for (const auto& [k, v] : t.items())
        if (k != "type" && k != "name" && k != "description" && k != "tools")
          bad_request(w + "." + k + " is not a field of a namespace tool", "tools");
      if (!t.contains("tools") || !t["tools"].is_array()) bad_request(w + ".tools must be a list of function tools", "tools");
      for (size_t k = 0; k < t["tools"].size(); ++k) {
        const ojson& f = t["tools"][k];
        const std::string wk = w + ".tools[" + std::to_string(k) + "]";
        if (!f.is_object() || f.value("type", ojson()) != "function")
          bad_request(wk + " must be a function tool (a namespace holds functions)", "tools");
        const std::string name = tool_name(f, wk);
        const std::string flat = flat_tool_name(ns, name);
        add(function_tool(f, flat, wk), wk);
        r.namespaced[flat] = {ns, name};
      }
    } else {
      // Hosted and custom tools (web_search, file_search, code_interpreter, computer_use_preview,
      // image_generation, local_shell, mcp, custom, ...): this server runs none of them and the
      // model is not told about them; the response lists them (mmx_ignored_tools).
      ojson note = {{"type", type}};
      if (t.contains("name") && t["name"].is_string()) note["name"] = t["name"];
      r.ignored_tools.push_back(std::move(note));
    }
  }
}

// The function a tool_choice names: its flat name (a namespaced one included).
std::string chosen_function(const ojson& tc, const char* where) {
  if (!tc.contains("name") || !tc["name"].is_string())
    bad_request(std::string(where) + " {\"type\": \"function\"} needs a 'name'", "tool_choice");
  std::string name = tc["name"].get<std::string>();
  if (given(tc, "namespace")) {
    if (!tc["namespace"].is_string()) bad_request(std::string(where) + ".namespace must be a string", "tool_choice");
    name = flat_tool_name(tc["namespace"].get<std::string>(), name);
  }
  return name;
}

// tool_choice -> the chat body's value; allowed_tools also narrows `tools`.
ojson convert_tool_choice(const ojson& tc, ojson& tools) {
  if (tc.is_string()) {
    if (tc == "auto" || tc == "none" || tc == "required") return tc;
    bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or an object", "tool_choice");
  }
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or an object with a 'type'", "tool_choice");
  const std::string type = tc["type"].get<std::string>();
  if (type == "function") return {{"type", "function"}, {"function", {{"name", chosen_function(tc, "'tool_choice'")}}}};
  if (type == "allowed_tools") {
    const ojson& mode = tc.value("mode", ojson("auto"));
    if (mode != "auto" && mode != "required")
      bad_request("'tool_choice.mode' must be \"auto\" or \"required\"", "tool_choice");
    if (!tc.contains("tools") || !tc["tools"].is_array())
      bad_request("'tool_choice.tools' must be a list of {\"type\": \"function\", \"name\"}", "tool_choice");
    std::vector<std::string> allowed;
    for (const ojson& a : tc["tools"]) {
      if (!a.is_object() || a.value("type", ojson()) != "function")
        bad_request("'tool_choice.tools' entries must be {\"type\": \"function\", \"name\": ...} (this server runs no "
                    "hosted tools)", "tool_choice");
      allowed.push_back(chosen_function(a, "'tool_choice.tools[]'"));
    }
    ojson kept = ojson::array();
    for (const ojson& t : tools)
      if (std::find(allowed.begin(), allowed.end(), t["function"]["name"].get<std::string>()) != allowed.end())
        kept.push_back(t);
    tools = kept;
    return mode;
  }
  bad_request("'tool_choice' {\"type\": \"" + type + "\"} is not supported: only function tools are offered to "
              "the model (this server runs no hosted tools)", "tool_choice");
}

// text.format -> response_format; text.verbosity only at its default.
void convert_text(const ojson& text, ojson& chat) {
  if (!text.is_object()) bad_request("'text' must be an object", "text");
  for (const auto& [k, v] : text.items()) {
    if (k == "verbosity") {
      if (!v.is_null() && v != "medium")
        bad_request("'text.verbosity' is supported only as \"medium\": the chat template has no verbosity control",
                    "text");
    } else if (k != "format") {
      bad_request("'text." + k + "' is not a field of 'text'", "text");
    }
  }
  if (!given(text, "format")) return;
  const ojson& f = text["format"];
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    bad_request("'text.format' must be an object with a 'type'", "text");
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
    return;
  }
  if (type != "json_schema")
    bad_request("'text.format.type' must be \"text\", \"json_schema\" or \"json_object\"", "text");
  ojson js = ojson::object();
  for (const auto& [k, v] : f.items()) {
    if (k == "type") continue;
    if (k != "name" && k != "schema" && k != "strict" && k != "description")
      bad_request("'text.format." + k + "' is not a field of a json_schema format", "text");
    js[k] = v;
  }
  if (!js.contains("schema")) bad_request("'text.format.schema' is required for a json_schema format", "text");
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
}

std::string reasoning_fields(const ojson& reasoning, bool& summary) {
  if (!reasoning.is_object()) bad_request("'reasoning' must be an object", "reasoning");
  std::string effort;
  for (const auto& [k, v] : reasoning.items()) {
    if (v.is_null()) continue;
    if (k == "effort") {
      if (!v.is_string()) bad_request("'reasoning.effort' must be a string", "reasoning");
      effort = v.get<std::string>();
    } else if (k == "summary" || k == "generate_summary") {
      if (v != "auto" && v != "concise" && v != "detailed")
        bad_request("'reasoning." + k + "' must be \"auto\", \"concise\" or \"detailed\"", "reasoning");
      summary = true;
    } else {
      bad_request("'reasoning." + k + "' is not a field of 'reasoning'", "reasoning");
    }
  }
  return effort;
}

}  // namespace

ResponsesRequest parse_responses_request(const ojson& b, const chat::ServedModel& model, ResponseStore& store) {
  check_fields(b, Endpoint::kResponses);
  ResponsesRequest r;
  ojson chat = ojson::object();
  if (given(b, "model")) chat["model"] = b["model"];
  for (const char* k : {"temperature", "top_p", "stream"})
    if (given(b, k)) chat[k] = b[k];
  if (given(b, "max_output_tokens")) chat["max_tokens"] = b["max_output_tokens"];
  if (given(b, "store")) {
    if (!b["store"].is_boolean()) bad_request("'store' must be a boolean", "store");
    r.store = b["store"].get<bool>();
  }
  if (given(b, "parallel_tool_calls")) {
    if (!b["parallel_tool_calls"].is_boolean()) bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    r.parallel_tool_calls = b["parallel_tool_calls"].get<bool>();
  }
  for (const char* k : {"include"}) {
    if (!given(b, k)) continue;
    if (!b[k].is_array()) bad_request(std::string("'") + k + "' must be a list of strings", k);
    for (const ojson& v : b[k]) {
      if (!v.is_string()) bad_request(std::string("'") + k + "' must be a list of strings", k);
      // The others name outputs of hosted tools this server never runs, or the encrypted
      // reasoning it does not write (its reasoning is sent in the clear): nothing to add.
      if (v == "message.output_text.logprobs")
        bad_request("'include' \"message.output_text.logprobs\" is not supported: log probabilities are served by "
                    "/v1/chat/completions only", k);
    }
  }
  for (const char* k : {"metadata", "client_metadata"})
    if (given(b, k) && !b[k].is_object()) bad_request(std::string("'") + k + "' must be an object", k);

  // The conversation: the previous response's, then this input.
  if (given(b, "previous_response_id")) {
    if (!b["previous_response_id"].is_string()) bad_request("'previous_response_id' must be a string", "previous_response_id");
    r.previous_response_id = b["previous_response_id"].get<std::string>();
    std::optional<ojson> prev = store.conversation(r.previous_response_id);
    if (!prev)
      bad_request("'previous_response_id' '" + r.previous_response_id + "' is not a response this server holds (it "
                  "keeps the last stored responses in memory only, and none with 'store': false); send the whole "
                  "conversation as 'input'", "previous_response_id");
    r.conversation = std::move(*prev);
  }
  if (!b.contains("input") || b["input"].is_null()) bad_request("'input' is required", "input");
  const size_t n_prev = r.conversation.size();
  for (ojson& item : normalize_input(b["input"], store)) r.conversation.push_back(std::move(item));

  ojson tools = ojson::array();
  if (given(b, "tools")) convert_tools(b["tools"], r, tools);

  MessageBuilder mb;
  if (given(b, "instructions")) {
    if (!b["instructions"].is_string()) bad_request("'instructions' must be a string", "instructions");
    mb.system(b["instructions"].get<std::string>());
  }
  for (size_t i = 0; i < r.conversation.size(); ++i)
    mb.add(r.conversation[i], i < n_prev ? "previous_response_id's item[" + std::to_string(i) + "]"
                                         : input_at(i - n_prev));
  chat["messages"] = mb.finish();
  if (given(b, "tool_choice")) chat["tool_choice"] = convert_tool_choice(b["tool_choice"], tools);
  if (!tools.empty()) chat["tools"] = tools;
  if (given(b, "text")) convert_text(b["text"], chat);
  if (given(b, "reasoning")) {
    const std::string effort = reasoning_fields(b["reasoning"], r.summary);
    // The chat rule (chat/thinking.h): the values checked, mapped to the template's switch, or a
    // stated no-op on a template without one (MiniMax-M2 always reasons).
    if (!effort.empty()) chat["reasoning_effort"] = effort;
  }
  try {
    r.chat = parse_chat_request(chat, model.sampling);
  } catch (const ApiError& e) {
    // The chat parser names OpenAI chat's spelling of some fields: say which Responses field it was.
    if (e.param == "max_tokens")
      throw ApiError(e.status, std::string(e.what()) + " (from 'max_output_tokens')", "max_output_tokens", e.code);
    if (e.param == "response_format") throw ApiError(e.status, std::string(e.what()) + " (from 'text.format')", "text", e.code);
    if (e.param == "messages") throw ApiError(e.status, std::string(e.what()) + " (from 'input')", "input", e.code);
    throw;
  }
  for (const char* k : {"instructions", "tool_choice", "tools", "temperature", "top_p", "max_output_tokens", "text",
                        "reasoning", "metadata", "user", "service_tier", "truncation", "prompt_cache_key",
                        "safety_identifier"})
    if (b.contains(k)) r.echo[k] = b[k];
  return r;
}

}  // namespace mmx::server
