// The request fields each endpoint knows, in one table: honoured (parsed in request.cpp), accepted
// without effect (only where OpenAI's own server gives them no effect on the output), accepted only
// at their default value, and refused. A field in none of these is unknown: 400 naming it, as
// OpenAI answers "Unrecognized request argument supplied". docs/api.md prints the same sets.
#include "server/request_fields.h"

#include <algorithm>

#include "server/api_error.h"

namespace mmx::server {

namespace {

// Honoured by both endpoints (request.cpp: parse_common).
constexpr const char* kCommon[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "logit_bias", "min_tokens", "ignore_eos",
    "max_tokens", "stop", "n", "stream", "stream_options", "logprobs", "response_format", "grammar"};
constexpr const char* kChatOnly[] = {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                     "tool_choice", "chat_template_kwargs", "reasoning_effort",
                                     "parallel_tool_calls"};
constexpr const char* kCompletionOnly[] = {"prompt"};

// OpenAI gives these no effect on the generated output: end-user ids for abuse monitoring,
// key/value tags, a prompt-cache routing hint (our prefix cache needs none), a predicted output
// (a latency hint: the reply must be the same with or without it).
constexpr const char* kNoEffect[] = {"user", "safety_identifier", "metadata", "prompt_cache_key",
                                     "prediction"};

}  // namespace

const std::vector<FieldRule>& field_rules(Endpoint e) {
  static const std::vector<FieldRule> chat = [] {
    std::vector<FieldRule> r;
    for (const char* f : kCommon) r.push_back({f, FieldRule::kHonoured, ""});
    for (const char* f : kChatOnly) r.push_back({f, FieldRule::kHonoured, ""});
    for (const char* f : kNoEffect) r.push_back({f, FieldRule::kNoEffect, ""});
    r.push_back({"store", FieldRule::kDefaultOnly, "false: nothing is stored by this server"});
    r.push_back({"service_tier", FieldRule::kDefaultOnly, "\"auto\" or \"default\": there is one tier"});
    r.push_back({"modalities", FieldRule::kDefaultOnly, "[\"text\"]: this server writes text only"});
    r.push_back({"verbosity", FieldRule::kRefused, "the chat template has no verbosity control"});
    r.push_back({"audio", FieldRule::kRefused, "this server writes text only"});
    r.push_back({"web_search_options", FieldRule::kRefused, "this server has no web search"});
    r.push_back({"functions", FieldRule::kRefused, "deprecated by OpenAI: send 'tools'"});
    r.push_back({"function_call", FieldRule::kRefused, "deprecated by OpenAI: send 'tool_choice'"});
    return r;
  }();
  static const std::vector<FieldRule> completion = [] {
    std::vector<FieldRule> r;
    for (const char* f : kCommon) r.push_back({f, FieldRule::kHonoured, ""});
    for (const char* f : kCompletionOnly) r.push_back({f, FieldRule::kHonoured, ""});
    for (const char* f : {"user", "metadata"}) r.push_back({f, FieldRule::kNoEffect, ""});
    r.push_back({"best_of", FieldRule::kDefaultOnly, "1: server-side best-of-n is not implemented; ask for 'n' choices"});
    r.push_back({"echo", FieldRule::kDefaultOnly, "false: the prompt is not echoed back"});
    r.push_back({"suffix", FieldRule::kDefaultOnly, "null or \"\": fill-in-the-middle is not implemented"});
    return r;
  }();
  static const std::vector<FieldRule> tokenize = {{"content", FieldRule::kHonoured, ""},
                                                  {"add_special", FieldRule::kHonoured, ""},
                                                  {"parse_special", FieldRule::kHonoured, ""}};
  static const std::vector<FieldRule> detokenize = {{"tokens", FieldRule::kHonoured, ""},
                                                    {"skip_special", FieldRule::kHonoured, ""}};
  // Anthropic's POST /v1/messages and /v1/messages/count_tokens (anthropic_request.cpp).
  static const std::vector<FieldRule> messages = [] {
    std::vector<FieldRule> r;
    for (const char* f : {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "stop_sequences",
                          "temperature", "top_p", "top_k", "stream", "thinking", "output_config",
                          "context_management"})
      r.push_back({f, FieldRule::kHonoured, ""});
    r.push_back({"metadata", FieldRule::kNoEffect, ""});
    r.push_back({"service_tier", FieldRule::kDefaultOnly, "\"auto\": there is one tier"});
    r.push_back({"container", FieldRule::kRefused, "this server runs no code-execution containers"});
    r.push_back({"mcp_servers", FieldRule::kDefaultOnly, "[]: this server connects to no MCP servers"});
    return r;
  }();
  static const std::vector<FieldRule> count_tokens = [] {
    std::vector<FieldRule> r;
    for (const char* f : {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config",
                          "context_management"})
      r.push_back({f, FieldRule::kHonoured, ""});
    r.push_back({"mcp_servers", FieldRule::kDefaultOnly, "[]: this server connects to no MCP servers"});
    return r;
  }();
  // OpenAI's POST /v1/responses (responses_request.cpp): every field Codex, the Agents SDK and the
  // AI SDK send (docs/api.md has the table with the reasons).
  static const std::vector<FieldRule> responses = [] {
    std::vector<FieldRule> r;
    for (const char* f : {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
                          "max_output_tokens", "temperature", "top_p", "stream", "store", "previous_response_id",
                          "reasoning", "text", "include"})
      r.push_back({f, FieldRule::kHonoured, ""});
    // No effect on the output at OpenAI either: tags, end-user ids, prompt-cache routing hints
    // (our prefix cache is automatic by content), stream obfuscation padding.
    for (const char* f : {"metadata", "client_metadata", "user", "safety_identifier", "prompt_cache_key",
                          "prompt_cache_retention", "prompt_cache_options", "stream_options"})
      r.push_back({f, FieldRule::kNoEffect, ""});
    r.push_back({"service_tier", FieldRule::kDefaultOnly, "\"auto\" or \"default\": there is one tier"});
    r.push_back({"truncation", FieldRule::kDefaultOnly,
                 "\"disabled\": a conversation longer than the context is refused (400), never cut"});
    r.push_back({"background", FieldRule::kDefaultOnly, "false: responses are not run in the background"});
    r.push_back({"conversation", FieldRule::kRefused, "this server keeps no conversations: send 'previous_response_id' or the whole 'input'"});
    r.push_back({"prompt", FieldRule::kRefused, "this server holds no reusable prompts"});
    r.push_back({"top_logprobs", FieldRule::kRefused, "log probabilities are served by /v1/chat/completions only"});
    r.push_back({"max_tool_calls", FieldRule::kRefused, "nothing limits the number of tool calls but 'parallel_tool_calls': false (one)"});
    r.push_back({"context_management", FieldRule::kRefused, "the context is not edited server-side"});
    return r;
  }();
  switch (e) {
    case Endpoint::kResponses: return responses;
    case Endpoint::kMessages: return messages;
    case Endpoint::kCountTokens: return count_tokens;
    case Endpoint::kChat: return chat;
    case Endpoint::kCompletion: return completion;
    case Endpoint::kTokenize: return tokenize;
    case Endpoint::kDetokenize: return detokenize;
  }
  return chat;
}

namespace {

// Whether v is the value that means "the default" for a kDefaultOnly field.
bool is_default(const std::string& key, const ojson& v) {
  if (v.is_null()) return true;
  if (key == "store") return v == false;
  if (key == "service_tier") return v == "auto" || v == "default";
  if (key == "truncation") return v == "disabled";
  if (key == "background") return v == false;
  if (key == "modalities") return v == ojson::array({"text"});
  if (key == "best_of") return v == 1;
  if (key == "echo") return v == false;
  if (key == "suffix") return v == "";
  if (key == "mcp_servers") return v.is_array() && v.empty();
  return false;
}

const char* endpoint_path(Endpoint e) {
  switch (e) {
    case Endpoint::kChat: return "/v1/chat/completions";
    case Endpoint::kCompletion: return "/v1/completions";
    case Endpoint::kTokenize: return "/tokenize";
    case Endpoint::kDetokenize: return "/detokenize";
    case Endpoint::kMessages: return "/v1/messages";
    case Endpoint::kCountTokens: return "/v1/messages/count_tokens";
    case Endpoint::kResponses: return "/v1/responses";
  }
  return "";
}

}  // namespace

void check_fields(const ojson& body, Endpoint e) {
  const auto& rules = field_rules(e);
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    const ojson& value = item.value();
    const auto it = std::find_if(rules.begin(), rules.end(), [&key](const FieldRule& r) { return r.name == key; });
    if (it == rules.end())
      throw ApiError(400, "'" + key + "' is not a field of " + endpoint_path(e) +
                              " that this server knows (see docs/api.md for what it honours)", key,
                     "unknown_field");
    if (it->kind == FieldRule::kRefused && !value.is_null())
      throw ApiError(400, "'" + key + "' is not supported: " + it->why, key, "unsupported_field");
    if (it->kind == FieldRule::kDefaultOnly && !is_default(key, value))
      throw ApiError(400, "'" + key + "' is supported only as " + it->why, key, "unsupported_value");
  }
}

}  // namespace mmx::server
