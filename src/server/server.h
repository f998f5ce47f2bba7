// The OpenAI- and Anthropic-compatible HTTP server over an EngineApi: the routes, served by the
// front (front.h), the one HTTP stack of the process.
//
//   POST /v1/chat/completions   messages -> chat template -> ids -> engine -> OutputParser -> JSON/SSE
//   POST /v1/completions        prompt text or ids -> engine -> text -> JSON/SSE
//   POST /tokenize, /detokenize  text <-> ids (llama-server's shape)
//   POST /v1/messages, /v1/messages/count_tokens  the Anthropic Messages API (anthropic_route.cpp)
//   POST /v1/responses          the OpenAI Responses API (responses_route.cpp)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus text)
//   a known path with the wrong method: 405 with Allow; with --cors-origin, OPTIONS preflights
//
// Errors are OpenAI error JSON with the right status (400/401/404/405/413/429/500); a handler never
// lets an exception escape, and 500s carry no internal detail. A client that disconnects while
// streaming gets its engine requests cancelled.
//
// server.cpp sets the server up and serves the shared routes (models, health, metrics, tokenize,
// the chat page, errors); openai_route.cpp and anthropic_route.cpp shape the generation routes.
// Not here: batching, sampling, memory (the engine); parsing of bodies (request.h); the chat turn
// itself — prompt, engine request, output parsing (src/chat, chat/turn.h); per-choice output
// (generation.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_api.h"
#include "chat/served_model.h"
#include "chat/constraints.h"
#include "server/front.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/responses_store.h"

namespace mmx::chat {
struct PreparedTurn;
}  // namespace mmx::chat

namespace mmx::server {

struct ChatRequest;

struct ServerOptions {
  // None = no authentication; else "Authorization: Bearer KEY" (or x-api-key) with one of them
  // (front.h). With several, each key is a client of its own for fair admission (engine/scheduler.h);
  // otherwise clients are told apart by address.
  std::vector<std::string> api_keys;
  std::string cors_origin;                // "" = no CORS headers; else Access-Control-Allow-Origin (or "*")
  double drop_reasoning_over = 0;         // 0 = off; else a fraction of the context (chat/prompt.h)
  // Larger bodies get 413. Counted on what the server holds: the decoded bytes (chunked or not,
  // after any Content-Encoding is undone), so neither chunking nor gzip can exceed it.
  size_t max_body_bytes = size_t(8) << 20;
  int max_headers = 100;                    // request header fields; more get 431
  // false: special-token strings in client content are tokenized as text (chat/prompt.h); true: as
  // special tokens (--special-tokens-in-content, for clients that build raw prompts in messages).
  bool special_in_content = false;
  // Calls to a function the request's tools do not list: dropped (false, as vLLM and SGLang do)
  // or emitted (--keep-unknown-tool-calls). chat/output_parser.h, ParserOptions.
  bool keep_unknown_tool_calls = false;
  size_t max_header_bytes = size_t(32) << 10;  // their total size (names + values); more get 431
  // The front's deadlines and caps (front.h); its header, body and key limits are set from the
  // fields above by start().
  FrontOptions front;
  int stream_ping_ms = 1000;              // SSE comment ": ping" after this long without output
  // max_tokens when the client gives none (0 = up to the context). It reserves nothing: KV is
  // paged (memory/paged_memory.h), a sequence holds pages only for the tokens it has, and
  // admission asks room for the prompt only (engine/scheduler.h). It bounds how long a reply that
  // never reaches eos runs — holding its pages, and preempting newer sequences when the pool runs
  // out — so a request that did not ask cannot generate a 196K-context model's whole context.
  int64_t default_max_tokens = 8192;
  // The sampling seed of a request that gives none is drawn from a server RNG seeded with this
  // (--seed: the same requests in the same order sample the same), or from std::random_device.
  std::optional<uint64_t> seed;
};

// Process-wide: makes glibc give large freed blocks back to the system. Its default mmap
// threshold rises to the size of each large block freed (up to 32 MiB), after which such blocks
// come from the heap arenas — one per busy thread — and stay there: RSS kept every huge rejected
// request's buffers (hardening issue, finding 4). A fixed threshold (256 KiB) keeps every larger
// block mmapped, so freeing it returns it. Call once at start-up, before threads are spawned.
void configure_memory_return();

class Server {
 public:
  // `engine` and the pointers in `model` must outlive the server.
  Server(EngineApi& engine, chat::ServedModel model, ServerOptions opts);
  ~Server();  // stops

  // Binds host:port (port 0 = an ephemeral port) and serves on background threads (front.h:
  // whole requests read under limits and deadlines, then routed here on worker threads). Returns
  // the port; throws mmx::Error when the address cannot be bound.
  int start(const std::string& host, int port);
  void wait();  // blocks until stop() (from another thread or a signal handler's helper)
  void stop();

  ServerMetrics& metrics() { return metrics_; }

 private:
  // Every complete request (on a front worker): route, answer, count. Never throws.
  void serve(HttpRequest& req, HttpResponse& res);
  void route(HttpRequest& req, HttpResponse& res);
  void handle_chat(const HttpRequest& req, HttpResponse& res);        // openai_route.cpp
  void handle_completion(const HttpRequest& req, HttpResponse& res);  // openai_route.cpp
  void handle_tokenize(const HttpRequest& req, HttpResponse& res);
  void handle_detokenize(const HttpRequest& req, HttpResponse& res);
  void handle_messages(const HttpRequest& req, HttpResponse& res);       // anthropic_route.cpp
  void handle_count_tokens(const HttpRequest& req, HttpResponse& res);  // anthropic_route.cpp
  void handle_responses(const HttpRequest& req, HttpResponse& res);     // responses_route.cpp
  std::string new_id(const char* prefix);
  uint64_t next_seed();
  // The tool-call id seed of a chat turn (chat::TurnOptions): the time, mixed with a turn counter.
  uint64_t tool_call_id_seed();
  // A chat body's turn (both chat routes): cr's conversation (its messages moved out) through
  // chat::prepare_turn with this server's limits; counts dropped reasoning turns. Throws chat::ChatError.
  chat::PreparedTurn prepare_chat_turn(ChatRequest& cr);
  void check_model(const std::string& name) const;

  EngineApi& engine_;
  chat::ServedModel model_;
  ServerOptions opts_;
  ServerMetrics metrics_;
  chat::Constraints constraints_{model_};  // structured output: compiled grammars, kept
  ResponseStore responses_;                // /v1/responses kept for previous_response_id (in memory)
  std::unique_ptr<Front> front_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;
  std::atomic<uint64_t> n_requests_{0};
  std::atomic<uint64_t> n_turns_{0};
  std::mutex seed_mu_;
  std::mt19937_64 seed_rng_;
};

}  // namespace mmx::server
