// The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) end to end over the
// scripted FakeEngine, with the tiny M2 checkpoint's real tokenizer and chat template (the
// fixture of server_test.cpp). The oracle for the request conversion is the OpenAI chat route:
// the same conversation sent both ways must reach the engine as the same prompt ids; the oracle
// for the streamed events is the non-streamed message of the same script.
#include <gtest/gtest.h>
#include <httplib.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/request_fields.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

using ojson = nlohmann::ordered_json;

json msg_body(json extra = json::object()) {
  json b = {{"model", "tiny-m2"}, {"max_tokens", 1000}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  b.update(extra);
  return b;
}

json anthropic_tools() {
  return json::parse(R"([
    {"name": "get_weather", "description": "Weather",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}},
    {"name": "get_time", "description": "Time",
     "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}])");
}

// anthropic_tools() as OpenAI tools, keys in the order the converter writes them (name,
// description, parameters); the schemas' keys sorted, as the test's json sends anthropic_tools().
ojson ordered_openai_tools() {
  return ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time",
      "parameters": {"properties": {"tz": {"type": "string"}}, "type": "object"}}}])");
}

struct Event {
  std::string name;
  json data;
};

// "event: NAME\ndata: {...}\n\n" -> events, in order.
std::vector<Event> anthropic_events(const std::string& body) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
    const size_t nl = ev.find('\n');
    EXPECT_NE(nl, std::string::npos) << ev;
    if (nl == std::string::npos) continue;
    EXPECT_EQ(ev.compare(nl + 1, 6, "data: "), 0) << ev;
    Event e{ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name) << ev;  // Anthropic repeats the event name as data.type
    out.push_back(std::move(e));
  }
  EXPECT_EQ(pos, body.size()) << "trailing bytes";
  return out;
}

void expect_anthropic_error(const httplib::Result& r, int status, const std::string& what) {
  ASSERT_TRUE(r) << what;
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << what << ": " << r->body;
  EXPECT_EQ(j["type"], "error") << what;
  ASSERT_TRUE(j["error"].is_object()) << what;
  EXPECT_EQ(j["error"]["type"], anthropic_error_type(status)) << what;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << what;
}

class AnthropicTest : public ServerTest {
 protected:
  // Sends an Anthropic body and the equivalent OpenAI one; returns both prompts as the engine saw them.
  // (openai is ordered: the template prints a tool's keys in the order they came.)
  std::pair<std::vector<int32_t>, std::vector<int32_t>> both_prompts(const json& anthropic, const ojson& openai) {
    auto a = post("/v1/messages", anthropic.dump());
    EXPECT_TRUE(a && a->status == 200) << (a ? a->body : "no answer");
    auto o = post("/v1/chat/completions", openai.dump());
    EXPECT_TRUE(o && o->status == 200) << (o ? o->body : "no answer");
    auto reqs = engine.requests();
    EXPECT_GE(reqs.size(), 2u);
    if (reqs.size() < 2) return {};
    return {reqs[reqs.size() - 2].prompt, reqs.back().prompt};
  }
};

// ---- the whole message ----

TEST_F(AnthropicTest, MessageWithThinkingAndText) {
  start();
  engine.n_cached = 2;
  json r = post_json("/v1/messages", msg_body({{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40},
                                               {"metadata", {{"user_id", "u1"}}}}));
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["role"], "assistant");
  EXPECT_EQ(r["model"], "tiny-m2");
  EXPECT_EQ(r["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(r["content"].size(), 2u) << r.dump();
  EXPECT_EQ(r["content"][0]["type"], "thinking");
  EXPECT_EQ(r["content"][0]["thinking"], "Let me think.");
  EXPECT_EQ(r["content"][1], json({{"type", "text"}, {"text", "Hello there, friend!"}}));
  EXPECT_EQ(r["stop_reason"], "end_turn");
  EXPECT_TRUE(r["stop_sequence"].is_null());
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(r["usage"]["input_tokens"].get<int64_t>() + r["usage"]["cache_read_input_tokens"].get<int64_t>(),
            int64_t(reqs[0].prompt.size()));
  EXPECT_EQ(r["usage"]["cache_read_input_tokens"], 2);
  EXPECT_EQ(r["usage"]["output_tokens"], engine.script.size());
  EXPECT_FLOAT_EQ(reqs[0].sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(reqs[0].sampling.top_p, 0.9f);
  EXPECT_EQ(reqs[0].sampling.top_k, 40);
  EXPECT_EQ(reqs[0].max_tokens, 1000);
}

TEST_F(AnthropicTest, ToolUseBlocksFromAnM2ToolCall) {
  start();
  engine.script = TinyAssets::get().say(kToolText);
  json r = post_json("/v1/messages", msg_body({{"tools", anthropic_tools()}, {"tool_choice", {{"type", "auto"}}}}));
  EXPECT_EQ(r["stop_reason"], "tool_use");
  ASSERT_EQ(r["content"].size(), 3u) << r.dump();
  EXPECT_EQ(r["content"][0]["type"], "thinking");
  const json& t0 = r["content"][1];
  EXPECT_EQ(t0["type"], "tool_use");
  EXPECT_EQ(t0["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(t0["name"], "get_weather");
  EXPECT_EQ(t0["input"], json({{"city", "Paris"}, {"days", 3}}));  // typed by input_schema
  EXPECT_EQ(r["content"][2]["name"], "get_time");
  EXPECT_EQ(r["content"][2]["input"], json({{"tz", "CET"}}));
  EXPECT_NE(r["content"][2]["id"], t0["id"]);
  // The tools reached the prompt exactly as the chat route puts them there.
  ojson openai = ojson::parse(chat_body().dump());
  openai["tools"] = ordered_openai_tools();
  auto [a, o] = both_prompts(msg_body({{"tools", anthropic_tools()}}), openai);
  EXPECT_EQ(a, o);
}

TEST_F(AnthropicTest, ConversationConvertsLikeTheChatRoute) {
  start();
  // system blocks, assistant thinking + text + tool_use, user tool_result (+ is_error) and text.
  const json anthropic = msg_body({{"system", json::array({{{"type", "text"}, {"text", "Be brief."}},
                                                          {{"type", "text"}, {"text", "Use tools."}}})},
                                   {"tools", anthropic_tools()},
                                   {"messages", json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Call the tool.", "signature": "sig-ignored"},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 2}},
      {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {"tz": "CET"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
      {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no clock"}],
       "is_error": true},
      {"type": "text", "text": "Thanks."}]}])")}});
  ojson openai = ojson::parse(chat_body({{"max_tokens", 1000}}).dump());
  openai["tools"] = ordered_openai_tools();
  openai["messages"] = ojson::parse(R"([
    {"role": "system", "content": "Be brief.\n\nUse tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Call the tool.", "tool_calls": [
      {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":2}"}},
      {"id": "toolu_2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no clock"},
    {"role": "user", "content": "Thanks."}])");
  auto [a, o] = both_prompts(anthropic, openai);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(TinyAssets::get().decode(a), TinyAssets::get().decode(o));
  const std::string prompt = TinyAssets::get().decode(a);
  // (The M2 template drops the reasoning of turns before the last user message.)
  for (const char* want : {"Be brief.", "sunny", "Error: no clock", "Thanks.", "Paris"})
    EXPECT_NE(prompt.find(want), std::string::npos) << want << "\n" << prompt;
}

TEST_F(AnthropicTest, StopSequenceAndMaxTokens) {
  start();
  json r = post_json("/v1/messages", msg_body({{"stop_sequences", {"friend", "zzz"}}}));
  EXPECT_EQ(r["stop_reason"], "stop_sequence");
  EXPECT_EQ(r["stop_sequence"], "friend");
  EXPECT_EQ(r["content"].back()["text"], "Hello there, ");
  r = post_json("/v1/messages", msg_body({{"max_tokens", 2}}));
  EXPECT_EQ(r["stop_reason"], "max_tokens");
  EXPECT_EQ(r["usage"]["output_tokens"], 2);
}

// ---- streaming ----

// The events of one streamed message, checked against the documented sequence; returns the
// message they build (content blocks from the deltas) so it can be compared with the whole one.
json replay_stream(const std::vector<Event>& ev) {
  EXPECT_GE(ev.size(), 3u);
  if (ev.size() < 3) return json();
  EXPECT_EQ(ev.front().name, "message_start");
  json msg = ev.front().data["message"];
  EXPECT_TRUE(msg["content"].empty());
  EXPECT_TRUE(msg["stop_reason"].is_null());
  EXPECT_EQ(ev[ev.size() - 2].name, "message_delta");
  EXPECT_EQ(ev.back().name, "message_stop");
  int open = -1;  // the open block's index
  std::vector<std::string> partial_json;
  for (size_t i = 1; i + 2 < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.name == "ping") continue;
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block opened while another was open";
      open = e.data["index"];
      EXPECT_EQ(open, int(msg["content"].size())) << "block indices 0, 1, 2, ...";
      msg["content"].push_back(e.data["content_block"]);
      partial_json.push_back("");
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], open);
      if (open < 0) continue;
      json& block = msg["content"][size_t(open)];
      const json& d = e.data["delta"];
      if (d["type"] == "text_delta") {
        EXPECT_EQ(block["type"], "text");
        block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (d["type"] == "thinking_delta") {
        EXPECT_EQ(block["type"], "thinking");
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      } else if (d["type"] == "input_json_delta") {
        EXPECT_EQ(block["type"], "tool_use");
        partial_json[size_t(open)] += d["partial_json"].get<std::string>();
      } else {
        ADD_FAILURE() << "unexpected delta " << d.dump();
      }
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data["index"], open);
      if (open >= 0 && msg["content"][size_t(open)]["type"] == "tool_use")
        msg["content"][size_t(open)]["input"] = json::parse(partial_json[size_t(open)]);
      open = -1;
    } else {
      ADD_FAILURE() << "unexpected event " << e.name;
    }
  }
  EXPECT_EQ(open, -1) << "a block was left open";
  const json& md = ev[ev.size() - 2].data;
  msg["stop_reason"] = md["delta"]["stop_reason"];
  msg["stop_sequence"] = md["delta"]["stop_sequence"];
  msg["usage"] = md["usage"];
  return msg;
}

TEST_F(AnthropicTest, StreamedEventsRebuildTheWholeMessage) {
  start();
  for (const std::string& script : {std::string("Let me think.</think>\n\nHello there, friend!"), std::string(kToolText)}) {
    engine.script = TinyAssets::get().say(script);
    const json body = msg_body({{"tools", anthropic_tools()}});
    json whole = post_json("/v1/messages", body);
    json sb = body;
    sb["stream"] = true;
    auto s = post("/v1/messages", sb.dump());
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, 200);
    EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
    std::vector<Event> ev = anthropic_events(s->body);
    json rebuilt = replay_stream(ev);
    // Ids differ per request (the tool-call ids too); everything else is the same message.
    ASSERT_EQ(rebuilt["content"].size(), whole["content"].size()) << rebuilt.dump() << "\n" << whole.dump();
    for (size_t i = 0; i < whole["content"].size(); ++i) {
      json a = rebuilt["content"][i], b = whole["content"][i];
      a.erase("id");
      b.erase("id");
      EXPECT_EQ(a, b) << i;
    }
    EXPECT_EQ(rebuilt["stop_reason"], whole["stop_reason"]);
    EXPECT_EQ(rebuilt["usage"], whole["usage"]);
    size_t n_deltas = 0;
    for (const Event& e : ev) n_deltas += e.name == "content_block_delta";
    EXPECT_GT(n_deltas, 3u) << "incremental, not one blob";
  }
}

// An M3 model's string argument reaches both APIs' clients as the model writes it: several
// pieces inside the value (input_json_delta / delta.tool_calls), not one per parameter, and they
// join to the arguments of the non-streamed reply.
TEST_F(AnthropicTest, M3StringArgumentsStreamAsWritten) {
  format = chat::OutputFormat::kM3;
  start();
  const std::string NS = "]<]minimax[>[";
  const std::string code = "for i in range(3):\n    print(\"line\", i)  # \xe4\xbd\xa0\xe5\xa5\xbd\n";
  engine.script = TinyAssets::get().say("</mm:think>\n\n" + NS + "<tool_call>\n" + NS + "<invoke name=\"run_code\">" +
                                        NS + "<code>" + code + NS + "</code>" + NS + "<timeout>5" + NS + "</timeout>" +
                                        NS + "</invoke>\n" + NS + "</tool_call>");
  const json input = {{"code", code}, {"timeout", 5}};
  const json tools = json::parse(R"([{"name": "run_code", "input_schema": {"type": "object", "properties": {
      "code": {"type": "string"}, "timeout": {"type": "number"}}}}])");
  json whole = post_json("/v1/messages", msg_body({{"tools", tools}}));
  ASSERT_EQ(whole["content"].back()["type"], "tool_use") << whole.dump();
  EXPECT_EQ(whole["content"].back()["input"], input);
  auto s = post("/v1/messages", msg_body({{"tools", tools}, {"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::string joined;
  size_t inside = 0;  // pieces that are only text of the value
  for (const Event& e : anthropic_events(s->body))
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta") {
      const std::string piece = e.data["delta"]["partial_json"];
      joined += piece;
      inside += !piece.empty() && piece.find('"') == std::string::npos;
    }
  EXPECT_EQ(json::parse(joined), input) << joined;
  EXPECT_GE(inside, 3u) << "the string did not stream as written: " << s->body;
  // The chat route, same script: the arguments fragments of call 0.
  json chat = chat_body({{"stream", true}});
  chat["tools"] = json::parse(R"([{"type": "function", "function": {"name": "run_code", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}, "timeout": {"type": "number"}}}}}])");
  auto c = post("/v1/chat/completions", chat.dump());
  ASSERT_TRUE(c);
  std::string args;
  size_t n_pieces = 0;
  for (const json& e : sse_events(c->body))
    for (const json& ch : e["choices"])
      if (ch["delta"].contains("tool_calls"))
        for (const json& tc : ch["delta"]["tool_calls"])
          if (tc.contains("function") && tc["function"].contains("arguments")) {
            args += tc["function"]["arguments"].get<std::string>();
            ++n_pieces;
          }
  EXPECT_EQ(json::parse(args), input) << args;
  EXPECT_GE(n_pieces, 5u) << c->body;
}

TEST_F(AnthropicTest, EngineErrorMidStreamIsAnErrorEvent) {
  start();
  engine.fail_after = 3;
  auto s = post("/v1/messages", msg_body({{"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::vector<Event> ev = anthropic_events(s->body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front().name, "message_start");
  EXPECT_EQ(ev.back().name, "error");
  EXPECT_EQ(ev.back().data["error"]["type"], "api_error");
}

// ---- count_tokens, auth ----

TEST_F(AnthropicTest, CountTokensIsThePromptLength) {
  start();
  const json body = msg_body({{"system", "Be brief."}, {"tools", anthropic_tools()}});
  post_json("/v1/messages", body);
  json count_body = body;
  count_body.erase("max_tokens");
  json c = post_json("/v1/messages/count_tokens", count_body);
  EXPECT_EQ(c, json({{"input_tokens", engine.requests().back().prompt.size()}}));
  expect_anthropic_error(post("/v1/messages/count_tokens", body.dump()), 400, "max_tokens is not a count field");
}

TEST_F(AnthropicTest, XApiKeyOrBearer) {
  opts.api_keys = {"k"};
  start();
  expect_anthropic_error(post("/v1/messages", msg_body().dump()), 401, "no key");  // (anthropic_errors_test: all statuses)
  EXPECT_EQ(post("/v1/messages", msg_body().dump(), {{"x-api-key", "k"}})->status, 200);
  EXPECT_EQ(post("/v1/messages", msg_body().dump(), {{"Authorization", "Bearer k"}})->status, 200);
  EXPECT_EQ(post("/v1/messages", msg_body().dump(), {{"x-api-key", "wrong"}})->status, 401);
  EXPECT_EQ(post("/v1/chat/completions", chat_body().dump(), {{"x-api-key", "k"}})->status, 200);
}

// ---- refusals ----

TEST_F(AnthropicTest, MalformedRequestsAre400sNamingTheField) {
  start();
  auto with = [](json extra) { return msg_body(std::move(extra)); };
  auto without = [](const char* key) {
    json b = msg_body();
    b.erase(key);
    return b;
  };
  auto user_blocks = [](json blocks) { return msg_body({{"messages", {{{"role", "user"}, {"content", blocks}}}}}); };
  auto asst_blocks = [](json blocks) {
    return msg_body({{"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", blocks}}}}});
  };
  const std::vector<std::tuple<json, std::string, std::string>> cases = {
      {without("max_tokens"), "max_tokens", "required"},
      {without("model"), "model", "required"},
      {without("messages"), "messages", "required"},
      {with({{"max_tokens", 0}}), "max_tokens", "at least 1"},
      {with({{"max_tokens", "64"}}), "max_tokens", "integer"},
      {with({{"messages", json::array()}}), "messages", "non-empty"},
      {with({{"messages", {{{"role", "user"}}}}}), "messages", "content"},
      {with({{"messages", {{{"role", "user"}, {"content", "x"}, {"name", "bob"}}}}}), "messages", "name"},
      {user_blocks({{{"type", "image"}, {"source", {{"type", "base64"}}}}}), "messages", "image"},
      {user_blocks({{{"type", "document"}, {"source", {{"type", "text"}}}}}), "messages", "document"},
      {user_blocks({{{"type", "text"}}}), "messages", "text"},
      {user_blocks({{{"type", "text"}, {"text", "x"}, {"output_config", {{"effort", "low"}}}}}), "messages", "output_config"},
      {user_blocks({{{"type", "tool_result"}}}), "messages", "tool_use_id"},
      // A result with no earlier tool_use (it used to get the chat template's own message).
      {user_blocks({{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}, {"content", "42"}}}), "messages",
       "no earlier assistant message has a tool_use"},
      {user_blocks({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", {{{"type", "image"}}}}}}), "messages", "image"},
      {user_blocks({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"is_error", "yes"}}}), "messages", "is_error"},
      {user_blocks({{{"type", "thinking"}, {"thinking", "x"}}}), "messages", "assistant"},
      {user_blocks({{{"type", "search_result"}}}), "messages", "search_result"},
      {user_blocks({1}), "messages", "content block"},
      {asst_blocks({{{"type", "redacted_thinking"}, {"data", "x"}}}), "messages", "redacted_thinking"},
      {asst_blocks({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "{}"}}}), "messages", "input"},
      {asst_blocks({{{"type", "tool_result"}, {"tool_use_id", "t"}}}), "messages", "user message"},
      {with({{"system", 5}}), "system", "system"},
      {with({{"system", {{{"type", "image"}}}}}), "system", "image"},
      {with({{"tools", {{{"name", "f"}}}}}), "tools", "input_schema"},
      {with({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}), "tools", "server tools"},
      {with({{"tool_choice", "auto"}}), "tool_choice", "object"},
      {with({{"tool_choice", {{"type", "tool"}}}}), "tool_choice", "name"},
      {with({{"tool_choice", {{"type", "maybe"}}}}), "tool_choice", "\"any\""},
      {with({{"temperature", 1.5}}), "temperature", "[0, 1]"},
      {with({{"top_p", 0}}), "top_p", "top_p"},
      {with({{"top_k", "x"}}), "top_k", "integer"},
      {with({{"stop_sequences", "x"}}), "stop_sequences", "list"},
      {with({{"stop_sequences", {""}}}), "stop_sequences", "empty"},
      {with({{"stream", "yes"}}), "stream", "boolean"},
      {with({{"metadata", {{"tags", "x"}}}}), "metadata", "user_id"},
      {with({{"thinking", {{"type", "disabled"}}}}), "thinking", "always reasons"},
      {with({{"thinking", {{"type", "enabled"}}}}), "thinking", "budget_tokens"},
      {with({{"thinking", {{"type", "enabled"}, {"budget_tokens", -1}}}}), "thinking", "positive"},
      {with({{"thinking", true}}), "thinking", "enabled"},
      {with({{"n", 2}}), "n", "not a field of /v1/messages"},
      {with({{"frequency_penalty", 1}}), "frequency_penalty", "not a field"},
      {with({{"container", "c1"}}), "container", "not supported"},
      {with({{"messages", {{{"role", "developer"}, {"content", "x"}}}}}), "messages", "user, assistant, system"},
      {with({{"messages", {{{"role", "system"}, {"content", 5}}}}}), "messages", "content"},
      {with({{"tools", {{{"name", "f"}, {"input_schema", json::object()}, {"strict", "yes"}}}}}), "tools", "boolean"},
      {with({{"tools", {{{"name", "f"}, {"input_schema", json::object()}, {"input_examples", json::array()}}}}}), "tools", "input_examples"},
      {with({{"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", "yes"}}}}), "tool_choice", "boolean"},
      {with({{"mcp_servers", {{{"type", "url"}, {"url", "https://x"}, {"name", "x"}}}}}), "mcp_servers", "MCP"},
      {with({{"context_management", {{"edits", {{{"type", "clear_tool_uses_20250919"}}}}}}}), "context_management", "clear_tool_uses_20250919"},
      {with({{"context_management", {{"edits", {{{"type", "compact_20260112"}}}}}}}), "context_management", "compact_20260112"},
      {with({{"context_management", {{"edits", {{{"type", "clear_thinking_20251015"}, {"keep", 3}}}}}}}), "context_management", "keep"},
      {with({{"context_management", "x"}}), "context_management", "object"},
      {with({{"output_config", {{"effort", "extreme"}}}}), "output_config", "effort"},
      {with({{"output_config", {{"verbosity", "low"}}}}), "output_config", "verbosity"},
      {with({{"output_config", {{"format", {{"type", "json_object"}}}}}}), "output_config", "json_schema"},
      {with({{"thinking", {{"type", "adaptive"}, {"display", "full"}}}}), "thinking", "display"},
      {with({{"thinking", {{"type", "adaptive"}, {"budget_tokens", 100}}}}), "thinking", "budget_tokens"},
      {with({{"service_tier", "standard_only"}}), "service_tier", "auto"},
  };
  for (const auto& [body, field, words] : cases) {
    auto r = post("/v1/messages", body.dump());
    expect_anthropic_error(r, 400, body.dump());
    if (!r) continue;
    const std::string message = json::parse(r->body)["error"]["message"];
    EXPECT_NE(message.find(field), std::string::npos) << "does not name '" << field << "': " << message;
    EXPECT_NE(message.find(words), std::string::npos) << "does not say '" << words << "': " << message;
  }
  expect_anthropic_error(post("/v1/messages", "{"), 400, "bad JSON");
  expect_anthropic_error(post("/v1/messages", msg_body({{"model", "claude-x"}}).dump()), 404, "unknown model");
  EXPECT_TRUE(engine.requests().empty()) << "a refused request reached the engine";
  // Still serving.
  EXPECT_EQ(post("/v1/messages", msg_body().dump())->status, 200);
}

TEST_F(AnthropicTest, ThinkingEnabledIsAcceptedOnAnM2) {
  start();
  json r = post_json("/v1/messages", msg_body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}));
  EXPECT_EQ(r["content"][0]["type"], "thinking");
}

// Every field of the /v1/messages table is accepted or refused as the table says (an unknown
// one is refused): the table and the parser cannot drift apart.
TEST_F(AnthropicTest, EveryTableFieldIsHonouredOrRefusedByName) {
  start();
  for (Endpoint e : {Endpoint::kMessages, Endpoint::kCountTokens})
    for (const FieldRule& f : field_rules(e)) {
      json b = msg_body();
      if (e == Endpoint::kCountTokens) b.erase("max_tokens");
      if (b.contains(f.name)) continue;  // sent in every body already
      const json sample = f.name == "system" ? json("Be brief.")
                          : f.name == "tools" ? anthropic_tools()
                          : f.name == "tool_choice" ? json({{"type", "auto"}})
                          : f.name == "stop_sequences" ? json({"zzz"})
                          : f.name == "temperature" || f.name == "top_p" ? json(0.5)
                          : f.name == "top_k" ? json(5)
                          : f.name == "stream" ? json(false)
                          : f.name == "thinking" ? json({{"type", "enabled"}, {"budget_tokens", 2048}})
                          : f.name == "metadata" ? json({{"user_id", "u"}})
                          : f.name == "service_tier" ? json("auto")
                          : f.name == "mcp_servers" ? json::array()
                          : f.name == "output_config" ? json({{"effort", "high"}})
                          : f.name == "context_management"
                              ? json({{"edits", {{{"type", "clear_thinking_20251015"}, {"keep", "all"}}}}})
                                                     : json("x");
      b[f.name] = sample;
      auto r = post(e == Endpoint::kMessages ? "/v1/messages" : "/v1/messages/count_tokens", b.dump());
      ASSERT_TRUE(r) << f.name;
      if (f.kind == FieldRule::kRefused) {
        expect_anthropic_error(r, 400, f.name);
        EXPECT_NE(r->body.find(f.name), std::string::npos) << r->body;
      } else {
        EXPECT_EQ(r->status, 200) << f.name << ": " << r->body;
      }
    }
}

}  // namespace
}  // namespace mmx::server

namespace mmx::server {
namespace {

// tool_choice any / {tool, name} are the chat route's "required" / named function, parsed by the
// same code: whatever that route answers (a 400 naming tool_choice before constrained decoding,
// a forced call after), /v1/messages answers with the same status.
TEST_F(AnthropicTest, ForcedToolChoiceFollowsTheChatRoute) {
  start();
  const std::vector<std::pair<json, json>> pairs = {
      {json({{"type", "any"}}), json("required")},
      {json({{"type", "tool"}, {"name", "get_time"}}), json({{"type", "function"}, {"function", {{"name", "get_time"}}}})}};
  for (const auto& [anthropic, openai] : pairs) {
    auto a = post("/v1/messages", msg_body({{"tools", anthropic_tools()}, {"tool_choice", anthropic}}).dump());
    auto o = post("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"tool_choice", openai}}).dump());
    ASSERT_TRUE(a && o);
    EXPECT_EQ(a->status, o->status) << a->body << "\n" << o->body;
    if (o->status == 400) {
      expect_anthropic_error(a, 400, anthropic.dump());
      EXPECT_NE(a->body.find("tool_choice"), std::string::npos) << a->body;
    } else {  // accepted: forced (a token constraint on the engine request) on both routes, or on neither
      auto reqs = engine.requests();
      ASSERT_GE(reqs.size(), 2u);
      EXPECT_EQ(bool(reqs[reqs.size() - 2].constraint), bool(reqs.back().constraint))
          << "tool_choice " << anthropic.dump() << " is forced on one route only";
    }
  }
  // auto: no constraint.
  post_json("/v1/messages", msg_body({{"tools", anthropic_tools()}, {"tool_choice", {{"type", "auto"}}}}));
  EXPECT_FALSE(engine.requests().back().constraint);
}

}  // namespace
}  // namespace mmx::server

namespace mmx::server {
namespace {

// `thinking` reaches a template that has a switch: thinking_mode (M3's) or enable_thinking.
TEST_F(AnthropicTest, ThinkingMapsToTheTemplatesSwitch) {
  for (const std::string var : {"thinking_mode", "enable_thinking"}) {
    const ChatTemplate tmpl({{"default", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                         "[{{ " + var + " if " + var + " is defined else 'unset' }}]"}},
                            nullptr);
    chat::ServedModel m;
    m.name = "tiny-m2";
    m.tokenizer = TinyAssets::get().tok.get();
    m.chat_template = &tmpl;
    m.eos_ids = {TinyAssets::get().eos};
    server = std::make_unique<Server>(engine, m, opts);
    port = server->start("127.0.0.1", 0);
    ASSERT_GT(port, 0);
    const bool mode = var == "thinking_mode";
    const std::vector<std::pair<json, std::string>> cases = {
        {json(nullptr), "[unset]"},
        {json({{"type", "enabled"}, {"budget_tokens", 2048}}), mode ? "[enabled]" : "[true]"},
        {json({{"type", "disabled"}}), mode ? "[disabled]" : "[false]"}};
    for (const auto& [thinking, want] : cases) {
      json b = msg_body();
      if (!thinking.is_null()) b["thinking"] = thinking;
      post_json("/v1/messages", b);
      const std::string prompt = TinyAssets::get().decode(engine.requests().back().prompt);
      EXPECT_NE(prompt.find(want), std::string::npos) << var << " " << thinking.dump() << ": " << prompt;
    }
    server->stop();
    server.reset();
  }
}

}  // namespace
}  // namespace mmx::server

namespace mmx::server {
namespace {

// Seeded mutations of a body that uses every block type: one node anywhere replaced by a value of
// another type. Each answer is a 200 or a 4xx in Anthropic's error shape, never a 500 or a crash.
TEST_F(AnthropicTest, MutatedBodiesNeverCrashTheServer) {
  start();
  engine.script = TinyAssets::get().say("ok</think>\n\nfine");
  const json base = msg_body({{"system", json::array({{{"type", "text"}, {"text", "S"}}})},
                              {"tools", anthropic_tools()},
                              {"tool_choice", {{"type", "auto"}}},
                              {"stop_sequences", {"zz"}},
                              {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
                              {"messages", json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Q"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
      {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"tz": "CET"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon"}]}])")}});
  const std::vector<json> values = {nullptr, 0, -1, 1.5, "", "x", true, json::array(), json::object(),
                                    json::array({json::object()}), json({{"type", "text"}})};
  std::mt19937 rng(11);
  int n_ok = 0, n_refused = 0;
  for (int round = 0; round < 150; ++round) {
    json b = base;
    std::vector<json::json_pointer> paths;  // every node of the body
    std::function<void(const json&, const json::json_pointer&)> walk = [&](const json& j, const json::json_pointer& p) {
      paths.push_back(p);
      if (j.is_object()) for (const auto& [k, v] : j.items()) walk(v, p / k);
      if (j.is_array()) for (size_t i = 0; i < j.size(); ++i) walk(j[i], p / i);
    };
    walk(b, json::json_pointer());
    const auto& where = paths[1 + rng() % (paths.size() - 1)];  // never the root
    b[where] = values[rng() % values.size()];
    auto r = post("/v1/messages", b.dump());
    ASSERT_TRUE(r) << b.dump();
    if (r->status == 200) {
      ++n_ok;
      continue;
    }
    ++n_refused;
    EXPECT_TRUE(r->status == 400 || r->status == 404) << r->status << " for " << where.to_string() << ": " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    EXPECT_EQ(e.value("type", ""), "error") << r->body;
  }
  EXPECT_GT(n_refused, 50);  // the mutations mostly break the body...
  EXPECT_GT(n_ok, 5);        // ...and some (a text changed, null = absent) do not
}

}  // namespace
}  // namespace mmx::server

namespace mmx::server {
namespace {

// ---- the fields Claude Code 2.1.332 and the AI SDK's Anthropic provider send ----

// What Claude Code sends on every request (thinking adaptive + display omitted, a keep-all
// clear_thinking edit, output_config.effort, an empty mcp_servers, cache_control on blocks and
// tools) and what the AI SDK adds to each tool (eager_input_streaming, strict): all accepted, and
// none of them changes the prompt of an M2 (no reasoning switch, nothing cleared).
TEST_F(AnthropicTest, ClientFieldsThatKeepEverythingLeaveThePromptAlone) {
  start();
  json plain = msg_body({{"system", "Be brief."}, {"tools", anthropic_tools()}});
  json extras = plain;
  extras["thinking"] = {{"type", "adaptive"}, {"display", "omitted"}};
  extras["context_management"] = {{"edits", {{{"type", "clear_thinking_20251015"}, {"keep", "all"}}}}};
  extras["output_config"] = {{"effort", "high"}};
  extras["mcp_servers"] = json::array();
  extras["system"] = {{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}};
  extras["messages"] = {{{"role", "user"},
                         {"content", {{{"type", "text"}, {"text", "Hi"}, {"cache_control", {{"type", "ephemeral"}}}}}}}};
  for (json& t : extras["tools"]) {
    t["eager_input_streaming"] = true;
    t["strict"] = true;
    t["cache_control"] = {{"type", "ephemeral"}};
  }
  extras["tools"].push_back({{"name", "Deferred"}, {"description", "never call this"},
                             {"input_schema", {{"type", "object"}}}, {"defer_loading", true}});
  json a = post_json("/v1/messages", plain);
  json b = post_json("/v1/messages", extras);
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(TinyAssets::get().decode(reqs[0].prompt), TinyAssets::get().decode(reqs[1].prompt))
      << "a no-op field (or the deferred tool) reached the prompt";
  // display omitted: the thinking block is there, without its text; the edits applied: none.
  ASSERT_EQ(b["content"][0]["type"], "thinking") << b.dump();
  EXPECT_EQ(b["content"][0]["thinking"], "");
  EXPECT_EQ(a["content"][0]["thinking"], "Let me think.");
  EXPECT_EQ(b["context_management"], json({{"applied_edits", json::array()}}));
  EXPECT_FALSE(a.contains("context_management"));
  json sb = extras;
  sb["stream"] = true;
  auto s = post("/v1/messages", sb.dump());
  ASSERT_TRUE(s && s->status == 200);
  bool thinking_block = false;
  for (const Event& e : anthropic_events(s->body)) {
    EXPECT_FALSE(e.name == "content_block_delta" && e.data["delta"]["type"] == "thinking_delta") << "omitted: " << s->body;
    thinking_block |= e.name == "content_block_start" && e.data["content_block"]["type"] == "thinking";
    if (e.name == "message_delta") EXPECT_EQ(e.data["context_management"], json({{"applied_edits", json::array()}}));
  }
  EXPECT_TRUE(thinking_block);
  // count_tokens takes the same body and counts the same prompt.
  json cb = extras;
  cb.erase("max_tokens");
  EXPECT_EQ(post_json("/v1/messages/count_tokens", cb), json({{"input_tokens", reqs[1].prompt.size()}}));
}

// Two assistant turns after the last user text (a tool loop): the M2 template renders the
// reasoning of both; clear_thinking_20251015 keep {thinking_turns: 1} drops the older one.
TEST_F(AnthropicTest, ClearThinkingEditDropsTheOlderTurnsReasoning) {
  start();
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather and time?"},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "FIRST-REASONING", "signature": ""},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "SECOND-REASONING", "signature": ""},
      {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {"tz": "CET"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "noon"}]}])");
  auto edit = [](json keep) { return json({{"edits", {{{"type", "clear_thinking_20251015"}, {"keep", keep}}}}}); };
  const json base = msg_body({{"tools", anthropic_tools()}, {"messages", messages}});
  json all = base, one = base, zero = base;
  all["context_management"] = edit("all");
  one["context_management"] = edit({{"type", "thinking_turns"}, {"value", 1}});
  zero["context_management"] = edit({{"type", "thinking_turns"}, {"value", 0}});
  json r_all = post_json("/v1/messages", all);
  const std::string p_all = TinyAssets::get().decode(engine.requests().back().prompt);
  const size_t n_all = engine.requests().back().prompt.size();
  json r_one = post_json("/v1/messages", one);
  const std::string p_one = TinyAssets::get().decode(engine.requests().back().prompt);
  const size_t n_one = engine.requests().back().prompt.size();
  post_json("/v1/messages", zero);
  const std::string p_zero = TinyAssets::get().decode(engine.requests().back().prompt);
  EXPECT_NE(p_all.find("FIRST-REASONING"), std::string::npos) << p_all;
  EXPECT_NE(p_all.find("SECOND-REASONING"), std::string::npos) << p_all;
  EXPECT_EQ(p_one.find("FIRST-REASONING"), std::string::npos) << p_one;
  EXPECT_NE(p_one.find("SECOND-REASONING"), std::string::npos) << p_one;
  EXPECT_EQ(p_zero.find("SECOND-REASONING"), std::string::npos) << p_zero;
  EXPECT_EQ(r_all["context_management"], json({{"applied_edits", json::array()}}));
  ASSERT_EQ(r_one["context_management"]["applied_edits"].size(), 1u) << r_one.dump();
  const json& applied = r_one["context_management"]["applied_edits"][0];
  EXPECT_EQ(applied["type"], "clear_thinking_20251015");
  EXPECT_EQ(applied["cleared_thinking_turns"], 1);
  EXPECT_EQ(applied["cleared_input_tokens"], int64_t(n_all) - int64_t(n_one));
  EXPECT_GT(n_all, n_one);
  // The edit given without keep is Anthropic's default, keep the last turn's thinking.
  json dflt = base;
  dflt["context_management"] = {{"edits", {{{"type", "clear_thinking_20251015"}}}}};
  post_json("/v1/messages", dflt);
  EXPECT_EQ(TinyAssets::get().decode(engine.requests().back().prompt), p_one);
  // count_tokens counts the edited prompt.
  one.erase("max_tokens");
  EXPECT_EQ(post_json("/v1/messages/count_tokens", one)["input_tokens"], n_one);
}

// A role "system" message inside messages (Claude Code puts its environment there, after the
// user's first message) reaches the prompt as a <system-reminder> in the user turn before it —
// the M2 template would drop a system message anywhere but first — and the same conversation
// sent to the chat route with that text in the user message renders the same prompt.
TEST_F(AnthropicTest, SystemMessageInsideMessagesIsFoldedIntoTheUserTurn) {
  start();
  const json anthropic = msg_body({{"system", "Top."}, {"tools", anthropic_tools()}, {"messages", json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Read it."}]},
    {"role": "system", "content": [{"type": "text", "text": "ENV: cwd /tmp", "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"tz": "CET"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon"}]},
    {"role": "system", "content": "LATE NOTE"}])")}});
  ojson openai = ojson::parse(chat_body({{"max_tokens", 1000}}).dump());
  openai["tools"] = ordered_openai_tools();
  openai["messages"] = ojson::parse(R"([
    {"role": "system", "content": "Top."},
    {"role": "user", "content": "Read it.\n\n<system-reminder>\nENV: cwd /tmp\n</system-reminder>"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "toolu_1", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "noon"},
    {"role": "user", "content": "<system-reminder>\nLATE NOTE\n</system-reminder>"}])");
  auto [a, o] = both_prompts(anthropic, openai);
  ASSERT_FALSE(a.empty());
  const std::string prompt = TinyAssets::get().decode(a);
  EXPECT_EQ(prompt, TinyAssets::get().decode(o));
  EXPECT_NE(prompt.find("<system-reminder>\nENV: cwd /tmp\n</system-reminder>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("LATE NOTE"), std::string::npos) << prompt;
  // Before any user turn it goes in front of the first one.
  json first = msg_body({{"messages", json::parse(R"([{"role": "system", "content": "EARLY"},
                                                      {"role": "user", "content": "Hi"}])")}});
  post_json("/v1/messages", first);
  const std::string p1 = TinyAssets::get().decode(engine.requests().back().prompt);
  EXPECT_NE(p1.find("<system-reminder>\nEARLY\n</system-reminder>\n\nHi"), std::string::npos) << p1;
}

// disable_parallel_tool_use: the script writes two calls; the reply ends after the first
// (stop_reason tool_use), streamed or not.
TEST_F(AnthropicTest, DisableParallelToolUseStopsAfterOneCall) {
  start();
  engine.script = TinyAssets::get().say(kToolText);
  for (const char* type : {"auto", "any"}) {
    const json body = msg_body({{"tools", anthropic_tools()},
                                {"tool_choice", {{"type", type}, {"disable_parallel_tool_use", true}}}});
    json r = post_json("/v1/messages", body);
    size_t n_calls = 0;
    for (const json& b : r["content"]) n_calls += b["type"] == "tool_use";
    EXPECT_EQ(n_calls, 1u) << type << ": " << r.dump();
    EXPECT_EQ(r["stop_reason"], "tool_use") << r.dump();
    EXPECT_EQ(r["content"].back()["name"], "get_weather") << r.dump();
    json sb = body;
    sb["stream"] = true;
    auto s = post("/v1/messages", sb.dump());
    ASSERT_TRUE(s && s->status == 200);
    json rebuilt = replay_stream(anthropic_events(s->body));
    n_calls = 0;
    for (const json& b : rebuilt["content"]) n_calls += b["type"] == "tool_use";
    EXPECT_EQ(n_calls, 1u) << type << ": " << s->body;
    EXPECT_EQ(rebuilt["stop_reason"], "tool_use");
  }
  // false (and absent): both calls.
  json r = post_json("/v1/messages", msg_body({{"tools", anthropic_tools()},
                                               {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", false}}}}));
  EXPECT_EQ(r["content"].size(), 3u) << r.dump();
}

// thinking adaptive and output_config.effort on templates that have a switch.
TEST_F(AnthropicTest, AdaptiveThinkingAndEffortMapToTheSwitch) {
  for (const std::string var : {"thinking_mode", "enable_thinking"}) {
    const ChatTemplate tmpl({{"default", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                         "[{{ " + var + " if " + var + " is defined else 'unset' }}]"}},
                            nullptr);
    chat::ServedModel m;
    m.name = "tiny-m2";
    m.tokenizer = TinyAssets::get().tok.get();
    m.chat_template = &tmpl;
    m.eos_ids = {TinyAssets::get().eos};
    server = std::make_unique<Server>(engine, m, opts);
    port = server->start("127.0.0.1", 0);
    ASSERT_GT(port, 0);
    const bool mode = var == "thinking_mode";
    const std::vector<std::tuple<json, json, std::string>> cases = {
        {json({{"type", "adaptive"}}), nullptr, mode ? "[adaptive]" : "[true]"},
        {json({{"type", "adaptive"}, {"display", "summarized"}}), json({{"effort", "high"}}), mode ? "[enabled]" : "[true]"},
        {json({{"type", "adaptive"}}), json({{"effort", "low"}}), mode ? "[adaptive]" : "[true]"},
        {nullptr, json({{"effort", "max"}}), mode ? "[enabled]" : "[true]"},
        {json({{"type", "disabled"}}), json({{"effort", "high"}}), mode ? "[disabled]" : "[false]"},
        {nullptr, nullptr, "[unset]"}};
    for (const auto& [thinking, oc, want] : cases) {
      json b = msg_body();
      if (!thinking.is_null()) b["thinking"] = thinking;
      if (!oc.is_null()) b["output_config"] = oc;
      post_json("/v1/messages", b);
      const std::string prompt = TinyAssets::get().decode(engine.requests().back().prompt);
      EXPECT_NE(prompt.find(want), std::string::npos) << var << " " << b.dump() << ": " << prompt;
    }
    server->stop();
    server.reset();
  }
}

// A prompt over the context, worded as Anthropic words it (Claude Code parses
// /prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)/ and matches the whole text), and
// count_tokens still counts it.
TEST_F(AnthropicTest, ContextOverflowIsPromptIsTooLong) {
  engine.context = 300;
  start();
  json big = msg_body({{"messages", {{{"role", "user"}, {"content", std::string(3000, 'a') + " b c d"}}}}});
  auto r = post("/v1/messages", big.dump());
  expect_anthropic_error(r, 400, "over the context");
  const std::string message = json::parse(r->body)["error"]["message"];
  json cb = big;
  cb.erase("max_tokens");
  const int64_t n = post_json("/v1/messages/count_tokens", cb)["input_tokens"];
  EXPECT_GT(n, 299);
  EXPECT_EQ(message, "prompt is too long: " + std::to_string(n) + " tokens > 299 maximum");
  // Refused from its size before encoding: a lower bound, in the same words.
  json huge = msg_body({{"messages", {{{"role", "user"}, {"content", std::string(200000, 'a')}}}}});
  r = post("/v1/messages", huge.dump());
  expect_anthropic_error(r, 400, "far over the context");
  const std::string m2 = json::parse(r->body)["error"]["message"];
  EXPECT_EQ(m2.rfind("prompt is too long: ", 0), 0u) << m2;
  EXPECT_NE(m2.find(" tokens > 299 maximum"), std::string::npos) << m2;
  EXPECT_TRUE(engine.requests().empty());
}

}  // namespace
}  // namespace mmx::server
