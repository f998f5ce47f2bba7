#include "server/response.h"

#include "tokenizer/unicode.h"

namespace mmx::server {

namespace {
std::string token_text(const tok::Tokenizer& tok, int32_t id) {
  const int32_t one[1] = {id};
  return tok.decode(one, /*skip_special_tokens=*/false);
}
// The token's own bytes (a byte-level token may hold part of a UTF-8 character, which the
// decoded text shows as U+FFFD); the decoded text when the token is not in the byte alphabet.
json bytes_of(const tok::Tokenizer& tok, int32_t id, const std::string& decoded) {
  std::string raw, s;
  if (tok.decoder_is_byte_level() && tok.token_string(id, s)) {
    for (size_t i = 0; i < s.size();) {
      const int b = tok::codepoint_to_byte(tok::utf8_next(s, i));
      if (b < 0) {
        raw = decoded;
        break;
      }
      raw.push_back(char(b));
    }
  } else {
    raw = decoded;
  }
  json out = json::array();
  for (unsigned char c : raw) out.push_back(int(c));
  return out;
}
}  // namespace

json chat_logprobs_content(const tok::Tokenizer& tok, const std::vector<GenEvent>& tokens) {
  json out = json::array();
  for (const GenEvent& ev : tokens) {
    const std::string t = token_text(tok, ev.token);
    json top = json::array();
    for (const TokenLogprob& a : ev.top) {
      const std::string at = token_text(tok, a.id);
      top.push_back({{"token", at}, {"logprob", a.logprob}, {"bytes", bytes_of(tok, a.id, at)}});
    }
    out.push_back({{"token", t}, {"logprob", ev.logprob}, {"bytes", bytes_of(tok, ev.token, t)}, {"top_logprobs", top}});
  }
  return out;
}

json completion_logprobs(const tok::Tokenizer& tok, const std::vector<GenEvent>& tokens, int top_n,
                         int64_t& text_offset) {
  json j = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
  for (const GenEvent& ev : tokens) {
    const std::string t = token_text(tok, ev.token);
    j["tokens"].push_back(t);
    j["token_logprobs"].push_back(ev.logprob);
    json top = json::object();
    for (const TokenLogprob& a : ev.top) top[token_text(tok, a.id)] = a.logprob;
    j["top_logprobs"].push_back(top_n > 0 ? top : json(nullptr));
    j["text_offset"].push_back(text_offset);
    text_offset += int64_t(t.size());
  }
  return j;
}

json tool_calls_json(const std::vector<chat::ToolCall>& calls, int first_index) {
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k)
    out.push_back({{"index", first_index + int(k)},
                   {"id", calls[k].id},
                   {"type", "function"},
                   {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments_json}}}});
  return out;
}

json tool_call_deltas_json(const std::vector<chat::ToolCallDelta>& pieces) {
  json out = json::array();
  for (const chat::ToolCallDelta& p : pieces) {
    if (!p.id.empty())
      out.push_back({{"index", p.index},
                     {"id", p.id},
                     {"type", "function"},
                     {"function", {{"name", p.name}, {"arguments", p.arguments}}}});
    else
      out.push_back({{"index", p.index}, {"function", {{"arguments", p.arguments}}}});
  }
  return out;
}

json usage_json(const UsageInfo& u) {
  json j = {{"prompt_tokens", u.prompt},
            {"completion_tokens", u.completion},
            {"total_tokens", u.prompt + u.completion},
            {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
  if (u.report_drop) {
    j["dropped_reasoning_turns"] = u.dropped_turns;
    j["prompt_tokens_before_drop"] = u.prompt_before_drop;
  }
  return j;
}

json chat_chunk_choice(int index, json delta, json logprobs, const std::string& finish_reason) {
  return {{"index", index},
          {"delta", std::move(delta)},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
}

std::string sse(const json& j) {
  // Invalid UTF-8 cannot reach here (the detokenizer and parser emit valid text), but a dump
  // must never throw inside a stream: replace rather than fail.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace mmx::server
