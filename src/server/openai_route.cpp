// POST /v1/chat/completions and /v1/completions: the OpenAI generation routes, symmetric to
// anthropic_route.cpp. A chat body becomes a ChatRequest (request.h), then a chat turn
// (chat::prepare_turn through Server::prepare_chat_turn: prompt, engine request, per-choice
// OutputStreams); a completion's prompt is text or ids. Both are driven by Generation and shaped
// here as OpenAI's JSON objects or SSE chunks (response.h has the pieces).
#include "server/http.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "base/clock.h"
#include "chat/turn.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/request.h"
#include "server/response.h"
#include "server/send.h"
#include "server/server.h"

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
std::shared_ptr<Job> new_job(bool chat, std::string id, const chat::ServedModel& m, const GenerationParams& params,
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

// ---- the two generation routes share everything after the prompt ids ----

// Submits, then either answers whole or installs the SSE provider. Throws ApiError.
void run_job(std::shared_ptr<Job> job, EngineApi& engine, ServerMetrics& metrics, const GenRequest& g,
             HttpResponse& res) {
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
      [job](StreamSink& sink) {
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

void Server::handle_chat(const HttpRequest& req, HttpResponse& res) {
  const double t0 = now_s();
  try {
    ChatRequest cr = parse_chat_request(parse_body(req.body), model_.sampling);
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    chat::PreparedTurn t = prepare_chat_turn(cr);
    GenRequest& g = t.request;
    g.client = req.client;
    g.constraint = constraints_.make(output_structure(cr), cr.tools, cr.tool_choice, cr.forced_tool, t.prompt.starts_in_reasoning, g.max_tokens);

    auto job = new_job(true, new_id("chatcmpl-"), model_, cr, opts_.stream_ping_ms, int64_t(t.prompt.ids.size()));
    job->split_reasoning = model_.format != chat::OutputFormat::kM2AppendThink;
    job->usage.report_drop = opts_.drop_reasoning_over > 0;
    job->usage.dropped_turns = t.prompt.dropped_reasoning_turns;
    job->usage.prompt_before_drop = t.prompt.n_tokens_before_drop;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids, t.make_stream);
    run_job(job, engine_, metrics_, g, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const chat::ChatError& e) {
    send_error(res, to_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/chat/completions: %s\n", e.what());
    send_error(res, ApiError(500, "internal server error"));
  }
}

void Server::handle_completion(const HttpRequest& req, HttpResponse& res) {
  const double t0 = now_s();
  try {
    CompletionRequest cr = parse_completion_request(parse_body(req.body), model_.sampling);
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    const tok::Tokenizer& tok = *model_.tokenizer;
    std::vector<int32_t> ids = cr.prompt_ids;
    if (ids.empty()) {
      // Too long to fit whatever it encodes to: refused before encoding (megabytes of ids otherwise).
      if (const int64_t at_least = tok.min_tokens(cr.prompt_text.size()); at_least >= engine_.context_limit())
        chat::context_exceeded(engine_.context_limit(), at_least, "prompt", /*at_least=*/true);
      ids = tok.encode(cr.prompt_text, /*add_special_tokens=*/true);
      if (ids.empty()) bad_request("'prompt' has no tokens", "prompt");
    }
    for (int32_t id : ids)
      if (!tok.has_id(id)) bad_request("token id " + std::to_string(id) + " is not in the vocabulary", "prompt");
    const int64_t ctx = engine_.context_limit();
    GenRequest g = chat::make_gen_request(gen_limits(cr), ids, ctx, opts_.default_max_tokens, model_.tokenizer->vocab_size(),
                                          model_.eos_ids, "prompt");
    g.client = req.client;
    g.constraint = constraints_.make(output_structure(cr), nullptr, "auto", "", /*starts_in_reasoning=*/false, g.max_tokens);

    auto job = new_job(false, new_id("cmpl-"), model_, cr, opts_.stream_ping_ms, int64_t(ids.size()));
    const std::vector<std::string> stop = cr.stop;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids,
                                            [stop, &tok](int) { return chat::OutputStream(tok, stop, std::nullopt); });
    run_job(job, engine_, metrics_, g, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const chat::ChatError& e) {
    send_error(res, to_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/completions: %s\n", e.what());
    send_error(res, ApiError(500, "internal server error"));
  }
}

}  // namespace mmx::server
