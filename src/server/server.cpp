#include "server/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <malloc.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "base/error.h"
#include "chat/turn.h"
#include "server/api_error.h"
#include "server/request.h"
#include "server/response.h"
#include "server/send.h"
#include "server/web_assets.h"

namespace mmx::server {

namespace {

// The method a known path is served with; nullptr for an unknown path.
const char* route_method(const std::string& path) {
  for (const char* p : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize", "/v1/messages",
                        "/v1/messages/count_tokens", "/v1/responses"})
    if (path == p) return "POST";
  if (path == "/health" || path == "/metrics" || path.rfind("/v1/models", 0) == 0 || find_web_asset(path)) return "GET";
  return nullptr;
}

const char* endpoint_label(const std::string& path) {
  if (path == "/v1/chat/completions") return "chat_completions";
  if (path == "/v1/completions") return "completions";
  if (path.rfind("/v1/models", 0) == 0) return "models";
  if (path == "/health") return "health";
  if (path == "/metrics") return "metrics";
  if (path == "/tokenize" || path == "/detokenize") return "tokenize";
  if (path == "/v1/messages") return "messages";
  if (path == "/v1/messages/count_tokens") return "count_tokens";
  if (path == "/v1/responses") return "responses";
  if (find_web_asset(path)) return "chat_page";
  return "other";
}

}  // namespace

// ---- Server ----

Server::Server(EngineApi& engine, chat::ServedModel model, ServerOptions opts)
    : engine_(engine), model_(std::move(model)), opts_(std::move(opts)), http_(std::make_unique<httplib::Server>()) {
  MMX_CHECK(model_.tokenizer != nullptr, "ServedModel needs a tokenizer");
  if (model_.created == 0) model_.created = int64_t(std::time(nullptr));
  seed_rng_.seed(opts_.seed ? *opts_.seed : std::random_device{}());
  routes();
}

uint64_t Server::next_seed() {
  std::lock_guard<std::mutex> l(seed_mu_);
  return seed_rng_();
}

Server::~Server() { stop(); }

std::string Server::new_id(const char* prefix) {
  const uint64_t n = n_requests_.fetch_add(1);
  char b[64];
  std::snprintf(b, sizeof b, "%s%08llx%08llx", prefix, (unsigned long long)model_.created & 0xffffffffULL,
                (unsigned long long)n);
  return b;
}

uint64_t Server::tool_call_id_seed() {
  return (uint64_t(std::time(nullptr)) << 20) ^ n_turns_.fetch_add(1);
}

chat::PreparedTurn Server::prepare_chat_turn(ChatRequest& cr) {
  chat::TurnOptions o;
  o.gen = gen_limits(cr);
  o.stop = cr.stop;
  o.max_tool_calls = cr.parallel_tool_calls ? 0 : 1;
  o.context_limit = engine_.context_limit();
  o.default_max_tokens = opts_.default_max_tokens;
  o.drop_reasoning_over = opts_.drop_reasoning_over;
  o.special_in_content = opts_.special_in_content;
  o.parser.keep_unknown_tool_calls = opts_.keep_unknown_tool_calls;
  o.tool_call_id_seed = tool_call_id_seed();
  o.on_prompt = [this](const chat::ChatPrompt& p) {
    if (p.dropped_reasoning_turns > 0) metrics_.count_dropped_reasoning(p.dropped_reasoning_turns);
  };
  return chat::prepare_turn(model_, take_conversation(cr), o);
}

void Server::check_model(const std::string& name) const {
  if (!name.empty() && name != model_.name)
    throw ApiError(404, "The model '" + name + "' does not exist (this server serves '" + model_.name + "')",
                   "model", "model_not_found");
}

// Debian's libcpp-httplib 0.11.4 is compiled with a listen backlog of 5. A burst of connections
// (64 clients starting at once) overflows it; the kernel then answers with SYN cookies and drops
// the handshake's last ACK, the client believes it is connected, and its request is reset about
// 1.2 s later (the load bench's lost "transport error: Read" requests; `nstat` counted them as
// TcpExtListenOverflows). httplib does not expose its socket, so find our listening socket by
// port and call listen() again, which on Linux only raises the backlog.
static void widen_listen_backlog(int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int listening = 0;
    socklen_t len = sizeof listening;
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage a{};
    len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) continue;
    const int p = a.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port)
                  : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                            : -1;
    if (p == port) ::listen(fd, SOMAXCONN);
  }
  closedir(d);
}

void configure_memory_return() {
  mallopt(M_MMAP_THRESHOLD, 256 << 10);  // setting it fixes it: no dynamic raise
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
}

int Server::start(const std::string& host, int port) {
  const int inner = http_->bind_to_any_port("127.0.0.1");
  if (inner <= 0) fail("cannot listen on an internal loopback port");
  widen_listen_backlog(inner);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  FrontOptions f = opts_.front;
  f.max_head_bytes = opts_.max_header_bytes + (size_t(16) << 10);  // + request line and separators
  f.max_body_bytes = opts_.max_body_bytes;
  f.api_key = opts_.api_key;
  front_ = std::make_unique<Front>(f, inner);
  try {
    return front_->start(host, port);
  } catch (...) {
    http_->stop();
    thread_.join();
    throw;
  }
}

void Server::wait() {
  if (thread_.joinable()) thread_.join();
}

void Server::stop() {
  if (front_) front_->stop();
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void Server::routes() {
  httplib::Server& s = *http_;
  const int n_threads = opts_.n_http_threads;
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool(size_t(n_threads)); };
  s.set_payload_max_length(opts_.max_body_bytes);
  // One request per connection. httplib 0.11 gives a handler no way to close its connection, so
  // after a request refused before (or while) its body is read, the unread body bytes would be
  // parsed as the next request on a kept-alive connection: request smuggling by construction.
  // Closing after every response removes that, for one TCP handshake per request (negligible
  // beside a generation).
  s.set_keep_alive_max_count(1);

  // Statuses httplib sets itself (unknown route, body too large, bad request line) get the
  // OpenAI error shape too; handler-made errors already have a body.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    int st = res.status;
    if (st == 404) {  // a known route asked with the wrong method: 405 naming the right one
      if (const char* allow = route_method(req.path); allow && req.method != allow) {
        st = 405;
        res.set_header("Allow", allow);
        send_error(res, ApiError(st, req.method + " " + req.path + " is not allowed: use " + allow),
                   error_shape_for(req.path));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const std::string msg = st == 404   ? "Unknown route: " + req.method + " " + req.path
                            : st == 413 ? std::string("The request body is too large")
                                        : "HTTP error " + std::to_string(st);
    send_error(res, ApiError(st, msg), error_shape_for(req.path));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "internal server error"), error_shape_for(req.path));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  // The chat page (web_assets.h); served without the API key, which the page itself asks for.
  for (const WebAsset* a = web_assets_begin(); a != web_assets_end(); ++a) {
    std::string pattern;  // httplib matches a regex: the path's dots escaped
    for (const char* c = a->path; *c; ++c) pattern += *c == '.' ? std::string("\\.") : std::string(1, *c);
    s.Get(pattern, [a](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_content(a->body.data(), a->body.size(), a->content_type);
    });
  }
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.metrics()), "text/plain; version=0.0.4");
  });
  auto model_card = [this] {
    return json{{"id", model_.name}, {"object", "model"}, {"created", model_.created},
                {"owned_by", "minimax.cpp"}, {"max_model_len", engine_.context_limit()}};
  };
  // What the request head alone decides, before any body byte is read: header limits and the API
  // key on /v1/* (the front checks the key too, and the framing; this covers the internal port).
  // The body of a refused request stays unread (and its connection closes: one request per
  // connection, above).
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto refuse = [&req, &res](const ApiError& e) {
      send_error(res, e, error_shape_for(req.path));
      return httplib::Server::HandlerResponse::Handled;
    };
    size_t header_bytes = 0;
    for (const auto& [k, v] : req.headers) header_bytes += k.size() + v.size();
    if (req.headers.size() > size_t(opts_.max_headers) || header_bytes > opts_.max_header_bytes)
      return refuse(ApiError(431, fmt::format("Request header fields too large: {} fields, {} bytes (this server "
                                              "takes at most {} fields, {} bytes)", req.headers.size(), header_bytes,
                                              opts_.max_headers, opts_.max_header_bytes)));
    try {
      check_api_key(opts_.api_key, req.method, req.path, req.get_header_value("Authorization"),
                    req.get_header_value("x-api-key"));
    } catch (const ApiError& e) {
      return refuse(e);
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.Get("/v1/models", [model_card](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_card()})}});
  });
  s.Get(R"(/v1/models/(.+))", [this, model_card](const httplib::Request& req, httplib::Response& res) {
    try {
      check_model(req.matches[1]);
      send_json(res, 200, model_card());
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  // POST bodies through our own reader, capped on the bytes the server holds (decoded: chunked
  // or not, gzip undone) — a declared Content-Length over the cap is refused by httplib first.
  auto with_body = [this](void (Server::*handle)(const std::string&, httplib::Response&)) {
    return [this, handle](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      std::string body;
      bool over = false;
      const bool complete = read([&](const char* data, size_t n) {
        over = body.size() + n > opts_.max_body_bytes;
        if (!over) body.append(data, n);
        return !over;
      });
      // httplib refuses a declared Content-Length over the cap before delivering a byte.
      over = over || (!complete && req.has_header("Content-Length") &&
                      std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > opts_.max_body_bytes);
      if (!complete && !over)
        return send_error(res, ApiError(400, "The request body could not be read (truncated, or a malformed "
                                             "chunked or Content-Encoding framing)"),
                          error_shape_for(req.path));
      if (over) {
        send_error(res, ApiError(413, fmt::format("The request body is too large (over {} bytes decoded)",
                                                  opts_.max_body_bytes)),
                   error_shape_for(req.path));
        return;  // the rest of it stays unread; the connection closes
      }
      (this->*handle)(body, res);
    };
  };
  s.Post("/v1/chat/completions", with_body(&Server::handle_chat));
  s.Post("/v1/completions", with_body(&Server::handle_completion));
  s.Post("/tokenize", with_body(&Server::handle_tokenize));
  s.Post("/detokenize", with_body(&Server::handle_detokenize));
  s.Post("/v1/messages", with_body(&Server::handle_messages));
  s.Post("/v1/messages/count_tokens", with_body(&Server::handle_count_tokens));
  s.Post("/v1/responses", with_body(&Server::handle_responses));
  if (!opts_.cors_origin.empty()) {
    // CORS for browser clients on another origin: every answer names the allowed origin, and a
    // preflight (OPTIONS, no key needed) says which methods and headers may follow.
    s.Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
      res.set_header("Access-Control-Max-Age", "600");
    });
    s.set_post_routing_handler([origin = opts_.cors_origin](const httplib::Request&, httplib::Response& res) {
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
    });
  }
}

// POST /tokenize -> {"tokens": [...]}, POST /detokenize -> {"content": str} (request.h).
void Server::handle_tokenize(const std::string& body, httplib::Response& res) {
  try {
    const TokenizeRequest r = parse_tokenize_request(parse_body(body));
    const tok::Tokenizer& tok = *model_.tokenizer;
    const std::vector<int32_t> ids =
        r.parse_special ? tok.encode(r.content, r.add_special) : tok.encode_as_text(r.content);
    send_json(res, 200, {{"tokens", ids}});
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void Server::handle_detokenize(const std::string& body, httplib::Response& res) {
  try {
    const DetokenizeRequest r = parse_detokenize_request(parse_body(body));
    const tok::Tokenizer& tok = *model_.tokenizer;
    for (int32_t id : r.tokens)
      if (!tok.has_id(id)) bad_request("token id " + std::to_string(id) + " is not in the vocabulary", "tokens");
    send_json(res, 200, {{"content", tok.decode(r.tokens, r.skip_special)}});
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

}  // namespace mmx::server
