// libFuzzer target over the HTTP request -> response path of `mmx serve`: a real Server (front,
// routes, request parsing, chat template, tokenizer, output parser, SSE) on 127.0.0.1
// over a scripted engine, with the embedded model's tokenizer and chat template. Each input is
// sent on a fresh TCP connection and the answer read to the end. The first byte picks the framing:
//   0  the rest is sent as is (request line, headers, body: everything is the fuzzer's)
//   1  the rest is a JSON body POSTed to /v1/chat/completions with a correct Content-Length
//   2  the same to /v1/completions
//   3  the rest is POSTed to /v1/chat/completions chunked (Transfer-Encoding: chunked, 7-byte chunks)
// A finding: a crash or sanitizer report, a 500 (a handler let an internal error through), an
// answer that is not HTTP, or no answer within 10 s. An empty answer is fine only for framing 0
// (an incomplete request from a client that then closes gets none).
//
// MMX_FUZZ_SEED_DIR=dir: on start-up, also write seed requests into dir (run_fuzz.sh does this).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "formats/checkpoint.h"
#include "server/server.h"

#ifndef MMX_ROOT
#error "MMX_ROOT (the repository root) must be defined"
#endif

namespace {

using namespace mmx;

[[noreturn]] void finding(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what.c_str(), detail.substr(0, 2000).c_str());
  std::abort();
}

// One worker thread replays `script` for each request in turn (a fake engine per connection
// thread, as tests/server has, would leave a thread per input behind).
class ScriptEngine final : public EngineApi {
 public:
  explicit ScriptEngine(std::vector<int32_t> script) : script_(std::move(script)), worker_([this] { run(); }) {}
  ~ScriptEngine() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  uint64_t submit(GenRequest r, std::function<void(const GenEvent&)> on_event) override {
    std::lock_guard<std::mutex> l(mu_);
    const uint64_t id = next_id_++;
    queue_.push_back(Job{id, std::move(r), std::move(on_event)});
    cv_.notify_all();
    return id;
  }
  void cancel(uint64_t id) override {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_[id] = true;
  }
  EngineMetrics metrics() const override { return {}; }
  int64_t context_limit() const override { return 4096; }
  int64_t max_queued() const override { return 16; }

 private:
  struct Job {
    uint64_t id;
    GenRequest r;
    std::function<void(const GenEvent&)> emit;
  };
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Job j = std::move(queue_.front());
      queue_.pop_front();
      int64_t n = 0;
      std::string reason = "stop";
      for (size_t i = 0; i < script_.size() && !cancelled_[j.id]; ++i) {
        GenEvent e;
        e.token = script_[i];
        e.logprob = -0.5f;
        for (int k = 0; k < j.r.top_logprobs; ++k) e.top.push_back({script_[i], -0.5f - float(k)});
        j.emit(e);  // under mu_: cancel() returning means no further events
        if (++n >= j.r.max_tokens) {
          reason = "length";
          break;
        }
      }
      if (!cancelled_[j.id]) {
        GenEvent d;
        d.kind = GenEvent::kDone;
        d.finish_reason = reason;
        d.n_prompt = int64_t(j.r.prompt.size());
        d.n_generated = n;
        j.emit(d);
      }
      cancelled_.erase(j.id);
    }
  }
  std::vector<int32_t> script_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::map<uint64_t, bool> cancelled_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread worker_;
};

struct World {
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<ChatTemplate> tmpl;
  std::unique_ptr<ScriptEngine> engine;
  std::unique_ptr<server::Server> server;
  int port = 0;
};
World* g_world = nullptr;

// The model's reply: reasoning, then two tool calls in the M2 XML syntax, then eos.
std::vector<int32_t> reply(const tok::Tokenizer& t) {
  std::vector<int32_t> ids = t.encode(
      "Let me check.</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n"
      "<invoke name=\"get_time\">\n<parameter name=\"tz\">CET</parameter>\n</invoke>\n</minimax:tool_call>",
      false);
  ids.push_back(t.token_to_id("[e~["));
  return ids;
}

void write_seed(const std::string& dir, const std::string& name, char mode, const std::string& rest) {
  std::ofstream(dir + "/" + name, std::ios::binary) << mode << rest;
}

void write_seeds(const std::string& dir) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
         "properties": {"tz": {"type": "string"}}}}}])";
  write_seed(dir, "chat_plain", 1, R"({"model": "tiny-m2", "messages": [{"role": "user", "content": "Hi"}]})");
  write_seed(dir, "chat_tools", 1,
             R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}], )" +
                 tools + R"(, "tool_choice": "auto", "max_tokens": 64, "temperature": 0.7, "top_p": 0.9, "seed": 3})");
  write_seed(dir, "chat_stream", 1,
             R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true, "stream_options": {"include_usage": true}, )" +
                 tools + R"(, "logprobs": true, "top_logprobs": 2, "n": 2, "stop": ["Paris", "\n\n"]})");
  write_seed(dir, "chat_history", 1,
             R"({"messages": [{"role": "user", "content": "Weather?"},
                 {"role": "assistant", "content": "", "reasoning_content": "call it",
                  "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather",
                  "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "21C"},
                 {"role": "user", "content": [{"type": "text", "text": "and <think>]~b]user?"}]}], )" +
                 tools + R"(, "chat_template_kwargs": {"enable_thinking": false}})");
  write_seed(dir, "completion", 2, R"({"prompt": "def f(x):", "max_tokens": 5, "echo": true, "logprobs": 3})");
  write_seed(dir, "completion_ids", 2, R"({"prompt": [1, 2, 3], "stream": true, "max_tokens": 3, "stop": "x"})");
  write_seed(dir, "chat_chunked", 3, R"({"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 4})");
  write_seed(dir, "raw_health", 0, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  write_seed(dir, "raw_models", 0, "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\n");
  write_seed(dir, "raw_metrics", 0, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  write_seed(dir, "raw_post", 0,
             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: 46\r\n\r\n{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}");
  write_seed(dir, "raw_expect", 0,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 14\r\n\r\n"
             "{\"prompt\":\"a\"}");
}

std::string framed(const uint8_t* data, size_t size) {
  if (size == 0) return "";
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const int mode = data[0] % 4;
  if (mode == 0) return rest;
  const char* path = mode == 2 ? "/v1/completions" : "/v1/chat/completions";
  std::string req = std::string("POST ") + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  if (mode == 3) {
    req += "Transfer-Encoding: chunked\r\n\r\n";
    for (size_t i = 0; i < rest.size(); i += 7) {
      const std::string part = rest.substr(i, 7);
      char len[16];
      std::snprintf(len, sizeof len, "%zx\r\n", part.size());
      req += len + part + "\r\n";
    }
    return req + "0\r\n\r\n";
  }
  return req + "Content-Length: " + std::to_string(rest.size()) + "\r\n\r\n" + rest;
}

// Sends `req` on a new connection, half-closes, and reads the whole answer (or times out).
std::string exchange_once(const std::string& req, bool* timed_out) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) finding("socket", std::to_string(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(g_world->port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) finding("connect", std::to_string(errno));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (size_t off = 0; off < req.size();) {
    const ssize_t w = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (w <= 0) break;  // the server may answer (413, 431) and close before all is sent
    off += size_t(w);
  }
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[16384];
  *timed_out = false;
  for (;;) {
    const ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r > 0) {
      out.append(buf, size_t(r));
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) *timed_out = true;
    break;
  }
  close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  if (const char* dir = std::getenv("MMX_FUZZ_SEED_DIR")) write_seeds(dir);
  const std::string model = std::string(MMX_ROOT) + "/models/m2-tiny";
  g_world = new World;  // lives until exit: the server's threads use it
  const Checkpoint ck = open_checkpoint(model);  // the tools' path (tools/mmx/common.cpp)
  const CheckpointJson tj = ck.tokenizer();
  g_world->tok = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_json(tj.json, tj.where));
  const ChatTemplateFiles tf = ck.chat_template_files();
  g_world->tmpl = std::make_unique<ChatTemplate>(tf.templates, tf.tokenizer_config);
  g_world->engine = std::make_unique<ScriptEngine>(reply(*g_world->tok));
  chat::ServedModel m;
  m.name = "tiny-m2";
  m.tokenizer = g_world->tok.get();
  m.chat_template = g_world->tmpl.get();
  m.eos_ids = {g_world->tok->token_to_id("[e~[")};
  server::ServerOptions o;
  o.max_body_bytes = 1 << 20;
  o.front.head_timeout_ms = 2000;
  o.front.body_timeout_ms = 2000;
  o.stream_ping_ms = 100;
  o.front.max_handlers = 8;
  g_world->server = std::make_unique<server::Server>(*g_world->engine, m, o);
  g_world->port = g_world->server->start("127.0.0.1", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string req = framed(data, size);
  bool timed_out = false;
  std::string out = exchange_once(req, &timed_out);
  // A complete request with no answer is asked twice more before it is a finding: under make
  // test's parallel load (two fuzzers and OpenMP spin-waits on two cores) the server's 2 s read
  // deadlines can pass while its threads are starved; a real missing answer stays missing.
  const bool complete = size > 0 && data[0] % 4 != 0;
  for (int retry = 0; retry < 2 && (timed_out || (out.empty() && complete)); ++retry) {
    usleep(200000);
    out = exchange_once(req, &timed_out);
  }
  if (timed_out) finding("no answer within 10 s (three tries)", req);
  if (out.empty()) {
    if (complete) finding("no answer to a complete request (three tries)", req);
    return 0;
  }
  if (out.size() < 12 || out.compare(0, 9, "HTTP/1.1 ") != 0) finding("not an HTTP answer", out);
  // A 100 Continue interim answer may come first; the final status is what counts.
  size_t at = 0;
  while (out.compare(at, 12, "HTTP/1.1 100") == 0) {
    const size_t end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) finding("truncated interim answer", out);
    at = end + 4;
  }
  if (out.compare(at, 12, "HTTP/1.1 500") == 0) finding("500 answer", req + "\n----\n" + out);
  return 0;
}
