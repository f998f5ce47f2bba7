// The server tests' fixture (server_test.cpp, hostile_test.cpp): one real HTTP server on
// 127.0.0.1 (ephemeral port) per test over a scripted FakeEngine, the tiny M2 checkpoint's real
// tokenizer and chat template, and the helpers both files use.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "tiny/tiny.h"
#include "server/server.h"
#include "testing/checkpoint_files.h"

namespace mmx::server {

using json = nlohmann::json;
using testing::FakeEngine;

// ---- the tiny model's tokenizer and template, written once per test binary ----

struct TinyAssets {
  std::string dir;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<ChatTemplate> tmpl;
  int32_t eos = -1;
  static TinyAssets& get() {
    static TinyAssets a = [] {
      TinyAssets t;
      t.dir = (std::filesystem::temp_directory_path() / ("mmx_server_test_" + std::to_string(getpid()))).string();
      TinyOptions o;
      o.out_dir = t.dir;
      o.seed = 1;
      write_tiny_checkpoint(o);
      t.tok = std::make_unique<tok::Tokenizer>(mmx::testing::tokenizer_of(t.dir));
      t.tmpl = std::make_unique<ChatTemplate>(mmx::testing::chat_template_of(t.dir));
      t.eos = t.tok->token_to_id("[e~[");
      std::filesystem::remove_all(t.dir);
      return t;
    }();
    return a;
  }
  std::vector<int32_t> say(const std::string& text, bool eos_after = true) const {
    std::vector<int32_t> ids = tok->encode(text, false);
    if (eos_after) ids.push_back(eos);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const { return tok->decode(ids, false); }
};

inline const char* kToolText =
    "The user wants two things.</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
    "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n"
    "<invoke name=\"get_time\">\n<parameter name=\"tz\">CET</parameter>\n</invoke>\n</minimax:tool_call>";

inline json tools_json() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time",
      "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}])");
}

// ---- one server + fake engine per test ----

class ServerTest : public ::testing::Test {
 protected:
  FakeEngine engine;
  std::unique_ptr<Server> server;
  int port = 0;
  ServerOptions opts;
  chat::OutputFormat format = chat::OutputFormat::kM2;
  SamplingParams sampling_defaults;  // chat::ServedModel::sampling

  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    engine.script = TinyAssets::get().say("Let me think.</think>\n\nHello there, friend!");
  }
  void start() {
    chat::ServedModel m;
    m.name = "tiny-m2";
    m.tokenizer = TinyAssets::get().tok.get();
    m.chat_template = TinyAssets::get().tmpl.get();
    m.format = format;
    m.eos_ids = {TinyAssets::get().eos};
    m.sampling = sampling_defaults;
    server = std::make_unique<Server>(engine, m, opts);
    port = server->start("127.0.0.1", 0);
    ASSERT_GT(port, 0);
  }
  void TearDown() override {
    if (server) {
      httplib::Client c("127.0.0.1", port);
      auto h = c.Get("/health");  // every test ends with a healthy server
      ASSERT_TRUE(h);
      EXPECT_EQ(h->status, 200);
      server->stop();
    }
  }
  httplib::Result post(const std::string& path, const std::string& body, httplib::Headers h = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    return c.Post(path.c_str(), h, body, "application/json");
  }
  json post_json(const std::string& path, const json& body, int want_status = 200) {
    auto r = post(path, body.dump());
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, want_status) << r->body;
    return json::parse(r->body);
  }
  static json chat_body(json extra = json::object()) {
    json b = {{"model", "tiny-m2"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    b.update(extra);
    return b;
  }
};

// "data: {...}\n\n" events -> JSON objects; the final "[DONE]" is checked and dropped.
inline std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind(": ping", 0) == 0) continue;  // keep-alive comment
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    ev = ev.substr(6);
    EXPECT_FALSE(done) << "event after [DONE]";
    if (ev == "[DONE]") done = true;
    else out.push_back(json::parse(ev));
  }
  EXPECT_TRUE(done) << "no [DONE]";
  EXPECT_EQ(pos, body.size());
  return out;
}

inline void expect_error(const httplib::Result& r, int status, const std::string& what) {
  ASSERT_TRUE(r) << what;
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << what << ": " << r->body;
  ASSERT_TRUE(j.contains("error")) << what;
  EXPECT_TRUE(j["error"]["message"].is_string()) << what;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(j["error"]["type"].is_string()) << what;
  EXPECT_TRUE(j["error"].contains("param")) << what;
  EXPECT_TRUE(j["error"].contains("code")) << what;
}

// A TCP connection to 127.0.0.1:port (-1 on failure).
inline int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace mmx::server
