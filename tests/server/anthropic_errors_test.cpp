// Error shapes by path: every refusal of a request to /v1/messages or /v1/messages/count_tokens —
// from the front (401, 408, 413, 431, 503, malformed framing), from httplib (404, 405), from
// reading the body (400, 413 decoded) or from the route (400, 404, 429) — comes back in
// Anthropic's shape {"type": "error", "error": {"type", "message"}} with the type Anthropic gives
// that status (https://docs.claude.com/en/api/errors); the same refusals on an OpenAI route keep
// OpenAI's {"error": {"message", "type", "param", "code"}}. Raw HTTP on loopback, so the front
// and the framing are the ones a client meets.
#include <string>
#include <vector>

#include "raw_http.h"
#include "server/api_error.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

struct Reply {
  int status = -1;
  std::string head;  // status line and header fields
  json body;         // discarded when the body is not JSON
};

Reply split(const std::string& raw) {
  Reply r;
  r.status = status_of(raw);
  const size_t blank = raw.find("\r\n\r\n");
  if (blank == std::string::npos) return r;
  r.head = raw.substr(0, blank);
  r.body = json::parse(raw.substr(blank + 4), nullptr, false);
  return r;
}

// A request's bytes: method, target, extra header fields, body (Content-Length unless `extra`
// frames it itself).
std::string request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& extra = "", bool content_length = true) {
  std::string s = method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra;
  if (content_length) s += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return s + "\r\n" + body;
}

const char* kAnthropicPaths[] = {"/v1/messages", "/v1/messages/count_tokens"};

// A body `path` accepts (count_tokens takes no max_tokens).
json messages_body(const std::string& path = "/v1/messages") {
  json b = {{"model", "tiny-m2"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  if (path == "/v1/messages") b["max_tokens"] = 50;
  return b;
}

// Anthropic's shape, exactly: two keys at the top, two in "error", the type for the status.
void expect_anthropic(const Reply& r, int status, const std::string& type, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << "\n" << r.head;
  ASSERT_TRUE(r.body.is_object()) << what << "\n" << r.head;
  EXPECT_EQ(r.body.size(), 2u) << what << ": " << r.body.dump();
  EXPECT_EQ(r.body.value("type", ""), "error") << what << ": " << r.body.dump();
  ASSERT_TRUE(r.body.contains("error") && r.body["error"].is_object()) << what << ": " << r.body.dump();
  const json& e = r.body["error"];
  EXPECT_EQ(e.size(), 2u) << what << ": " << r.body.dump();
  EXPECT_EQ(e.value("type", ""), type) << what << ": " << r.body.dump();
  EXPECT_FALSE(e.value("message", "").empty()) << what << ": " << r.body.dump();
}

// OpenAI's shape: only "error" at the top, with message, type, param and code.
void expect_openai(const Reply& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << "\n" << r.head;
  ASSERT_TRUE(r.body.is_object()) << what << "\n" << r.head;
  EXPECT_EQ(r.body.size(), 1u) << what << ": " << r.body.dump();
  ASSERT_TRUE(r.body.contains("error")) << what << ": " << r.body.dump();
  const json& e = r.body["error"];
  EXPECT_FALSE(e.value("message", "").empty()) << what << ": " << r.body.dump();
  EXPECT_TRUE(e.contains("type") && e.contains("param") && e.contains("code")) << what << ": " << r.body.dump();
}

class AnthropicErrorsTest : public ServerTest {
 protected:
  Reply exchange(const std::string& bytes, int timeout_ms = 5000) { return split(raw_exchange(port, bytes, timeout_ms)); }
};

TEST(ErrorShapeFor, MessagesAndEverythingUnderIt) {
  for (const char* p : {"/v1/messages", "/v1/messages/count_tokens", "/v1/messages/batches", "/v1/messages?beta=true",
                        "/v1/messages/count_tokens?beta=true"})
    EXPECT_EQ(error_shape_for(p), ErrorShape::kAnthropic) << p;
  for (const char* p : {"", "/", "/v1/chat/completions", "/v1/messagesx", "/v1/message", "/v1/models", "/health",
                        "/v2/messages", "/x/v1/messages"})
    EXPECT_EQ(error_shape_for(p), ErrorShape::kOpenAI) << p;
  // The documented table, and ours beside it (503: overloaded, other 4xx/5xx).
  const std::vector<std::pair<int, std::string>> table = {
      {400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
      {404, "not_found_error"},       {405, "invalid_request_error"}, {408, "invalid_request_error"},
      {413, "request_too_large"},     {429, "rate_limit_error"},      {431, "invalid_request_error"},
      {500, "api_error"},             {501, "api_error"},             {503, "overloaded_error"},
      {529, "overloaded_error"}};
  for (const auto& [status, type] : table) {
    EXPECT_EQ(anthropic_error_type(status), type) << status;
    const nlohmann::ordered_json j = error_json(ApiError(status, "m"), ErrorShape::kAnthropic);
    EXPECT_EQ(j.dump(), R"({"type":"error","error":{"type":")" + type + R"(","message":"m"}})");
  }
}

TEST_F(AnthropicErrorsTest, MissingOrWrongKeyIsAuthenticationError) {
  opts.api_keys = {"sekrit"};
  start();
  for (const char* path : kAnthropicPaths) {
    const std::string body = messages_body(path).dump();
    expect_anthropic(exchange(request("POST", path, body)), 401, "authentication_error", std::string(path) + " no key");
    expect_anthropic(exchange(request("POST", path, body, "x-api-key: wrong\r\n")), 401, "authentication_error",
                     std::string(path) + " wrong key");
    expect_anthropic(exchange(request("POST", std::string(path) + "?beta=true", body)), 401, "authentication_error",
                     std::string(path) + "?beta=true");
    EXPECT_EQ(exchange(request("POST", path, body, "x-api-key: sekrit\r\n")).status, 200) << path;
  }
  expect_openai(exchange(request("POST", "/v1/chat/completions", chat_body().dump())), 401, "chat route, no key");
}

TEST_F(AnthropicErrorsTest, UnknownRouteAndWrongMethod) {
  start();
  for (const char* path : kAnthropicPaths) {
    const Reply r = exchange(request("GET", path, ""));
    expect_anthropic(r, 405, "invalid_request_error", std::string("GET ") + path);
    EXPECT_NE(r.head.find("Allow: POST"), std::string::npos) << r.head;
    expect_anthropic(exchange(request("POST", std::string(path) + "/nope", "{}")), 404, "not_found_error",
                     std::string(path) + "/nope");
  }
  expect_anthropic(exchange(request("POST", "/v1/messages/batches", "{}")), 404, "not_found_error", "batches");
  expect_openai(exchange(request("GET", "/v1/chat/completions", "")), 405, "GET chat route");
  expect_openai(exchange(request("POST", "/v1/nope", "{}")), 404, "unknown route");
}

TEST_F(AnthropicErrorsTest, BodiesThatCannotBeReadOrAreTooLarge) {
  opts.max_body_bytes = 4096;
  start();
  const std::string big(5000, ' ');
  const std::string bomb = gzip(std::string(1 << 20, ' '));  // small on the wire, 1 MB decoded
  ASSERT_LT(bomb.size(), 4096u);
  auto each = [&](const char* path, auto&& expect) {
    const std::string p = path;
    expect(exchange(request("POST", p, big)), 413, "request_too_large", p + ": Content-Length over the cap (front)");
    expect(exchange(request("POST", p, "1388\r\n" + big + "\r\n0\r\n\r\n", "Transfer-Encoding: chunked\r\n", false)),
           413, "request_too_large", p + ": chunked over the cap (front)");
    expect(exchange(request("POST", p, bomb, "Content-Encoding: gzip\r\n")), 413, "request_too_large",
           p + ": gzip over the cap decoded (server)");
    expect(exchange(request("POST", p, "zz\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding: chunked\r\n", false)), 400,
           "invalid_request_error", p + ": malformed chunked framing (front)");
    expect(exchange(request("POST", p, "{}", "Content-Length: x\r\n", false)), 400, "invalid_request_error",
           p + ": Content-Length not a number (front)");
    expect(exchange(request("POST", p, "{\"model\": ")), 400, "invalid_request_error", p + ": malformed JSON (route)");
    expect(exchange(request("POST", p, "[]")), 400, "invalid_request_error", p + ": not an object (route)");
  };
  for (const char* path : kAnthropicPaths) each(path, expect_anthropic);
  each("/v1/chat/completions",
       [](const Reply& r, int status, const std::string&, const std::string& what) { expect_openai(r, status, what); });
}

TEST_F(AnthropicErrorsTest, HeadTooLargeAndTimeouts) {
  opts.max_header_bytes = 2048;
  opts.front.body_timeout_ms = 300;
  start();
  const std::string huge_field = "X-Pad: " + std::string(40 << 10, 'a') + "\r\n";
  const std::string body = messages_body().dump();
  for (const char* path : kAnthropicPaths) {
    const std::string p = path;
    expect_anthropic(exchange(request("POST", p, body, huge_field)), 431, "invalid_request_error", p + ": 431");
    // The head says 1000 bytes; 10 come: 408 once the body deadline passed.
    expect_anthropic(exchange(request("POST", p, std::string(10, ' '), "Content-Length: 1000\r\n", false)), 408,
                     "invalid_request_error", p + ": body deadline");
  }
  expect_openai(exchange(request("POST", "/v1/chat/completions", body, huge_field)), 431, "chat route 431");
}

TEST_F(AnthropicErrorsTest, OverloadIsOverloadedError) {
  opts.front.max_buffered_bytes = 3000;  // request bytes held over all connections
  start();
  const std::string pad(4000, ' ');
  for (const char* path : kAnthropicPaths)
    expect_anthropic(exchange(request("POST", path, pad)), 503, "overloaded_error", std::string(path) + ": 503");
  expect_openai(exchange(request("POST", "/v1/chat/completions", pad)), 503, "chat route 503");
}

TEST_F(AnthropicErrorsTest, RouteErrorsKeepTheirStatus) {
  engine.max_in_flight = 0;  // every generation is refused with 429
  start();
  expect_anthropic(exchange(request("POST", "/v1/messages", messages_body().dump())), 429, "rate_limit_error",
                   "engine busy");
  for (const char* path : kAnthropicPaths) {
    json b = messages_body(path);
    b["model"] = "claude-x";
    expect_anthropic(exchange(request("POST", path, b.dump())), 404, "not_found_error", std::string(path) + " model");
  }
}

}  // namespace
}  // namespace mmx::server
