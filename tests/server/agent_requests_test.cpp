// What real agent clients send to /v1/chat/completions and how every part of it is answered
// (docs/api.md, "Chat completions"): HEAD anywhere GET goes, never with a body; system / developer
// messages after the first reach the prompt; non-text content parts are a 400 naming the part;
// tool-call arguments "" are {} and anything but a JSON object is a 400 naming the call;
// parallel_tool_calls false ends a choice after one call; reasoning_effort on M2 is a no-op.
// A real server on loopback over the fake engine (server_fixture.h), raw sockets where a client
// library would hide the bytes.
#include <string>

#include "raw_http.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

class AgentRequestsTest : public ServerTest {
 protected:
  std::string last_prompt() const {
    const auto rs = engine.requests();
    if (rs.empty()) {
      ADD_FAILURE() << "no request reached the engine";
      return "";
    }
    return TinyAssets::get().decode(rs.back().prompt);
  }
};

// The head of a reply (through the blank line) and what follows it.
std::pair<std::string, std::string> split_reply(const std::string& reply) {
  const size_t end = reply.find("\r\n\r\n");
  if (end == std::string::npos) return {reply, ""};
  return {reply.substr(0, end + 4), reply.substr(end + 4)};
}

std::string header_of(const std::string& head, const std::string& name) {
  std::string lower = head;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  const size_t b = head.find_first_not_of(' ', at + 3 + name.size()), e = head.find("\r\n", at + 2);
  return head.substr(b, e - b);
}

// RFC 9110 §9.3.2: a HEAD reply is GET's head without its body. The front answered HEAD / (no key)
// with a 401 and a JSON body, and a client's HTTP parser (Node's) read that body as the next
// response. Now: the head GET would get (status, Content-Type, Content-Length) and no byte after
// it — on the routes GET serves (with and without the key), on the front's own refusals (401,
// 400, 431) and on httplib's (404, 405).
TEST_F(AgentRequestsTest, HeadIsGetWithoutTheBody) {
  opts.api_keys = {"sekrit"};
  start();
  const std::string key = "Authorization: Bearer sekrit\r\n";
  struct Case {
    std::string path;
    bool with_key;
    int status;
  };
  const std::vector<Case> cases = {
      {"/", false, 200},        {"/", true, 200},          {"/health", false, 200},     {"/v1/models", true, 200},
      {"/v1/models", false, 401}, {"/v1/models/tiny-m2", true, 200}, {"/metrics", true, 200}, {"/metrics", false, 401},
      {"/v1/chat/completions", true, 405}, {"/v1/chat/completions", false, 401}, {"/nope", true, 404},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + (c.with_key ? " with the key" : " without the key"));
    const std::string extra = c.with_key ? key : "";
    const auto [head, rest] = split_reply(raw_exchange(port, "HEAD " + c.path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"));
    EXPECT_EQ(status_of(head), c.status) << head;
    EXPECT_EQ(rest, "") << "bytes after the head of a HEAD reply";
    // The same head as GET's: its status, type and length.
    const auto [ghead, gbody] = split_reply(raw_exchange(port, "GET " + c.path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"));
    if (c.path == "/metrics") continue;  // (its counters moved between the two)
    EXPECT_EQ(status_of(ghead), c.status) << ghead;
    EXPECT_FALSE(gbody.empty());
    if (c.status == 404 || c.status == 405)  // (the message names the method: "HEAD /nope" is one byte longer)
      EXPECT_EQ(header_of(head, "content-length"), std::to_string(gbody.size() + 1)) << head;
    else
      EXPECT_EQ(header_of(head, "content-length"), std::to_string(gbody.size())) << head;
    EXPECT_EQ(header_of(head, "content-type"), header_of(ghead, "content-type")) << head;
  }
  // The front's own refusals of a HEAD: a bad Content-Length (400), a head too large (431).
  for (const auto& [req, status] : std::vector<std::pair<std::string, int>>{
           {"HEAD /health HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", 400},
           {"HEAD /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(size_t(80) << 10, 'a') + "\r\n\r\n", 431}}) {
    const auto [head, rest] = split_reply(raw_exchange(port, req));
    EXPECT_EQ(status_of(head), status) << head;
    EXPECT_NE(header_of(head, "content-length"), "0") << head;
    EXPECT_EQ(rest, "") << head;
  }
  EXPECT_TRUE(engine.requests().empty());
}

// Every system or developer message after the first reached no template (M2 renders only a
// leading system message): each is now folded into the user message after it, or becomes a user
// message of its own when none follows (chat/messages.h). A leading developer message is the
// system prompt.
TEST_F(AgentRequestsTest, LaterSystemMessagesReachThePrompt) {
  start();
  json msgs = json::parse(R"([
    {"role": "developer", "content": "DEV-FIRST rules"},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi"},
    {"role": "system", "content": "SYS-LATE-1"},
    {"role": "developer", "content": [{"type": "text", "text": "DEV-LATE-2"}]},
    {"role": "user", "content": "USER-AFTER"},
    {"role": "assistant", "content": "ok"},
    {"role": "system", "content": "SYS-TRAILING"}])");
  post_json("/v1/chat/completions", {{"messages", msgs}});
  const std::string p = last_prompt();
  EXPECT_NE(p.find("]~b]system\nDEV-FIRST rules"), std::string::npos) << p;
  EXPECT_NE(p.find("]~b]user\nSYS-LATE-1\n\nDEV-LATE-2\n\nUSER-AFTER[e~["), std::string::npos) << p;
  EXPECT_NE(p.find("]~b]ai\nok[e~[\n]~b]user\nSYS-TRAILING[e~["), std::string::npos) << p;
  // A conversation that grows at its end renders as a prefix of what it renders next.
  msgs.push_back({{"role", "assistant"}, {"content", "noted"}});
  msgs.push_back({{"role", "user"}, {"content", "next"}});
  post_json("/v1/chat/completions", {{"messages", msgs}});
  const std::string longer = last_prompt();
  const std::string stem = p.substr(0, p.rfind("]~b]ai"));
  EXPECT_EQ(longer.compare(0, stem.size(), stem), 0) << p << "\n----\n" << longer;
}

// image_url / input_audio / file parts were dropped by the template without a word: a 400 naming
// the part until the model can read them.
TEST_F(AgentRequestsTest, NonTextContentPartsAre400) {
  start();
  const std::vector<std::pair<json, std::string>> parts = {
      {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}}, "image_url"},
      {{{"type", "input_audio"}, {"input_audio", {{"data", "AAAA"}, {"format", "wav"}}}}, "input_audio"},
      {{{"type", "file"}, {"file", {{"file_id", "f1"}}}}, "file"},
  };
  for (const auto& [part, type] : parts) {
    json content = json::array({{{"type", "text"}, {"text", "look:"}}, part});
    auto r = post("/v1/chat/completions", chat_body({{"messages", {{{"role", "user"}, {"content", content}}}}}).dump());
    expect_error(r, 400, type);
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["param"], "messages");
    EXPECT_NE(e["message"].get<std::string>().find("messages[0].content[1]"), std::string::npos) << e.dump();
    EXPECT_NE(e["message"].get<std::string>().find(type), std::string::npos) << e.dump();
  }
  // Text parts (and bare strings) all reach the prompt.
  post_json("/v1/chat/completions", chat_body({{"messages", {{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "PART-A "}}, "PART-B"})}}}}}));
  EXPECT_NE(last_prompt().find("PART-A PART-B"), std::string::npos) << last_prompt();
  EXPECT_EQ(engine.requests().size(), 1u);
}

// Tool-call arguments in the history: "" is {} (a call without parameters renders); "null", a
// non-object JSON or text that is not JSON is a 400 naming messages[i].tool_calls[j].function.arguments
// (the M2 template used to fail with its own message).
TEST_F(AgentRequestsTest, ToolCallArgumentsAreAnObject) {
  start();
  auto history = [](const json& args) {
    json calls = json::array({{{"id", "c0"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", "{}"}}}},
                              {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", args}}}}});
    return json::array({{{"role", "user"}, {"content", "time?"}},
                        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}},
                        {{"role", "tool"}, {"tool_call_id", "c0"}, {"content", "noon"}},
                        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "noon"}}});
  };
  for (const json& ok : {json(""), json("  "), json(nullptr), json::object(), json("{\"tz\": \"CET\"}")}) {
    SCOPED_TRACE(ok.dump());
    post_json("/v1/chat/completions", {{"messages", history(ok)}, {"tools", tools_json()}});
    EXPECT_NE(last_prompt().find("<invoke name=\"get_time\">"), std::string::npos) << last_prompt();
  }
  for (const json& bad : {json("null"), json("[1]"), json("3"), json("\"s\""), json("not json"), json("{\"a\":"), json(5), json::array()}) {
    SCOPED_TRACE(bad.dump());
    auto r = post("/v1/chat/completions", json({{"messages", history(bad)}, {"tools", tools_json()}}).dump());
    expect_error(r, 400, bad.dump());
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["param"], "messages");
    EXPECT_NE(e["message"].get<std::string>().find("messages[1].tool_calls[1].function.arguments"), std::string::npos) << e.dump();
    EXPECT_EQ(e["message"].get<std::string>().find("template"), std::string::npos) << e.dump();
  }
  // The Anthropic route's tool_use input (an object) renders the same call.
  json am = json::parse(R"([{"role": "user", "content": "time?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c0", "name": "get_time", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c0", "content": "noon"}]}])");
  json atools = json::parse(R"([{"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}])");
  post_json("/v1/messages", {{"model", "tiny-m2"}, {"max_tokens", 8}, {"messages", am}, {"tools", atools}});
  const std::string p = last_prompt();
  const size_t at = p.find("<invoke name=\"get_time\">");
  ASSERT_NE(at, std::string::npos) << p;
  EXPECT_LT(p.find("</invoke>", at), p.find("<parameter", at)) << "no parameters: " << p;
}

// parallel_tool_calls false: the choice ends after its first call (finish_reason "tool_calls"; the
// engine is cancelled as for a stop string), streamed or not; no piece of the second call is sent.
TEST_F(AgentRequestsTest, ParallelToolCallsFalseStopsAfterOneCall) {
  start();
  engine.script = TinyAssets::get().say(kToolText);  // two calls: get_weather, get_time
  json r = post_json("/v1/chat/completions", chat_body({{"tools", tools_json()}}));
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 2u);  // (true, the default: both)
  r = post_json("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"parallel_tool_calls", false}}));
  const json& c = r["choices"][0];
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.dump();
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_TRUE(c["message"]["content"].is_null()) << r.dump();
  auto s = post("/v1/chat/completions", chat_body({{"tools", tools_json()}, {"parallel_tool_calls", false}, {"stream", true}}).dump());
  ASSERT_TRUE(s);
  std::string args, finish;
  for (const json& e : sse_events(s->body)) {
    if (e["choices"].empty()) continue;
    const json& ch = e["choices"][0];
    for (const json& d : ch["delta"].value("tool_calls", json::array())) {
      EXPECT_EQ(d["index"], 0) << d.dump();
      args += d["function"]["arguments"].get<std::string>();
    }
    EXPECT_FALSE(ch["delta"].contains("content") && !ch["delta"]["content"].get<std::string>().empty()) << ch.dump();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(args, c["message"]["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(finish, "tool_calls");
  expect_error(post("/v1/chat/completions", chat_body({{"parallel_tool_calls", "no"}}).dump()), 400, "a string");
}

// reasoning_effort on a template without a reasoning switch (M2): accepted, and the prompt is the
// same as without it.
TEST_F(AgentRequestsTest, ReasoningEffortWithoutASwitchIsANoOp) {
  start();
  post_json("/v1/chat/completions", chat_body());
  const std::string plain = last_prompt();
  for (const char* effort : {"none", "low", "high"}) {
    post_json("/v1/chat/completions", chat_body({{"reasoning_effort", effort}}));
    EXPECT_EQ(last_prompt(), plain) << effort;
  }
  auto r = post("/v1/chat/completions", chat_body({{"reasoning_effort", "extreme"}}).dump());
  expect_error(r, 400, "unknown effort");
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "reasoning_effort");
}

}  // namespace
}  // namespace mmx::server
