#include "server/request.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "base/json_nesting.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "tokenizer/unicode.h"

namespace mmx::server {

namespace {

// ---- typed field access: absent and null both mean "not given" ----

bool has(const ojson& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

double get_number(const ojson& j, const char* key) {
  const ojson& v = j.at(key);
  if (!v.is_number()) bad_request(std::string("'") + key + "' must be a number", key);
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_request(std::string("'") + key + "' must be finite", key);
  return d;
}

int64_t get_int(const ojson& j, const char* key) {
  const ojson& v = j.at(key);
  // Past int64 (JSON reads 2^63 as unsigned): say so, rather than wrap it negative.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad_request(std::string("'") + key + "' is too large (at most 9223372036854775807)", key);
  if (v.is_number_integer()) return v.get<int64_t>();
  // 3.0 is accepted as 3 (JSON has one number type); 3.5 is not.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return int64_t(d);
  }
  bad_request(std::string("'") + key + "' must be an integer", key);
}

bool get_bool(const ojson& j, const char* key) {
  const ojson& v = j.at(key);
  if (!v.is_boolean()) bad_request(std::string("'") + key + "' must be a boolean", key);
  return v.get<bool>();
}

std::string get_string(const ojson& j, const char* key) {
  const ojson& v = j.at(key);
  if (!v.is_string()) bad_request(std::string("'") + key + "' must be a string", key);
  return v.get<std::string>();
}

// ---- structured output: response_format (OpenAI) and grammar (llama.cpp's GBNF) ----

void parse_structure(const ojson& b, GenerationParams& p) {
  using S = GenerationParams::Structure;
  if (has(b, "response_format")) {
    const ojson& rf = b.at("response_format");
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      bad_request("'response_format' must be an object with a 'type'", "response_format");
    const std::string type = rf["type"].get<std::string>();
    for (const auto& [k, v] : rf.items())
      if (k != "type" && !(k == "json_schema" && type == "json_schema"))
        bad_request("'response_format." + k + "' is not a field of a \"" + type + "\" response_format", "response_format");
    if (type == "json_object") {
      p.structure = S::kJsonObject;
    } else if (type == "json_schema") {
      const ojson& js = rf.value("json_schema", ojson());
      if (!js.is_object()) bad_request("'response_format.json_schema' must be an object", "response_format");
      for (const auto& [k, v] : js.items())
        if (k != "name" && k != "schema" && k != "strict" && k != "description")
          bad_request("'response_format.json_schema." + k + "' is not supported (name, schema, strict, description)", "response_format");
      if (js.contains("name") && !js["name"].is_string()) bad_request("'response_format.json_schema.name' must be a string", "response_format");
      if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
        bad_request("'response_format.json_schema.strict' must be a boolean", "response_format");
      if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
        bad_request("'response_format.json_schema.schema' must be a JSON Schema object", "response_format");
      p.structure = S::kJsonSchema;
      p.json_schema = js["schema"];
    } else if (type != "text") {
      throw ApiError(400, "'response_format' type \"" + type + "\" is not supported (text, json_object, json_schema)",
                     "response_format", "unsupported_value");
    }
  }
  if (has(b, "grammar")) {
    if (p.structure != S::kNone) bad_request("'grammar' cannot be combined with a JSON 'response_format'", "grammar");
    p.grammar = get_string(b, "grammar");
    if (p.grammar.empty()) bad_request("'grammar' must not be empty", "grammar");
    p.structure = S::kGrammar;
  }
  if (p.structure != S::kNone) {
    if (p.ignore_eos) bad_request("'ignore_eos' cannot be combined with structured output: the reply ends where the grammar does", "ignore_eos");
    if (p.sampling.min_tokens > 0) bad_request("'min_tokens' cannot be combined with structured output: the reply ends where the grammar does", "min_tokens");
  }
}

// ---- the shared sampling / output fields ----

void parse_common(const ojson& b, GenerationParams& p, bool chat, const SamplingParams& defaults) {
  p.sampling = defaults;
  if (has(b, "model")) p.model = get_string(b, "model");
  if (has(b, "temperature")) {
    const double t = get_number(b, "temperature");
    if (t < 0 || t > 2) bad_request("'temperature' must be in [0, 2]", "temperature");
    p.sampling.temperature = float(t);
  }
  if (has(b, "top_p")) {
    const double v = get_number(b, "top_p");
    if (!(v > 0 && v <= 1)) bad_request("'top_p' must be in (0, 1]", "top_p");
    p.sampling.top_p = float(v);
  }
  if (has(b, "top_k")) {
    const int64_t k = get_int(b, "top_k");  // vLLM: -1 (or 0) = off
    if (k < -1 || k > (1 << 30)) bad_request("'top_k' must be -1 (off), 0 (off) or positive", "top_k");
    p.sampling.top_k = k <= 0 ? 0 : int(k);
  }
  if (has(b, "min_p")) {
    const double v = get_number(b, "min_p");
    if (v < 0 || v > 1) bad_request("'min_p' must be in [0, 1]", "min_p");
    p.sampling.min_p = float(v);
  }
  if (has(b, "seed")) {
    p.sampling.seed = uint64_t(get_int(b, "seed"));
    p.has_seed = true;
  }
  const std::pair<const char*, float*> penalties[] = {{"presence_penalty", &p.sampling.presence_penalty},
                                                      {"frequency_penalty", &p.sampling.frequency_penalty}};
  for (const auto& [key, field] : penalties) {  // OpenAI: -2..2
    if (!has(b, key)) continue;
    const double v = get_number(b, key);
    if (v < -2 || v > 2) bad_request(std::string("'") + key + "' must be in [-2, 2]", key);
    *field = float(v);
  }
  if (has(b, "repetition_penalty")) {  // vLLM / llama.cpp: > 0, 1 = off
    const double v = get_number(b, "repetition_penalty");
    if (!(v > 0 && v <= 10)) bad_request("'repetition_penalty' must be in (0, 10] (1 = off)", "repetition_penalty");
    p.sampling.repetition_penalty = float(v);
  }
  if (has(b, "logit_bias")) {  // OpenAI: {"token id": bias in -100..100}
    const ojson& lb = b.at("logit_bias");
    if (!lb.is_object()) bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
    if (lb.size() > size_t(kMaxLogitBias))
      bad_request("'logit_bias' takes at most " + std::to_string(kMaxLogitBias) + " entries", "logit_bias");
    for (auto it = lb.begin(); it != lb.end(); ++it) {
      const std::string& k = it.key();
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id > INT32_MAX)
        bad_request("'logit_bias' keys must be token ids (decimal strings), got '" + k + "'", "logit_bias");
      if (!it.value().is_number() || !std::isfinite(it.value().get<double>()) || it.value().get<double>() < -100 ||
          it.value().get<double>() > 100)
        bad_request("'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
      p.sampling.logit_bias.push_back({int32_t(id), it.value().get<float>()});
    }
  }
  if (has(b, "min_tokens")) {  // vLLM: stop ids are masked until this many tokens were generated
    const int64_t m = get_int(b, "min_tokens");
    if (m < 0) bad_request("'min_tokens' must be >= 0", "min_tokens");
    p.sampling.min_tokens = m;
  }
  if (has(b, "ignore_eos")) p.ignore_eos = get_bool(b, "ignore_eos");
  // max_completion_tokens (the newer name) wins over max_tokens when both are given.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!has(b, key)) continue;
    const int64_t m = get_int(b, key);
    if (m < 1) bad_request(std::string("'") + key + "' must be at least 1", key);
    p.max_tokens = m;
  }
  if (has(b, "stop")) {
    const ojson& s = b.at("stop");
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > size_t(kMaxStopStrings))
        bad_request("'stop' takes at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
      for (const ojson& e : s) {
        if (!e.is_string()) bad_request("'stop' must be a string or a list of strings", "stop");
        p.stop.push_back(e.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or a list of strings", "stop");
    }
    for (const std::string& x : p.stop)
      if (x.empty()) bad_request("'stop' strings must not be empty", "stop");
  }
  if (has(b, "n")) {
    const int64_t n = get_int(b, "n");
    if (n < 1 || n > kMaxChoices)
      bad_request("'n' must be in 1.." + std::to_string(kMaxChoices), "n");
    p.n = int(n);
  }
  if (has(b, "stream")) p.stream = get_bool(b, "stream");
  if (has(b, "stream_options")) {
    const ojson& so = b.at("stream_options");
    if (!so.is_object()) bad_request("'stream_options' must be an object", "stream_options");
    if (has(so, "include_usage")) p.include_usage = get_bool(so, "include_usage");
    for (const auto& [k, v] : so.items())
      if (k != "include_usage" && !v.is_null())
        bad_request("'stream_options." + k + "' is not supported (only include_usage)", "stream_options");
  }
  parse_structure(b, p);
  if (chat) {
    // Chat: logprobs is a boolean, top_logprobs a count.
    if (has(b, "logprobs")) p.logprobs = get_bool(b, "logprobs");
    if (has(b, "top_logprobs")) {
      const int64_t t = get_int(b, "top_logprobs");
      if (t < 0 || t > kMaxTopLogprobs)
        bad_request("'top_logprobs' must be in 0.." + std::to_string(kMaxTopLogprobs), "top_logprobs");
      if (!p.logprobs && t > 0) bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      p.top_logprobs = int(t);
    }
  } else if (has(b, "logprobs")) {
    // Legacy completions: logprobs is the number of alternatives (0..5 in OpenAI; we allow 20).
    const int64_t t = get_int(b, "logprobs");
    if (t < 0 || t > kMaxTopLogprobs)
      bad_request("'logprobs' must be in 0.." + std::to_string(kMaxTopLogprobs), "logprobs");
    p.logprobs = true;
    p.top_logprobs = int(t);
  }
}

// ---- chat messages ----

// A message's content: a string, null, or a list of text parts ([{"type": "text", "text": "..."}],
// bare strings tolerated). Any other part (image_url, input_audio, file, refusal, ...) would be
// dropped by every chat template: a 400 naming the part, until the model can read it.
void check_content(const ojson& c, const std::string& where) {
  if (c.is_string() || c.is_null()) return;
  if (!c.is_array()) bad_request(where + ".content must be a string or an array of content parts", "messages");
  for (size_t k = 0; k < c.size(); ++k) {
    const ojson& part = c[k];
    const std::string at = where + ".content[" + std::to_string(k) + "]";
    if (part.is_string()) continue;
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad_request(at + " must be a content part object with a 'type'", "messages");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      throw ApiError(400, at + " is a '" + type + "' part: this model reads text only (content parts of type 'text')",
                     "messages", "unsupported_content");
    if (!part.contains("text") || !part["text"].is_string()) bad_request(at + ".text must be a string", "messages");
  }
}

void check_messages(const ojson& msgs) {
  if (!msgs.is_array() || msgs.empty()) bad_request("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_request(where + " must be an object", "messages");
    if (!m.contains("role") || !m["role"].is_string()) bad_request(where + ".role must be a string", "messages");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      bad_request(where + ".role '" + role + "' is not one of system, developer, user, assistant, tool",
                  "messages");
    if (m.contains("content")) check_content(m["content"], where);
    if (!m.contains("content") && role != "assistant")
      bad_request(where + " has no 'content'", "messages");
    if (has(m, "reasoning_content") && !m["reasoning_content"].is_string())
      bad_request(where + ".reasoning_content must be a string", "messages");
    if (has(m, "tool_calls")) {
      const ojson& tc = m["tool_calls"];
      if (role != "assistant" || !tc.is_array())
        bad_request(where + ".tool_calls must be an array on an assistant message", "messages");
      for (const ojson& c : tc) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string())
          bad_request(where + ".tool_calls entries need function.name", "messages");
        // The arguments string is parsed as JSON before rendering: the same depth limit as the body.
        // (What it must parse to, a JSON object, "" meaning {}, is chat/messages.h's rule.)
        const ojson& args = c["function"].value("arguments", ojson());
        if (args.is_string() && json_nesting_depth(args.get_ref<const std::string&>()) > kMaxJsonDepth)
          bad_request(where + ".tool_calls[].function.arguments is nested deeper than " +
                          std::to_string(kMaxJsonDepth) + " levels",
                      "messages");
      }
    }
  }
}

void check_tools(const ojson& tools) {
  if (!tools.is_array()) bad_request("'tools' must be an array", "tools");
  for (const ojson& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      bad_request("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools");
    if (t.contains("type") && t["type"] != "function") bad_request("tool type must be \"function\"", "tools");
  }
}

}  // namespace

ojson parse_body(const std::string& body) {
  if (!tok::utf8_is_valid(body)) bad_request("the request body is not valid UTF-8");
  if (json_nesting_depth(body) > kMaxJsonDepth)
    bad_request("the request body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("the request body is not valid JSON");
  if (!j.is_object()) bad_request("the request body must be a JSON object");
  return j;
}

ChatRequest parse_chat_request(const ojson& b, const SamplingParams& defaults) {
  ChatRequest r;
  check_fields(b, Endpoint::kChat);
  parse_common(b, r, /*chat=*/true, defaults);
  if (!b.contains("messages")) bad_request("'messages' is required", "messages");
  check_messages(b.at("messages"));
  r.messages = b.at("messages");
  if (has(b, "tools")) {
    check_tools(b.at("tools"));
    if (!b.at("tools").empty()) r.tools = b.at("tools");
  }
  if (has(b, "tool_choice")) {
    const ojson& tc = b.at("tool_choice");
    if (tc.is_string() && (tc == "auto" || tc == "none" || tc == "required")) {
      r.tool_choice = tc.get<std::string>();
    } else if (tc.is_object()) {
      const ojson& f = tc.value("function", ojson());
      if (tc.value("type", ojson()) != "function" || !f.is_object() || !f.contains("name") || !f["name"].is_string())
        bad_request("a named 'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      r.tool_choice = "function";
      r.forced_tool = f["name"].get<std::string>();
    } else {
      bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}", "tool_choice");
    }
    if (r.tool_choice == "required" || r.tool_choice == "function") {
      if (r.tools.is_null()) bad_request("'tool_choice' \"" + r.tool_choice + "\" needs a non-empty 'tools'", "tool_choice");
      if (r.structure != GenerationParams::Structure::kNone)
        bad_request("'tool_choice' forcing a tool call cannot be combined with 'response_format' or 'grammar'", "tool_choice");
      if (r.ignore_eos) bad_request("'ignore_eos' cannot be combined with a forced tool call", "ignore_eos");
      if (r.sampling.min_tokens > 0) bad_request("'min_tokens' cannot be combined with a forced tool call", "min_tokens");
      if (r.tool_choice == "function") {
        bool found = false;
        for (const ojson& t : r.tools) found |= t["function"]["name"] == r.forced_tool;
        if (!found) bad_request("'tool_choice' names '" + r.forced_tool + "', which is not in 'tools'", "tool_choice");
      }
    }
  }
  if (r.tool_choice == "none") r.tools = nullptr;  // the model is not told about tools at all
  if (has(b, "parallel_tool_calls")) r.parallel_tool_calls = get_bool(b, "parallel_tool_calls");
  if (has(b, "reasoning_effort")) {
    r.reasoning_effort = get_string(b, "reasoning_effort");
    static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), r.reasoning_effort) == std::end(kEfforts))
      bad_request("'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh", "reasoning_effort");
  }
  if (has(b, "chat_template_kwargs")) {
    if (!b.at("chat_template_kwargs").is_object())
      bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.template_kwargs = b.at("chat_template_kwargs");
  }
  return r;
}

CompletionRequest parse_completion_request(const ojson& b, const SamplingParams& defaults) {
  CompletionRequest r;
  check_fields(b, Endpoint::kCompletion);
  parse_common(b, r, /*chat=*/false, defaults);
  if (!b.contains("prompt")) bad_request("'prompt' is required", "prompt");
  ojson p = b.at("prompt");
  // A one-element list of strings or of id lists is the same as its element.
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = ojson(p[0]);
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    if (r.prompt_text.empty()) bad_request("'prompt' must not be empty", "prompt");
  } else if (p.is_array() && !p.empty()) {
    for (const ojson& e : p) {
      if (!e.is_number_integer()) bad_request("'prompt' must be a string or a list of token ids", "prompt");
      const int64_t id = e.get<int64_t>();
      if (id < 0 || id > INT32_MAX) bad_request("'prompt' token id out of range", "prompt");
      r.prompt_ids.push_back(int32_t(id));
    }
  } else {
    bad_request("'prompt' must be a non-empty string or a list of token ids (one prompt per request)",
                "prompt");
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const ojson& b) {
  check_fields(b, Endpoint::kTokenize);
  TokenizeRequest r;
  if (!has(b, "content")) bad_request("'content' is required", "content");
  r.content = get_string(b, "content");
  if (has(b, "add_special")) r.add_special = get_bool(b, "add_special");
  if (has(b, "parse_special")) r.parse_special = get_bool(b, "parse_special");
  if (r.add_special && !r.parse_special)
    bad_request("'add_special' needs 'parse_special' (the tokenizer adds its special tokens to a "
                "special-aware encoding only)", "add_special");
  return r;
}

DetokenizeRequest parse_detokenize_request(const ojson& b) {
  check_fields(b, Endpoint::kDetokenize);
  DetokenizeRequest r;
  if (!has(b, "tokens") || !b.at("tokens").is_array()) bad_request("'tokens' must be a list of token ids", "tokens");
  for (const ojson& e : b.at("tokens")) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      bad_request("'tokens' must be a list of token ids (integers in 0.." + std::to_string(INT32_MAX) + ")", "tokens");
    r.tokens.push_back(int32_t(e.get<int64_t>()));
  }
  if (has(b, "skip_special")) r.skip_special = get_bool(b, "skip_special");
  return r;
}

chat::Conversation take_conversation(ChatRequest& r) {
  chat::Conversation c;
  c.messages = std::move(r.messages);
  c.tools = r.tools;
  c.tool_choice = r.tool_choice;
  c.forced_tool = r.forced_tool;
  c.template_kwargs = std::move(r.template_kwargs);
  c.reasoning_effort = r.reasoning_effort;
  return c;
}

chat::GenLimits gen_limits(const GenerationParams& p) {
  chat::GenLimits g;
  g.sampling = p.sampling;
  g.max_tokens = p.max_tokens;
  g.ignore_eos = p.ignore_eos;
  g.logprobs = p.logprobs;
  g.top_logprobs = p.top_logprobs;
  return g;
}

chat::OutputStructure output_structure(const GenerationParams& p) {
  chat::OutputStructure s;
  s.kind = p.structure;
  s.json_schema = p.json_schema;
  s.grammar = p.grammar;
  return s;
}

}  // namespace mmx::server
