// mmx serve — the OpenAI-compatible HTTP server (src/server) over the continuous-batching
// Engine (src/engine/engine.h) for one checkpoint.
//
//   mmx serve -m DIR [--host 127.0.0.1] [--port 8080] [--api-key K ...] [--reasoning-format F]
//             [--max-batch-tokens N] [--kv-pages N] [--max-queue N] [--max-running N]
//             [--served-model-name NAME] [--drop-reasoning-over F] [--keep-unknown-tool-calls] [-t THREADS]
//
// Prints "mmx serve: listening on http://HOST:PORT" on stderr once it accepts connections
// (--port 0 picks a free port; the line says which). SIGINT / SIGTERM stop it cleanly.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "base/error.h"
#include "engine/generation_defaults.h"
#include "chat_model.h"
#include "cache_flags.h"
#include "chat/served_model.h"
#include "common.h"
#include "engine/engine.h"
#include "ops/ops.h"
#include "server/server.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct Opts {
  std::string model, host = "127.0.0.1", reasoning_format = "auto", served_name, chat_template;
  CacheFlags cache;
  int port = 8080, threads = 0;
  LoadOptions load;
  EngineOptions engine;  // what the engine owns: budgets and queue limits (passed through)
  server::ServerOptions server;
};

void run_serve(Opts o) {
  if (o.engine.max_step_strict && o.engine.max_step_ms < 0)
    fail("--max-step-strict bounds steps to --max-step-ms, which is off ({}): give it a target (0 = auto)",
         o.engine.max_step_ms);
  server::configure_memory_return();
  ops::set_n_threads(o.threads);
  const Checkpoint ck = open_checkpoint(o.model);
  if (!ck.has_tokenizer())
    fail("{} has no tokenizer.json: the server needs the checkpoint's tokenizer", o.model);
  tok::Tokenizer tokenizer = load_tokenizer(ck);
  std::optional<ChatTemplate> tmpl;
  try {
    tmpl.emplace(load_chat_template(ck, o.chat_template));
  } catch (const Error& e) {
    if (!o.chat_template.empty()) throw;  // the file asked for must load
    std::fprintf(stderr, "mmx serve: no chat template (%s); /v1/chat/completions will answer 400\n", e.what());
  }
  auto model = load_for_cli(o.model, o.load);

  chat::ServedModel sm;
  sm.name = o.served_name.empty() ? std::filesystem::path(o.model).lexically_normal().filename().string() : o.served_name;
  if (sm.name.empty()) sm.name = std::filesystem::path(o.model).lexically_normal().parent_path().filename().string();
  sm.tokenizer = &tokenizer;
  sm.chat_template = tmpl ? &*tmpl : nullptr;
  describe_model(*model, o.model, o.reasoning_format, sm);

  o.engine.eos_ids = sm.eos_ids;
  if (o.engine.spec_k > 0) o.engine.drafter = std::make_shared<PromptLookupDrafter>();
  o.engine.n_valid_vocab = tokenizer.vocab_size();
  o.engine.kv_dtype = o.cache.kv_dtype();
  o.engine.ik_dtype = o.cache.ik_dtype();
  Engine engine(*model, o.engine);
  const PagedMemory& kv = engine.memory();
  std::fprintf(stderr, "mmx serve: KV pool %lld pages x %lld tokens, %s (%.1f MiB); longest request %lld tokens\n",
               (long long)kv.n_pages(), (long long)kv.page(), o.cache.describe().c_str(), double(kv.bytes()) / (1 << 20),
               (long long)engine.context_limit());
  server::Server srv(engine, sm, o.server);
  const int port = srv.start(o.host, o.port);
  std::fprintf(stderr, "mmx serve: %s (%s) listening on http://%s:%d\n", sm.name.c_str(), o.model.c_str(),
               o.host.c_str(), port);
  std::signal(SIGPIPE, SIG_IGN);  // a client that disconnects mid-write is an error return, not death
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "mmx serve: stopping\n");
  srv.stop();
}

}  // namespace

void add_serve(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, "
                                            "/v1/completions, /v1/models, /tokenize, /detokenize, /health, /metrics)");
  c->add_option("-m,--model", o->model, "Checkpoint directory (Hugging Face layout)")->required();
  c->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  c->add_option("--port", o->port, "Port (0 = any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  c->add_option("--api-key", o->server.api_keys,
                "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every request but GET /health, the chat "
                "page (GET /) and CORS preflights; repeat it for several keys, each then a client of its own for fair "
                "admission (without it, clients are told apart by address)")
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c->add_option("--chat-template", o->chat_template,
                "A Jinja chat template file to use instead of the checkpoint's (special tokens still from -m)");
  c->add_option("--cors-origin", o->server.cors_origin,
                "Allow browser pages from this origin (e.g. http://localhost:3000, or *) to call the API");
  c->add_option("--reasoning-format", o->reasoning_format,
                "Output parser: auto (by model family), minimax_m2 (reasoning_content field), "
                "minimax_m2_append_think (\"<think>\" + text in content), minimax_m3, minimax")
      ->capture_default_str();
  c->add_option("--served-model-name", o->served_name, "Model name for clients (default: the directory name)");
  c->add_flag("--keep-unknown-tool-calls", o->server.keep_unknown_tool_calls,
              "Emit tool calls to functions the request's tools do not list (by default they are dropped, "
              "as vLLM and SGLang do)");
  c->add_option("--drop-reasoning-over", o->server.drop_reasoning_over,
                "When the prompt exceeds F x context, drop reasoning of the oldest assistant turns "
                "(0 = off; 0.3 is a good start)")
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--max-step-ms", o->engine.max_step_ms,
                "Engine: target step time while requests decode; prefill chunks shrink to keep it, so streams are "
                "not stalled by a long prompt (0 = auto: 1.5x a decode-only step, learned; -1 = off, the default: "
                "it trades time-to-first-token for inter-token latency, see README)")
      ->capture_default_str();
  c->add_flag("--max-step-strict", o->engine.max_step_strict,
              "Engine, with --max-step-ms: bound every step, also while a burst of prompts outnumbers the decoding "
              "streams (by default those are prefilled at full speed); the first prompts of a burst see their first "
              "token sooner, the streams beside them a longer inter-token tail (README: serving)");
  c->add_option("--max-batch-tokens", o->engine.max_batch_tokens, "Engine: tokens per step")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--kv-pages", o->engine.kv_pages,
                "Engine: pages in the shared KV pool (a page = 16 tokens, 128 for M3's MSA blocks; "
                "0 = up to 2 GiB, at most 64 contexts)")
      ->check(CLI::NonNegativeNumber);
  add_cache_flags(c, &o->cache);
  c->add_option("--state-snapshots", o->engine.max_state_snapshots,
                "Engine, lightning models (Text-01/M1): prefix states kept for prefix-cache hits "
                "(each is one sequence's states: 280 MiB for MiniMax-Text-01)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--state-checkpoint-every", o->engine.state_checkpoint_every,
                "Engine, lightning models: tokens between state snapshots (prefix hits land on them)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--max-queue", o->engine.max_waiting, "Engine: waiting requests before 429")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--max-running", o->engine.max_running, "Engine: sequences decoded together")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--batch-wait-ms", o->engine.batch_wait_ms,
                "Engine: when idle, a request waits up to this long for others to join its first step, so a "
                "burst of requests is prefilled together and decodes in step (0 = start at once)")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  c->add_option("--lookup", o->engine.spec_k,
                "Engine: speculative decoding by prompt lookup, up to K drafted tokens per sequence and step, "
                "verified in the same forward (output unchanged; /metrics counts mmx_spec_decode_*)")
      ->check(CLI::Range(0, 16));
  c->add_flag("--log-steps", o->engine.log_steps,
              "Engine: print one line per step to stderr (decodes, prefill tokens, time, what the step budget learned)");
  c->add_option("--default-max-tokens", o->server.default_max_tokens,
                "max_tokens of requests that give none (0 = up to the context)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--max-handlers,--http-threads", o->server.front.max_handlers,
                "Requests answered at once (a thread each, made as needed; a stream holds one to its end); more wait")
      ->capture_default_str()->check(CLI::Range(2, 65536));
  c->add_option("--keep-alive-ms", o->server.front.keep_alive_ms, "An idle kept-alive connection is closed after this")
      ->capture_default_str()->check(CLI::Range(0, 3600000));
  c->add_option("--max-requests-per-connection", o->server.front.max_requests_per_connection,
                "Requests one kept-alive connection may carry; the last is answered with 'Connection: close'")
      ->capture_default_str()->check(CLI::Range(1, 1 << 30));
  c->add_option("--write-timeout-ms", o->server.front.write_timeout_ms,
                "A client that takes no byte of its pending answer for this long is cut (its generation cancelled)")
      ->capture_default_str()->check(CLI::Range(100, 3600000));
  c->add_option("--send-buffer-bytes", o->server.front.send_buffer_bytes,
                "SO_SNDBUF of client sockets (0 = the kernel's, autotuned): what a client that stops reading can "
                "hold in the kernel before --write-timeout-ms applies")
      ->capture_default_str()->check(CLI::Range(0, 1 << 30));
  c->add_option("--max-out-bytes", o->server.front.max_out_bytes,
                "Answer bytes held per connection for a slow client; its stream waits past this")
      ->capture_default_str()->check(CLI::Range(size_t(4096), size_t(1) << 30));
  c->add_option("--max-body-bytes", o->server.max_body_bytes,
                "Request bodies larger than this, decoded (chunked or gzip included), get 413")
      ->capture_default_str()->check(CLI::Range(size_t(1024), size_t(1) << 32));
  c->add_flag("--special-tokens-in-content", o->server.special_in_content,
              "Tokenize special-token strings inside chat messages and tools as special tokens (default: as "
              "text, so a user cannot write a role marker; the template's own markers are always special)");
  c->add_option("--head-timeout-ms", o->server.front.head_timeout_ms, "A request head must arrive within this (else 408)")
      ->capture_default_str()->check(CLI::Range(100, 3600000));
  c->add_option("--body-timeout-ms", o->server.front.body_timeout_ms,
                "A request body must arrive within this after its head (else 408)")
      ->capture_default_str()->check(CLI::Range(100, 3600000));
  c->add_option("--max-connections", o->server.front.max_connections, "Open client connections (503 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  c->add_option("--max-per-client", o->server.front.max_per_client, "Open connections per client address (503 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  c->add_option("--max-buffered-bytes", o->server.front.max_buffered_bytes,
                "Request bytes the server holds over all connections while they arrive (503 beyond)")
      ->capture_default_str()->check(CLI::Range(size_t(1) << 20, size_t(1) << 40));
  c->add_option("--max-headers", o->server.max_headers, "Request header fields; more get 431")
      ->capture_default_str()->check(CLI::Range(8, 10000));
  c->add_option("--max-header-bytes", o->server.max_header_bytes,
                "Total bytes of a request's header fields; more get 431")
      ->capture_default_str()->check(CLI::Range(size_t(1024), size_t(1) << 24));
  c->add_option("--seed", o->server.seed,
                 "Seed of the RNG that draws the sampling seed of each request that gives none (default: random at "
                 "start-up; set it for a reproducible server)");
  c->add_option("-t,--threads", o->threads, "CPU threads for the model (0 = all cores)");
  add_load_options(c, &o->load);
  c->callback([o, &action] { action = [o] { run_serve(*o); }; });
}

}  // namespace mmx::cli
