#include "server/server.h"

#include <malloc.h>

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
    : engine_(engine), model_(std::move(model)), opts_(std::move(opts)) {
  MMX_CHECK(model_.tokenizer != nullptr, "ServedModel needs a tokenizer");
  if (model_.created == 0) model_.created = int64_t(std::time(nullptr));
  seed_rng_.seed(opts_.seed ? *opts_.seed : std::random_device{}());
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

void configure_memory_return() {
  mallopt(M_MMAP_THRESHOLD, 256 << 10);  // setting it fixes it: no dynamic raise
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
}

int Server::start(const std::string& host, int port) {
  FrontOptions f = opts_.front;
  f.max_headers = opts_.max_headers;
  f.max_header_bytes = opts_.max_header_bytes;
  f.max_head_bytes = opts_.max_header_bytes + (size_t(16) << 10);  // + request line and separators
  f.max_body_bytes = opts_.max_body_bytes;
  f.api_keys = opts_.api_keys;
  front_ = std::make_unique<Front>(f, [this](HttpRequest& req, HttpResponse& res) { serve(req, res); });
  return front_->start(host, port);
}

void Server::wait() {
  std::unique_lock<std::mutex> l(stop_mu_);
  stop_cv_.wait(l, [this] { return stopped_; });
}

void Server::stop() {
  if (front_) front_->stop();
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopped_ = true;
  }
  stop_cv_.notify_all();
}

void Server::serve(HttpRequest& req, HttpResponse& res) {
  try {
    route(req, res);
  } catch (const ApiError& e) {
    res = HttpResponse();
    send_error(res, e, error_shape_for(req.path));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in %s %s: %s\n", req.method.c_str(), req.path.c_str(), e.what());
    res = HttpResponse();
    send_error(res, ApiError(500, "internal server error"), error_shape_for(req.path));
  }
  if (!opts_.cors_origin.empty()) {
    // CORS for browser clients on another origin: every answer names the allowed origin.
    res.set_header("Access-Control-Allow-Origin", opts_.cors_origin);
    if (opts_.cors_origin != "*") res.set_header("Vary", "Origin");
  }
  metrics_.count_request(endpoint_label(req.path), res.status);
}

// The routes. HEAD is served wherever GET is (the front sends the head without the body).
void Server::route(HttpRequest& req, HttpResponse& res) {
  const std::string& path = req.path;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  if (method == "OPTIONS" && !opts_.cors_origin.empty()) {
    // A CORS preflight (no key needed): which methods and headers may follow.
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
    res.set_header("Access-Control-Max-Age", "600");
    return;
  }
  const char* allow = route_method(path);
  if (!allow) throw ApiError(404, "Unknown route: " + req.method + " " + path);
  if (method != allow) {
    res.set_header("Allow", allow);
    send_error(res, ApiError(405, req.method + " " + path + " is not allowed: use " + allow), error_shape_for(path));
    return;
  }
  using Handle = void (Server::*)(const HttpRequest&, HttpResponse&);
  static const std::pair<const char*, Handle> kPosts[] = {
      {"/v1/chat/completions", &Server::handle_chat},   {"/v1/completions", &Server::handle_completion},
      {"/tokenize", &Server::handle_tokenize},          {"/detokenize", &Server::handle_detokenize},
      {"/v1/messages", &Server::handle_messages},       {"/v1/messages/count_tokens", &Server::handle_count_tokens},
      {"/v1/responses", &Server::handle_responses}};
  for (const auto& [p, handle] : kPosts)
    if (path == p) return (this->*handle)(req, res);

  if (path == "/health") return send_json(res, 200, {{"status", "ok"}});
  if (path == "/metrics") {
    const FrontStats f = front_ ? front_->stats() : FrontStats{};
    return res.set_content(metrics_.render(engine_.metrics(), f), "text/plain; version=0.0.4");
  }
  if (const WebAsset* a = find_web_asset(path)) {  // the chat page; served without the API key, which it asks for
    res.set_header("Cache-Control", "no-cache");
    return res.set_content(std::string(a->body), a->content_type);
  }
  const json card = {{"id", model_.name}, {"object", "model"}, {"created", model_.created},
                     {"owned_by", "minimax.cpp"}, {"max_model_len", engine_.context_limit()}};
  if (path == "/v1/models") return send_json(res, 200, {{"object", "list"}, {"data", json::array({card})}});
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) == 0 && path.size() > prefix.size()) {
    check_model(path.substr(prefix.size()));
    return send_json(res, 200, card);
  }
  throw ApiError(404, "Unknown route: " + req.method + " " + path);
}

// POST /tokenize -> {"tokens": [...]}, POST /detokenize -> {"content": str} (request.h).
void Server::handle_tokenize(const HttpRequest& req, HttpResponse& res) {
  try {
    const TokenizeRequest r = parse_tokenize_request(parse_body(req.body));
    const tok::Tokenizer& tok = *model_.tokenizer;
    const std::vector<int32_t> ids =
        r.parse_special ? tok.encode(r.content, r.add_special) : tok.encode_as_text(r.content);
    send_json(res, 200, {{"tokens", ids}});
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void Server::handle_detokenize(const HttpRequest& req, HttpResponse& res) {
  try {
    const DetokenizeRequest r = parse_detokenize_request(parse_body(req.body));
    const tok::Tokenizer& tok = *model_.tokenizer;
    for (int32_t id : r.tokens)
      if (!tok.has_id(id)) bad_request("token id " + std::to_string(id) + " is not in the vocabulary", "tokens");
    send_json(res, 200, {{"content", tok.decode(r.tokens, r.skip_special)}});
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

}  // namespace mmx::server
