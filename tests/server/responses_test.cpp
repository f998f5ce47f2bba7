// The OpenAI Responses API (POST /v1/responses) end to end over the scripted FakeEngine, with the
// tiny M2 checkpoint's real tokenizer and chat template (the fixture of server_test.cpp). The
// oracle for the request conversion is the chat route: the same conversation sent both ways must
// reach the engine as the same prompt ids; the oracle for the stream is the whole response of
// the same script (one builder makes both, and the test rebuilds the output from the deltas).
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server/request_fields.h"
#include "server/responses_request.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

using ojson = nlohmann::ordered_json;

json resp_body(json extra = json::object()) {
  json b = {{"model", "tiny-m2"}, {"input", "Hi"}};
  b.update(extra);
  return b;
}

// tools_json() (the chat route's) as Responses function tools.
json resp_tools() {
  return json::parse(R"([
    {"type": "function", "name": "get_weather", "description": "Weather", "strict": false,
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}},
    {"type": "function", "name": "get_time", "description": "Time",
     "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}])");
}

struct Event {
  std::string name;
  json data;
};

// "event: TYPE\ndata: {...}\n\n" -> events in order; ": keep-alive" comments counted.
std::vector<Event> response_events(const std::string& body, int* n_comments = nullptr) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind(":", 0) == 0) {
      if (n_comments) ++*n_comments;
      continue;
    }
    EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
    const size_t nl = ev.find('\n');
    if (nl == std::string::npos) continue;
    EXPECT_EQ(ev.compare(nl + 1, 6, "data: "), 0) << ev;
    Event e{ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name) << ev;
    out.push_back(std::move(e));
  }
  EXPECT_EQ(pos, body.size()) << "trailing bytes";
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].data["sequence_number"], i) << out[i].name;
  return out;
}

// The output items rebuilt from the deltas alone (ids kept from output_item.added).
json replay_output(const std::vector<Event>& ev) {
  json out = json::array();
  for (const Event& e : ev) {
    const json& d = e.data;
    if (e.name == "response.output_item.added") {
      EXPECT_EQ(d["output_index"], out.size());
      json item = d["item"];
      item["text"] = "";
      out.push_back(item);
    } else if (e.name == "response.reasoning_text.delta" || e.name == "response.output_text.delta" ||
               e.name == "response.function_call_arguments.delta") {
      json& item = out.at(d["output_index"].get<size_t>());
      EXPECT_EQ(d["item_id"], item["id"]);
      item["text"] = item["text"].get<std::string>() + d["delta"].get<std::string>();
    }
  }
  return out;
}

class ResponsesTest : public ServerTest {
 protected:
  // A Responses body and the equivalent chat body: the prompts the engine saw for each.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> both_prompts(const json& responses, const ojson& chat) {
    auto a = post("/v1/responses", responses.dump());
    EXPECT_TRUE(a && a->status == 200) << (a ? a->body : "no answer");
    auto o = post("/v1/chat/completions", chat.dump());
    EXPECT_TRUE(o && o->status == 200) << (o ? o->body : "no answer");
    auto reqs = engine.requests();
    EXPECT_GE(reqs.size(), 2u);
    if (reqs.size() < 2) return {};
    return {reqs[reqs.size() - 2].prompt, reqs.back().prompt};
  }
  std::string last_prompt() { return TinyAssets::get().decode(engine.requests().back().prompt); }
};

// ---- the whole response ----

TEST_F(ResponsesTest, WholeResponseWithReasoningAndText) {
  start();
  engine.n_cached = 2;
  json r = post_json("/v1/responses", resp_body({{"instructions", "Be brief."}, {"temperature", 0.5}, {"top_p", 0.9},
                                                 {"max_output_tokens", 500}, {"metadata", {{"k", "v"}}}}));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["model"], "tiny-m2");
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  const json& rs = r["output"][0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_EQ(rs["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(rs["content"], json::parse(R"([{"type": "reasoning_text", "text": "Let me think."}])"));
  EXPECT_EQ(rs["summary"], json::array()) << "no summary was asked";
  const json& msg = r["output"][1];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(msg["content"].size(), 1u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], "Hello there, friend!");
  EXPECT_EQ(msg["content"][0]["annotations"], json::array());
  auto reqs = engine.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const json& u = r["usage"];
  EXPECT_EQ(u["input_tokens"], reqs[0].prompt.size());
  EXPECT_EQ(u["input_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(u["output_tokens"], engine.script.size());
  EXPECT_GT(u["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), 0);
  EXPECT_LT(u["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), u["output_tokens"].get<int64_t>());
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int64_t>() + u["output_tokens"].get<int64_t>());
  // The request fields it repeats, and what reached the engine.
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["max_output_tokens"], 500);
  EXPECT_FLOAT_EQ(r["temperature"].get<float>(), 0.5f);
  EXPECT_FLOAT_EQ(r["top_p"].get<float>(), 0.9f);
  EXPECT_EQ(r["store"], true);
  EXPECT_EQ(r["parallel_tool_calls"], true);
  EXPECT_EQ(r["tool_choice"], "auto");
  EXPECT_EQ(r["tools"], json::array());
  EXPECT_EQ(r["metadata"], json({{"k", "v"}}));
  EXPECT_FALSE(r.contains("mmx_ignored_tools"));
  EXPECT_FLOAT_EQ(reqs[0].sampling.temperature, 0.5f);
  EXPECT_EQ(reqs[0].max_tokens, 500);
  EXPECT_NE(last_prompt().find("Be brief."), std::string::npos);
}

TEST_F(ResponsesTest, ReasoningSummaryAskedCarriesTheReasoning) {
  start();
  json r = post_json("/v1/responses", resp_body({{"reasoning", {{"summary", "auto"}}}}));
  EXPECT_EQ(r["output"][0]["summary"], json::parse(R"([{"type": "summary_text", "text": "Let me think."}])"));
  EXPECT_EQ(r["reasoning"]["summary"], "auto");
  // M2's template has no reasoning switch: every effort, "none" included, is the chat rule's
  // stated no-op (docs/api.md); an effort that is not one is still a 400 naming it.
  post_json("/v1/responses", resp_body({{"reasoning", {{"effort", "high"}}}}));
  json none = post_json("/v1/responses", resp_body({{"reasoning", {{"effort", "none"}}}}));
  EXPECT_EQ(none["output"][0]["type"], "reasoning") << none.dump();
  auto bad = post("/v1/responses", resp_body({{"reasoning", {{"effort", "extreme"}}}}).dump());
  expect_error(bad, 400, "effort extreme");
}

TEST_F(ResponsesTest, MaxOutputTokensEndsItIncomplete) {
  start();
  json r = post_json("/v1/responses", resp_body({{"max_output_tokens", 3}}));
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(r["usage"]["output_tokens"], 3);
}

// ---- the request conversion ----

TEST_F(ResponsesTest, ConversationConvertsLikeTheChatRoute) {
  start();
  const json responses = resp_body({{"instructions", "Be brief."}, {"tools", resp_tools()}, {"input", json::parse(R"([
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use tools."}]},
    {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call the tool."}],
     "encrypted_content": null},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\", \"days\": 2}", "status": "completed"},
    {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{\"tz\": \"CET\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "no clock"}]},
    {"role": "developer", "content": [{"type": "input_text", "text": "Mind the permissions."}]},
    {"role": "user", "content": "Thanks."}])")}});
  ojson chat = ojson::parse(chat_body().dump());
  chat["tools"] = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time",
      "parameters": {"properties": {"tz": {"type": "string"}}, "type": "object"}}}])");
  chat["messages"] = ojson::parse(R"([
    {"role": "system", "content": "Be brief.\n\nUse tools."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Call the tool.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "no clock"},
    {"role": "user", "content": [{"type": "text", "text": "Mind the permissions."}]},
    {"role": "user", "content": "Thanks."}])");
  auto [a, o] = both_prompts(responses, chat);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(TinyAssets::get().decode(a), TinyAssets::get().decode(o));
  const std::string prompt = TinyAssets::get().decode(a);
  // Every system / developer text reaches the prompt (the template reads one system message).
  for (const char* want : {"Be brief.", "Use tools.", "sunny", "no clock", "Mind the permissions.", "Thanks.", "Paris",
                           "get_time"})
    EXPECT_NE(prompt.find(want), std::string::npos) << want << "\n" << prompt;
}

TEST_F(ResponsesTest, NamespaceToolsAreFlattenedAndCallsMappedBack) {
  EXPECT_EQ(flat_tool_name("mcp__fs__", "read"), "mcp__fs__read");
  EXPECT_EQ(flat_tool_name("multi_agent_v1", "spawn_agent"), "multi_agent_v1__spawn_agent");
  start();
  // Codex's shape: {type: namespace, name, description, tools: [function tools]}.
  const json tools = json::parse(R"([
    {"type": "namespace", "name": "mcp__fs__", "description": "Files", "tools": [
      {"type": "function", "name": "read", "description": "Read a file", "strict": false,
       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]},
    {"type": "namespace", "name": "multi_agent_v1", "description": "Agents", "tools": [
      {"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {}}}]}])");
  engine.script = TinyAssets::get().say(
      "Read it.</think>\n\n<minimax:tool_call>\n<invoke name=\"mcp__fs__read\">\n<parameter name=\"path\">a.txt"
      "</parameter>\n</invoke>\n</minimax:tool_call>");
  json r = post_json("/v1/responses", resp_body({{"tools", tools}}));
  const std::string prompt = last_prompt();
  EXPECT_NE(prompt.find("mcp__fs__read"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("multi_agent_v1__spawn_agent"), std::string::npos) << prompt;
  const json& call = r["output"].back();
  ASSERT_EQ(call["type"], "function_call") << r.dump();
  EXPECT_EQ(call["name"], "read");
  EXPECT_EQ(call["namespace"], "mcp__fs__");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"path", "a.txt"}}));
  EXPECT_EQ(r["tools"], tools) << "the tools are repeated as sent";
  // The call sent back (with its namespace) renders as the flat name the model wrote.
  json next = resp_body({{"tools", tools}, {"input", json::array({
      {{"role", "user"}, {"content", "Hi"}},
      {{"type", "function_call"}, {"call_id", call["call_id"]}, {"name", "read"}, {"namespace", "mcp__fs__"},
       {"arguments", call["arguments"]}},
      {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "file text"}}})}});
  post_json("/v1/responses", next);
  const std::string p2 = last_prompt();
  EXPECT_NE(p2.find("<invoke name=\"mcp__fs__read\">"), std::string::npos) << p2;
  EXPECT_NE(p2.find("file text"), std::string::npos) << p2;
  // A forced call by namespace + name.
  post_json("/v1/responses", resp_body({{"tools", tools}, {"tool_choice",
      {{"type", "function"}, {"name", "read"}, {"namespace", "mcp__fs__"}}}}));
}

TEST_F(ResponsesTest, HostedToolsAreNotOfferedAndAreReported) {
  start();
  json tools = resp_tools();
  tools.push_back({{"type", "web_search"}, {"external_web_access", false}});
  tools.push_back({{"type", "custom"}, {"name", "apply_patch"}, {"format", {{"type", "grammar"}}}});
  tools.push_back({{"type", "code_interpreter"}, {"container", {{"type", "auto"}}}});
  json r = post_json("/v1/responses", resp_body({{"tools", tools}}));
  EXPECT_EQ(r["mmx_ignored_tools"], json::parse(R"([{"type": "web_search"}, {"type": "custom", "name": "apply_patch"},
                                                     {"type": "code_interpreter"}])"));
  const std::string prompt = last_prompt();
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);
  EXPECT_EQ(prompt.find("apply_patch"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("web_search"), std::string::npos) << prompt;
}

// ---- tool calls ----

TEST_F(ResponsesTest, ToolCallRoundTrip) {
  start();
  engine.script = TinyAssets::get().say(kToolText);
  json r = post_json("/v1/responses", resp_body({{"tools", resp_tools()}}));
  ASSERT_EQ(r["output"].size(), 3u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  const json& c0 = r["output"][1];
  EXPECT_EQ(c0["type"], "function_call");
  EXPECT_EQ(c0["name"], "get_weather");
  EXPECT_EQ(c0["status"], "completed");
  EXPECT_EQ(c0["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(c0["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_FALSE(c0.contains("namespace"));
  EXPECT_EQ(json::parse(c0["arguments"].get<std::string>()), json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(r["output"][2]["name"], "get_time");
  EXPECT_NE(r["output"][2]["call_id"], c0["call_id"]);
  // The client sends the output items back with the results (store: false, the whole input).
  json input = json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const json& it : r["output"]) input.push_back(it);
  input.push_back({{"type", "function_call_output"}, {"call_id", c0["call_id"]}, {"output", "sunny, 21C"}});
  input.push_back({{"type", "function_call_output"}, {"call_id", r["output"][2]["call_id"]}, {"output", "09:00"}});
  engine.script = TinyAssets::get().say("Done.</think>\n\nIt is sunny.");
  json r2 = post_json("/v1/responses", resp_body({{"tools", resp_tools()}, {"store", false}, {"input", input}}));
  EXPECT_EQ(r2["output"].back()["content"][0]["text"], "It is sunny.");
  const std::string p = last_prompt();
  for (const char* want : {"sunny, 21C", "09:00", "<invoke name=\"get_weather\">", "<invoke name=\"get_time\">"})
    EXPECT_NE(p.find(want), std::string::npos) << want << "\n" << p;
}

TEST_F(ResponsesTest, ParallelToolCallsFalseStopsAfterTheFirstCall) {
  start();
  engine.script = TinyAssets::get().say(kToolText);
  engine.token_delay_ms = 2;  // the rest of the script is still being generated when the call ends
  json one = post_json("/v1/responses", resp_body({{"tools", resp_tools()}, {"parallel_tool_calls", false}}));
  ASSERT_EQ(one["output"].size(), 2u) << one.dump();
  EXPECT_EQ(one["output"][1]["name"], "get_weather");
  EXPECT_EQ(one["status"], "completed");
  EXPECT_EQ(one["parallel_tool_calls"], false);
  EXPECT_LT(one["usage"]["output_tokens"].get<size_t>(), engine.script.size()) << "the generation was not stopped";
  // Streamed: no piece of the second call either.
  auto s = post("/v1/responses", resp_body({{"tools", resp_tools()}, {"parallel_tool_calls", false}, {"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::vector<Event> ev = response_events(s->body);
  int n_calls = 0;
  for (const Event& e : ev) n_calls += e.name == "response.output_item.added" && e.data["item"]["type"] == "function_call";
  EXPECT_EQ(n_calls, 1) << s->body;
  EXPECT_EQ(ev.back().name, "response.completed");
  // parallel_tool_calls true (the default): both calls.
  engine.token_delay_ms = 0;
  json both = post_json("/v1/responses", resp_body({{"tools", resp_tools()}, {"parallel_tool_calls", true}}));
  EXPECT_EQ(both["output"].size(), 3u);
}

TEST_F(ResponsesTest, ToolChoiceForcesLikeTheChatRoute) {
  start();
  const std::vector<std::pair<json, json>> pairs = {
      {json("required"), json("required")},
      {json({{"type", "function"}, {"name", "get_time"}}), json({{"type", "function"}, {"function", {{"name", "get_time"}}}})},
      {json({{"type", "allowed_tools"}, {"mode", "required"}, {"tools", {{{"type", "function"}, {"name", "get_time"}}}}}),
       json("required")}};
  for (const auto& [resp, chat] : pairs) {
    auto a = post("/v1/responses", resp_body({{"tools", resp_tools()}, {"tool_choice", resp}}).dump());
    auto o = post("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"tool_choice", chat}}).dump());
    ASSERT_TRUE(a && o);
    EXPECT_EQ(a->status, o->status) << a->body << "\n" << o->body;
    auto reqs = engine.requests();
    ASSERT_GE(reqs.size(), 2u);
    EXPECT_EQ(bool(reqs[reqs.size() - 2].constraint), bool(reqs.back().constraint)) << resp.dump();
    EXPECT_TRUE(reqs.back().constraint) << resp.dump();
  }
  // allowed_tools narrows what the model is told about.
  post_json("/v1/responses", resp_body({{"tools", resp_tools()}, {"tool_choice",
      {{"type", "allowed_tools"}, {"mode", "auto"}, {"tools", {{{"type", "function"}, {"name", "get_time"}}}}}}}));
  EXPECT_EQ(last_prompt().find("get_weather"), std::string::npos);
  EXPECT_FALSE(engine.requests().back().constraint);
  // none: no tools in the prompt.
  post_json("/v1/responses", resp_body({{"tools", resp_tools()}, {"tool_choice", "none"}}));
  EXPECT_EQ(last_prompt().find("get_weather"), std::string::npos);
}

// ---- streaming ----

TEST_F(ResponsesTest, StreamEventOrderAndTheWholeResponse) {
  start();
  engine.script = TinyAssets::get().say("Hmm.</think>\n\nLet me check.<minimax:tool_call>\n<invoke name=\"get_time\">\n"
                                        "<parameter name=\"tz\">CET</parameter>\n</invoke>\n</minimax:tool_call>");
  const json body = resp_body({{"tools", resp_tools()}, {"reasoning", {{"summary", "auto"}}}});
  json whole = post_json("/v1/responses", body);
  json sb = body;
  sb["stream"] = true;
  auto s = post("/v1/responses", sb.dump());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
  std::vector<Event> ev = response_events(s->body);
  // The order, deltas collapsed.
  std::vector<std::string> order;
  for (const Event& e : ev)
    if (order.empty() || order.back() != e.name || e.name.find(".delta") == std::string::npos) order.push_back(e.name);
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  // Summary and raw reasoning deltas alternate per piece: compare with those collapsed too.
  std::vector<std::string> got;
  for (const std::string& n : order)
    if (!(n == "response.reasoning_summary_text.delta" || n == "response.reasoning_text.delta") ||
        std::find(got.begin(), got.end(), n) == got.end())
      got.push_back(n);
  EXPECT_EQ(got, want) << s->body;
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_TRUE(ev[0].data["response"]["usage"].is_null());
  // The final response is the whole one (ids and created_at aside); the deltas rebuild its items.
  json fin = ev.back().data["response"];
  ASSERT_EQ(fin["output"].size(), whole["output"].size());
  json rebuilt = replay_output(ev);
  for (size_t i = 0; i < whole["output"].size(); ++i) {
    json a = fin["output"][i], b = whole["output"][i];
    EXPECT_EQ(rebuilt[i]["id"], a["id"]);
    const std::string type = a["type"];
    const std::string text = type == "reasoning" ? a["content"][0]["text"]
                             : type == "message" ? a["content"][0]["text"]
                                                 : a["arguments"];
    EXPECT_EQ(rebuilt[i]["text"], text) << i;
    for (json* x : {&a, &b}) {
      x->erase("id");
      x->erase("call_id");
    }
    EXPECT_EQ(a, b) << i;
  }
  for (const char* k : {"id", "created_at"}) fin.erase(k), whole.erase(k);
  for (json& it : fin["output"]) it.erase("id"), it.erase("call_id");
  for (json& it : whole["output"]) it.erase("id"), it.erase("call_id");
  EXPECT_EQ(fin, whole);
}

TEST_F(ResponsesTest, KeepAliveCommentsWhileWaiting) {
  opts.stream_ping_ms = 20;
  start();
  engine.token_delay_ms = 60;
  engine.script = TinyAssets::get().say("a</think>\n\nb");
  auto s = post("/v1/responses", resp_body({{"stream", true}}).dump());
  ASSERT_TRUE(s);
  int n_comments = 0;
  std::vector<Event> ev = response_events(s->body, &n_comments);
  EXPECT_GT(n_comments, 0);
  EXPECT_NE(s->body.find(": keep-alive\n\n"), std::string::npos);
  EXPECT_EQ(ev.back().name, "response.completed");
}

TEST_F(ResponsesTest, EngineErrorMidStreamIsResponseFailed) {
  start();
  engine.fail_after = 3;
  auto s = post("/v1/responses", resp_body({{"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::vector<Event> ev = response_events(s->body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front().name, "response.created");
  EXPECT_EQ(ev.back().name, "response.failed");
  EXPECT_EQ(ev.back().data["response"]["status"], "failed");
  EXPECT_TRUE(ev.back().data["response"]["error"]["message"].is_string());
}

// ---- store, previous_response_id, item_reference ----

TEST_F(ResponsesTest, PreviousResponseIdContinuesAStoredResponse) {
  start();
  json r1 = post_json("/v1/responses", resp_body({{"instructions", "Be brief."}, {"input", "Weather in Paris?"}}));
  EXPECT_EQ(r1["store"], true);  // the API's default
  engine.script = TinyAssets::get().say("Again.</think>\n\nStill sunny.");
  json r2 = post_json("/v1/responses", resp_body({{"previous_response_id", r1["id"]}, {"input", "And tomorrow?"}}));
  EXPECT_EQ(r2["previous_response_id"], r1["id"]);
  std::string p = last_prompt();
  for (const char* want : {"Weather in Paris?", "Hello there, friend!", "And tomorrow?"})
    EXPECT_NE(p.find(want), std::string::npos) << want << "\n" << p;
  EXPECT_EQ(p.find("Be brief."), std::string::npos) << "instructions are not carried over (as OpenAI's)";
  // A chain of three: r3 sees r1's and r2's turns.
  post_json("/v1/responses", resp_body({{"previous_response_id", r2["id"]}, {"input", "Thanks."}}));
  p = last_prompt();
  for (const char* want : {"Weather in Paris?", "Still sunny.", "And tomorrow?", "Thanks."})
    EXPECT_NE(p.find(want), std::string::npos) << want << "\n" << p;
  // The same conversation sent whole is the same prompt.
  json whole_input = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  for (const json& it : r1["output"]) whole_input.push_back(it);
  whole_input.push_back({{"role", "user"}, {"content", "And tomorrow?"}});
  for (const json& it : r2["output"]) whole_input.push_back(it);
  whole_input.push_back({{"role", "user"}, {"content", "Thanks."}});
  post_json("/v1/responses", resp_body({{"input", whole_input}, {"store", false}}));
  EXPECT_EQ(last_prompt(), p);
  // store: false is not kept; an unknown id is a 400 naming the field.
  json r4 = post_json("/v1/responses", resp_body({{"store", false}}));
  EXPECT_EQ(r4["store"], false);
  for (const json& id : {r4["id"], json("resp_nope")}) {
    auto bad = post("/v1/responses", resp_body({{"previous_response_id", id}}).dump());
    expect_error(bad, 400, id.dump());
    EXPECT_EQ(json::parse(bad->body)["error"]["param"], "previous_response_id") << bad->body;
  }
}

TEST_F(ResponsesTest, ItemReferenceNamesAStoredItem) {
  start();
  json r1 = post_json("/v1/responses", resp_body());
  const json input = json::array({{{"role", "user"}, {"content", "Hi"}},
                                  {{"type", "item_reference"}, {"id", r1["output"][0]["id"]}},
                                  {{"type", "item_reference"}, {"id", r1["output"][1]["id"]}},
                                  {{"role", "user"}, {"content", "More?"}}});
  post_json("/v1/responses", resp_body({{"input", input}}));
  const std::string p = last_prompt();
  EXPECT_NE(p.find("Hello there, friend!"), std::string::npos) << p;
  EXPECT_NE(p.find("More?"), std::string::npos) << p;
  auto bad = post("/v1/responses", resp_body({{"input", {{{"type", "item_reference"}, {"id", "msg_nope"}}}}}).dump());
  expect_error(bad, 400, "unknown item");
  EXPECT_NE(bad->body.find("input[0]"), std::string::npos) << bad->body;
}

TEST(ResponseStoreTest, BoundedLeastRecentlyUsedFirst) {
  ResponseStore s(2, 1 << 20);
  s.put("a", ojson::array({{{"id", "i1"}}}));
  s.put("b", ojson::array({{{"id", "i2"}}}));
  EXPECT_TRUE(s.conversation("a"));  // a is now the most recent
  s.put("c", ojson::array());
  EXPECT_FALSE(s.conversation("b"));
  EXPECT_TRUE(s.item("i1"));
  EXPECT_FALSE(s.item("i2"));
  EXPECT_EQ(s.size(), 2u);
  ResponseStore small(10, 40);  // bytes bound
  small.put("x", ojson::array({std::string(30, 'x')}));
  small.put("y", ojson::array({std::string(30, 'y')}));
  EXPECT_FALSE(small.conversation("x"));
  EXPECT_TRUE(small.conversation("y"));
}

// ---- errors ----

TEST_F(ResponsesTest, MalformedRequestsAre400sNamingTheField) {
  start();
  auto with = [](json extra) { return resp_body(extra); };
  struct Case {
    json body;
    std::string param, says;
  };
  const std::vector<Case> cases = {
      {with({{"frobnicate", 1}}), "frobnicate", "frobnicate"},
      {json({{"model", "tiny-m2"}}), "input", "input"},
      {with({{"input", 5}}), "input", "string or a list"},
      {with({{"input", {{{"type", "web_search_call"}, {"id", "x"}}}}}), "input", "input[0].type"},
      {with({{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}),
       "input", "input[0].content[0]"},
      {with({{"input", {{{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "x"}}}}}}}}),
       "input", "text only"},
      {with({{"input", {{{"role", "robot"}, {"content", "x"}}}}}), "input", "input[0].role"},
      {with({{"input", {{{"type", "message"}, {"role", "user"}, {"content", "x"}, {"colour", 1}}}}}), "input",
       "input[0].colour"},
      {with({{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", json::object()}}}}}),
       "input", "input[0].arguments"},
      {with({{"input", {{{"type", "function_call_output"}, {"call_id", "c"}}}}}), "input", "input[0].output"},
      {with({{"input", {{{"type", "reasoning"}, {"summary", json::array()}, {"encrypted_content", "gAAA"}}}}}), "input",
       "encrypted_content"},
      {with({{"tools", {{{"type", "function"}}}}}), "tools", "tools[0].name"},
      {with({{"tools", {{{"type", "namespace"}, {"name", "n"}, {"tools", {{{"type", "web_search"}}}}}}}}), "tools",
       "tools[0].tools[0]"},
      {with({{"tool_choice", {{"type", "web_search_preview"}}}}), "tool_choice", "hosted"},
      {with({{"tools", resp_tools()}, {"tool_choice", {{"type", "function"}, {"name", "nope"}}}}), "tool_choice", "nope"},
      {with({{"text", {{"verbosity", "high"}}}}), "text", "verbosity"},
      {with({{"text", {{"format", {{"type", "yaml"}}}}}}), "text", "text.format.type"},
      {with({{"truncation", "auto"}}), "truncation", "disabled"},
      {with({{"conversation", "conv_1"}}), "conversation", "previous_response_id"},
      {with({{"background", true}}), "background", "background"},
      {with({{"max_output_tokens", 0}}), "max_output_tokens", "max_output_tokens"},
      {with({{"temperature", 9}}), "temperature", "temperature"},
      {with({{"store", "yes"}}), "store", "boolean"},
      {with({{"include", {"message.output_text.logprobs"}}}), "include", "chat/completions"},
      {with({{"reasoning", {{"summary", "verbose"}}}}), "reasoning", "reasoning.summary"},
  };
  for (const Case& c : cases) {
    auto r = post("/v1/responses", c.body.dump());
    expect_error(r, 400, c.body.dump());
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["param"], c.param) << c.body.dump() << ": " << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.says), std::string::npos)
        << c.body.dump() << ": " << r->body;
  }
  EXPECT_TRUE(engine.requests().empty()) << "a refused request reached the engine";
}

// Every field of the /v1/responses table is accepted or refused as the table says.
TEST_F(ResponsesTest, EveryTableFieldIsHonouredOrRefusedByName) {
  start();
  for (const FieldRule& f : field_rules(Endpoint::kResponses)) {
    json b = resp_body();
    if (b.contains(f.name)) continue;
    const json sample = f.name == "instructions" ? json("Be brief.")
                        : f.name == "tools" ? resp_tools()
                        : f.name == "tool_choice" ? json("auto")
                        : f.name == "parallel_tool_calls" || f.name == "stream" ? json(false)
                        : f.name == "store" ? json(true)
                        : f.name == "background" ? json(false)
                        : f.name == "max_output_tokens" ? json(100)
                        : f.name == "temperature" || f.name == "top_p" ? json(0.5)
                        : f.name == "reasoning" ? json({{"summary", "auto"}})
                        : f.name == "text" ? json({{"format", {{"type", "text"}}}, {"verbosity", "medium"}})
                        : f.name == "include" ? json({"reasoning.encrypted_content"})
                        : f.name == "metadata" || f.name == "client_metadata" ? json({{"k", "v"}})
                        : f.name == "service_tier" ? json("auto")
                        : f.name == "truncation" ? json("disabled")
                        : f.name == "stream_options" ? json({{"include_obfuscation", false}})
                        : f.name == "prompt_cache_options" ? json::object()
                        : f.name == "previous_response_id" ? json(nullptr)
                                                           : json("x");
    b[f.name] = sample;
    auto r = post("/v1/responses", b.dump());
    ASSERT_TRUE(r) << f.name;
    if (f.kind == FieldRule::kRefused) {
      expect_error(r, 400, f.name);
      EXPECT_NE(r->body.find(f.name), std::string::npos) << r->body;
    } else {
      EXPECT_EQ(r->status, 200) << f.name << ": " << r->body;
    }
  }
}

// Codex's first request, in shape (captured from codex exec 0.171.0 against a listener): every
// field it sends is accepted.
TEST_F(ResponsesTest, CodexShapedRequestIsAccepted) {
  start();
  const json body = json::parse(R"({
    "model": "tiny-m2", "stream": true,
    "input": [
      {"type": "message", "id": "msg_1", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
      {"type": "message", "id": "msg_2", "role": "developer", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "message", "id": "msg_3", "role": "user", "content": [{"type": "input_text", "text": "say hi"}]}],
    "tools": [
      {"type": "function", "name": "exec_command", "description": "Runs a command", "strict": false,
       "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"], "additionalProperties": false}},
      {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents", "tools": [
        {"type": "function", "name": "spawn_agent", "description": "Spawn", "strict": false,
         "parameters": {"type": "object", "properties": {}}}]},
      {"type": "web_search", "external_web_access": false}],
    "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"summary": "auto"}, "store": false,
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "01a2", "client_metadata": {"session_id": "01a2"}})");
  auto s = post("/v1/responses", body.dump());
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  std::vector<Event> ev = response_events(s->body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().name, "response.completed");
  const json& fin = ev.back().data["response"];
  EXPECT_EQ(fin["mmx_ignored_tools"], json::parse(R"([{"type": "web_search"}])"));
  EXPECT_TRUE(fin["output"][0]["encrypted_content"].is_null()) << "we encrypt nothing: null, as the schema allows";
  // Codex's instructions are developer messages: all of them reach the prompt's system part.
  const std::string p = last_prompt();
  const size_t sys_end = p.find("[e~[");
  for (const char* want : {"You are Codex.", "a\n\nb", "multi_agent_v1__spawn_agent"})
    EXPECT_LT(p.find(want), sys_end) << want << "\n" << p;
  EXPECT_NE(p.find("say hi"), std::string::npos);
}

}  // namespace
}  // namespace mmx::server
