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

#include "base/clock.h"
#include "base/error.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/prompt.h"
#include "server/request.h"
#include "server/response.h"
#include "server/thinking.h"
#include "server/gen_request.h"
#include "server/web_assets.h"

namespace mmx::server {

namespace {

// ---- one request in flight: its choices and what has been sent of them ----

struct ChoiceAcc {
  std::string content, reasoning;
  std::vector<chat::ToolCall> calls;
  std::vector<GenEvent> tokens;   // for logprobs
  std::string finish_reason;
  int64_t text_offset = 0;        // completions logprobs
};

struct Job {
  bool chat = true;
  bool split_reasoning = true;    // send reasoning_content (false for minimax_m2_append_think)
  std::string id, model;
  int64_t created = 0;
  GenerationParams params;
  UsageInfo usage;
  std::unique_ptr<Generation> gen;
  std::vector<ChoiceAcc> acc;
  const tok::Tokenizer* tok = nullptr;
  int ping_ms = 1000;
  bool role_sent = false, finished = false;
};

// What a chat and a completion job share: identity, the parsed parameters, the prompt length.
std::shared_ptr<Job> new_job(bool chat, std::string id, const ServedModel& m, const GenerationParams& params,
                             int ping_ms, int64_t n_prompt) {
  auto job = std::make_shared<Job>();
  job->chat = chat;
  job->id = std::move(id);
  job->model = m.name;
  job->created = int64_t(std::time(nullptr));
  job->params = params;
  job->tok = m.tokenizer;
  job->ping_ms = ping_ms;
  job->usage.prompt = n_prompt;
  return job;
}

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// An error in the shape of the API its request was for (api_error.h): OpenAI's from the OpenAI
// routes' own handlers, error_shape_for(req.path) from everything that serves any path.
void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape = ErrorShape::kOpenAI) {
  res.status = e.status;
  res.set_content(error_body(e, shape), "application/json");
}

UsageInfo finish_usage(Job& job) {
  UsageInfo u = job.usage;
  u.completion = job.gen->n_generated_total();
  for (const ChoiceUsage& c : job.gen->usage()) u.cached = std::max(u.cached, c.n_cached);
  return u;
}

// ---- non-streaming ----

void accumulate(Job& job, Update u) {
  ChoiceAcc& a = job.acc[size_t(u.choice)];
  a.content += u.delta.content;
  a.reasoning += u.delta.reasoning;
  for (chat::ToolCall& c : u.delta.tool_calls) a.calls.push_back(std::move(c));
  for (GenEvent& t : u.tokens) a.tokens.push_back(std::move(t));
  if (u.finished) a.finish_reason = u.finish_reason;
}

json whole_response(Job& job) {
  json choices = json::array();
  for (size_t i = 0; i < job.acc.size(); ++i) {
    ChoiceAcc& a = job.acc[i];
    if (job.chat) {
      json msg = {{"role", "assistant"},
                  {"content", a.content.empty() && !a.calls.empty() ? json(nullptr) : json(a.content)}};
      if (job.split_reasoning) msg["reasoning_content"] = a.reasoning.empty() ? json(nullptr) : json(a.reasoning);
      if (!a.calls.empty()) msg["tool_calls"] = tool_calls_json(a.calls, 0);
      json lp = job.params.logprobs ? json{{"content", chat_logprobs_content(*job.tok, a.tokens)}} : json(nullptr);
      choices.push_back({{"index", i}, {"message", msg}, {"logprobs", lp}, {"finish_reason", a.finish_reason}});
    } else {
      json lp = job.params.logprobs ? completion_logprobs(*job.tok, a.tokens, job.params.top_logprobs, a.text_offset)
                                    : json(nullptr);
      choices.push_back({{"index", i}, {"text", a.content}, {"logprobs", lp}, {"finish_reason", a.finish_reason}});
    }
  }
  return {{"id", job.id},
          {"object", job.chat ? "chat.completion" : "text_completion"},
          {"created", job.created},
          {"model", job.model},
          {"choices", choices},
          {"usage", usage_json(finish_usage(job))}};
}

// ---- streaming: one call of next_events() = the SSE text of one engine update ----

json chunk(const Job& job, json choices) {
  return {{"id", job.id},
          {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", job.created},
          {"model", job.model},
          {"choices", std::move(choices)}};
}

std::string update_events(Job& job, Update u) {
  ChoiceAcc& a = job.acc[size_t(u.choice)];
  std::string out;
  const bool has_lp = job.params.logprobs && !u.tokens.empty();
  if (job.chat) {
    json delta = json::object();
    if (!u.delta.reasoning.empty() && job.split_reasoning) delta["reasoning_content"] = u.delta.reasoning;
    if (!u.delta.content.empty()) delta["content"] = u.delta.content;
    if (!u.delta.tool_call_deltas.empty()) delta["tool_calls"] = tool_call_deltas_json(u.delta.tool_call_deltas);
    if (!delta.empty() || has_lp) {
      json lp = has_lp ? json{{"content", chat_logprobs_content(*job.tok, u.tokens)}} : json(nullptr);
      out += sse(chunk(job, json::array({chat_chunk_choice(u.choice, delta, lp, "")})));
    }
    if (u.finished)
      out += sse(chunk(job, json::array({chat_chunk_choice(u.choice, json::object(), nullptr, u.finish_reason)})));
  } else if (!u.delta.content.empty() || has_lp || u.finished) {
    json lp = has_lp ? completion_logprobs(*job.tok, u.tokens, job.params.top_logprobs, a.text_offset) : json(nullptr);
    out += sse(chunk(job, json::array({{{"index", u.choice},
                                        {"text", u.delta.content},
                                        {"logprobs", lp},
                                        {"finish_reason", u.finished ? json(u.finish_reason) : json(nullptr)}}})));
  }
  return out;
}

std::string next_events(Job& job) {
  std::string out;
  if (job.chat && !job.role_sent) {
    for (size_t i = 0; i < job.acc.size(); ++i)
      out += sse(chunk(job, json::array({chat_chunk_choice(int(i), {{"role", "assistant"}, {"content", ""}},
                                                           nullptr, "")})));
    job.role_sent = true;
    return out;
  }
  try {
    if (!job.gen->done()) {
      std::optional<Update> u = job.gen->next_for(job.ping_ms);
      // Nothing for a while (long prefill, slow step): an SSE comment, which clients ignore,
      // keeps the connection checked so a vanished client is cancelled promptly.
      return u ? update_events(job, std::move(*u)) : std::string(": ping\n\n");
    }
  } catch (const ApiError& e) {
    job.gen->cancel_all();  // an engine error mid-stream: report it in-band and end
    out += sse(e.to_json());
  } catch (const std::exception&) {
    job.gen->cancel_all();
    out += sse(ApiError(500, "internal error while generating").to_json());
  }
  if (job.params.include_usage) {
    json c = chunk(job, json::array());
    c["usage"] = usage_json(finish_usage(job));
    out += sse(c);
  }
  out += "data: [DONE]\n\n";
  job.finished = true;
  return out;
}

// The method a known path is served with; nullptr for an unknown path.
const char* route_method(const std::string& path) {
  for (const char* p : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize", "/v1/messages",
                        "/v1/messages/count_tokens"})
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
  if (find_web_asset(path)) return "chat_page";
  return "other";
}

}  // namespace

// ---- Server ----

Server::Server(EngineApi& engine, ServedModel model, ServerOptions opts)
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

// ---- the two generation endpoints share everything after the prompt ids ----

namespace {

// Submits, then either answers whole or installs the SSE provider. Throws ApiError.
void run_job(std::shared_ptr<Job> job, EngineApi& engine, ServerMetrics& metrics, const GenRequest& g,
             httplib::Response& res) {
  if (job->params.n > engine.max_queued())  // a 429 that no retry could ever turn into a 200
    throw ApiError(400,
                   fmt::format("'n' is {} but this server queues at most {} requests at once (its --max-queue); "
                               "ask for fewer choices", job->params.n, engine.max_queued()),
                   "n");
  job->acc.resize(size_t(job->params.n));
  job->gen->submit(job->params.n, g);
  if (!job->params.stream) {
    while (!job->gen->done()) accumulate(*job, job->gen->next());
    metrics.count_tokens(job->usage.prompt, job->gen->n_generated_total());
    send_json(res, 200, whole_response(*job));
    return;
  }
  job->gen->wait_started();  // an engine refusal (429, ...) still gets its status code
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, httplib::DataSink& sink) {
        const std::string ev = next_events(*job);
        if (!ev.empty() && !sink.write(ev.data(), ev.size())) return false;  // client gone
        if (job->finished) sink.done();
        return true;
      },
      [job, &metrics](bool) {
        job->gen->cancel_all();  // no-op when finished; cancels when the client went away
        metrics.count_tokens(job->usage.prompt, job->gen->n_generated_total());
      });
}

}  // namespace

GenRequest make_gen_request(const GenerationParams& p, std::vector<int32_t> ids, int64_t context,
                            int64_t default_max_tokens, int64_t vocab,
                            const std::vector<int32_t>& eos, const char* prompt_param) {
  const int64_t n_prompt = int64_t(ids.size());
  if (n_prompt >= context) context_exceeded(context, std::to_string(n_prompt), prompt_param);
  GenRequest g;
  g.prompt = std::move(ids);
  g.sampling = p.sampling;
  g.max_tokens = std::min(p.max_tokens.value_or(default_max_tokens > 0 ? default_max_tokens : context),
                          context - n_prompt);
  if (!p.ignore_eos) g.stop_ids = eos;
  g.ignore_eos = p.ignore_eos;
  g.logprobs = p.logprobs;
  g.top_logprobs = p.top_logprobs;
  for (const auto& [id, bias] : p.sampling.logit_bias)
    if (id >= vocab) bad_request("'logit_bias' names token id " + std::to_string(id) + ", outside the vocabulary", "logit_bias");
  return g;
}


void Server::handle_chat(const std::string& body, httplib::Response& res) {
  const double t0 = now_s();
  try {
    ChatRequest cr = parse_chat_request(parse_body(body), model_.sampling);
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    apply_reasoning_effort(cr, model_);
    const int64_t ctx = engine_.context_limit();
    ChatPrompt p = build_chat_prompt(model_, cr, opts_.drop_reasoning_over, ctx, opts_.special_in_content);
    if (p.dropped_reasoning_turns > 0) metrics_.count_dropped_reasoning(p.dropped_reasoning_turns);
    GenRequest g = make_gen_request(cr, p.ids, ctx, opts_.default_max_tokens, model_.tokenizer->vocab_size(), model_.eos_ids, "messages");
    g.constraint = constraints_.make(cr, cr.tools, cr.tool_choice, cr.forced_tool, p.starts_in_reasoning, g.max_tokens);

    auto job = new_job(true, new_id("chatcmpl-"), model_, cr, opts_.stream_ping_ms, int64_t(p.ids.size()));
    job->split_reasoning = model_.format != chat::OutputFormat::kM2AppendThink;
    job->usage.report_drop = opts_.drop_reasoning_over > 0;
    job->usage.dropped_turns = p.dropped_reasoning_turns;
    job->usage.prompt_before_drop = p.n_tokens_before_drop;
    const nlohmann::json tools = cr.tools.is_null() ? nlohmann::json(nullptr) : nlohmann::json::parse(cr.tools.dump());
    const uint64_t id_seed = (uint64_t(job->created) << 20) ^ n_requests_.load();
    const tok::Tokenizer& tok = *model_.tokenizer;
    const chat::OutputFormat format = model_.format;
    const bool in_reasoning = p.starts_in_reasoning;
    const std::vector<std::string> stop = cr.stop;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids, [=, &tok](int i) {
      return OutputStream(tok, stop, chat::OutputParser(format, tools, in_reasoning, id_seed + uint64_t(i) * 7919));
    });
    run_job(job, engine_, metrics_, g, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/chat/completions: %s\n", e.what());
    send_error(res, ApiError(500, "internal server error"));
  }
}

void Server::handle_completion(const std::string& body, httplib::Response& res) {
  const double t0 = now_s();
  try {
    CompletionRequest cr = parse_completion_request(parse_body(body), model_.sampling);
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    const tok::Tokenizer& tok = *model_.tokenizer;
    std::vector<int32_t> ids = cr.prompt_ids;
    if (ids.empty()) {
      // Too long to fit whatever it encodes to: refused before encoding (megabytes of ids otherwise).
      if (const int64_t at_least = tok.min_tokens(cr.prompt_text.size()); at_least >= engine_.context_limit())
        context_exceeded(engine_.context_limit(), "at least " + std::to_string(at_least), "prompt");
      ids = tok.encode(cr.prompt_text, /*add_special_tokens=*/true);
      if (ids.empty()) bad_request("'prompt' has no tokens", "prompt");
    }
    for (int32_t id : ids)
      if (!tok.has_id(id)) bad_request("token id " + std::to_string(id) + " is not in the vocabulary", "prompt");
    const int64_t ctx = engine_.context_limit();
    GenRequest g = make_gen_request(cr, ids, ctx, opts_.default_max_tokens, model_.tokenizer->vocab_size(), model_.eos_ids, "prompt");
    g.constraint = constraints_.make(cr, nullptr, "auto", "", /*starts_in_reasoning=*/false, g.max_tokens);

    auto job = new_job(false, new_id("cmpl-"), model_, cr, opts_.stream_ping_ms, int64_t(ids.size()));
    const std::vector<std::string> stop = cr.stop;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids,
                                            [stop, &tok](int) { return OutputStream(tok, stop, std::nullopt); });
    run_job(job, engine_, metrics_, g, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/completions: %s\n", e.what());
    send_error(res, ApiError(500, "internal server error"));
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
