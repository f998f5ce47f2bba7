// POST /v1/responses: the OpenAI Responses API over the chat route's pipeline, symmetric to
// openai_route.cpp and anthropic_route.cpp. The body becomes a ChatRequest
// (responses_request.h), then the same chat turn (Server::prepare_chat_turn: prompt, engine
// request, OutputParser); the engine is driven by Generation; only the response shapes differ
// (responses_response.h). A response asked to be stored (`store`, the default) is kept in the
// server's ResponseStore for previous_response_id and item_reference.
#include "server/http.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "base/clock.h"
#include "chat/turn.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/responses_request.h"
#include "server/responses_response.h"
#include "server/send.h"
#include "server/server.h"

namespace mmx::server {

namespace {

// One response being generated.
struct ResponseJob {
  explicit ResponseJob(ResponseSetup s) : events(std::move(s)) {}
  ResponseEvents events;
  std::unique_ptr<Generation> gen;
  ResponseStore* store = nullptr;  // null: not kept (store: false)
  ojson conversation;              // the turn's items before this response's output
  int64_t n_prompt = 0, n_reasoning = 0;
  int ping_ms = 1000;
  bool parallel = true, seen_call = false, answering = false, reasoned = false;
  bool started = false, finished = false;

  ResponseUsage usage() const {
    ResponseUsage u;
    u.input = n_prompt;
    u.cached = gen->usage().empty() ? 0 : gen->usage()[0].n_cached;
    u.output = gen->n_generated_total();
    u.reasoning = n_reasoning;
    return u;
  }

  // One engine update -> its events. parallel_tool_calls false: the first whole call ends the
  // response (the rest of the generation is cancelled, later calls' pieces dropped).
  std::string apply(Update u) {
    chat::ParsedDelta& d = u.delta;
    if (!parallel) {
      d.tool_call_deltas.erase(std::remove_if(d.tool_call_deltas.begin(), d.tool_call_deltas.end(),
                                              [](const chat::ToolCallDelta& p) { return p.index > 0; }),
                               d.tool_call_deltas.end());
      if (!d.tool_calls.empty()) {
        d.tool_calls.resize(1);
        seen_call = true;
      }
    }
    // Reasoning tokens: those generated before the answer (text or a call) began.
    reasoned |= !d.reasoning.empty();
    if (!answering && (!d.content.empty() || !d.tool_call_deltas.empty())) answering = true;
    else if (!answering && reasoned) n_reasoning += int64_t(u.tokens.size());
    std::string out = events.delta(d);
    if (seen_call && !u.finished) {
      gen->cancel_all();
      u.finished = true;
      u.finish_reason = "tool_calls";
    }
    if (u.finished) {
      finished = true;
      out += events.finish(u.finish_reason, usage());
      if (store) {
        ojson items = conversation;
        for (const ojson& it : events.output()) items.push_back(it);
        store->put(events.response()["id"].get<std::string>(), std::move(items));
      }
    }
    return out;
  }

  std::string next_events() {
    if (!started) {
      started = true;
      return events.start();
    }
    try {
      std::optional<Update> u = gen->next_for(ping_ms);
      // Nothing for a while (long prefill): an SSE comment, which clients ignore, keeps the
      // connection checked so a vanished client is cancelled promptly.
      if (!u) return ": keep-alive\n\n";
      return apply(std::move(*u));
    } catch (const ApiError& e) {
      gen->cancel_all();  // an engine error mid-stream: reported in-band, and the stream ends
      finished = true;
      return events.fail(e);
    } catch (const std::exception&) {
      gen->cancel_all();
      finished = true;
      return events.fail(ApiError(500, "internal error while generating"));
    }
  }
};

ojson value_or(const ojson& echo, const char* key, ojson fallback) {
  return echo.contains(key) && !echo[key].is_null() ? echo[key] : fallback;
}

// The request fields the response object repeats, in OpenAI's order.
ojson response_fields(const ResponsesRequest& r) {
  const ojson& e = r.echo;
  ojson reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (e.contains("reasoning") && e["reasoning"].is_object())
    for (const auto& [k, v] : e["reasoning"].items()) reasoning[k] = v;
  ojson text = {{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
  if (e.contains("text") && e["text"].is_object())
    for (const auto& [k, v] : e["text"].items()) if (!v.is_null()) text[k] = v;
  ojson f = {{"instructions", value_or(e, "instructions", nullptr)},
             {"max_output_tokens", value_or(e, "max_output_tokens", nullptr)},
             {"max_tool_calls", nullptr},
             {"parallel_tool_calls", r.parallel_tool_calls},
             {"previous_response_id", r.previous_response_id.empty() ? ojson(nullptr) : ojson(r.previous_response_id)},
             {"prompt_cache_key", value_or(e, "prompt_cache_key", nullptr)},
             {"reasoning", reasoning},
             {"safety_identifier", value_or(e, "safety_identifier", nullptr)},
             {"service_tier", "default"},
             {"store", r.store},
             {"temperature", r.chat.sampling.temperature},
             {"text", text},
             {"tool_choice", value_or(e, "tool_choice", "auto")},
             {"tools", value_or(e, "tools", ojson::array())},
             {"top_logprobs", 0},
             {"top_p", r.chat.sampling.top_p},
             {"truncation", "disabled"},
             {"user", value_or(e, "user", nullptr)},
             {"metadata", value_or(e, "metadata", ojson::object())}};
  if (!r.ignored_tools.empty()) f["mmx_ignored_tools"] = r.ignored_tools;
  return f;
}

}  // namespace

void Server::handle_responses(const HttpRequest& req, HttpResponse& res) {
  const double t0 = now_s();
  try {
    ResponsesRequest rr = parse_responses_request(parse_body(req.body), model_, responses_);
    ChatRequest& cr = rr.chat;
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    ResponseSetup setup;
    setup.id = new_id("resp_");
    setup.model = model_.name;
    setup.created_at = int64_t(std::time(nullptr));
    setup.summary = rr.summary;
    setup.namespaced = rr.namespaced;
    setup.fields = response_fields(rr);
    chat::PreparedTurn t = prepare_chat_turn(cr);
    GenRequest& g = t.request;
    g.client = req.client;
    g.constraint = constraints_.make(output_structure(cr), cr.tools, cr.tool_choice, cr.forced_tool,
                                     t.prompt.starts_in_reasoning, g.max_tokens);

    auto job = std::make_shared<ResponseJob>(std::move(setup));
    job->n_prompt = int64_t(t.prompt.ids.size());
    job->ping_ms = opts_.stream_ping_ms;
    job->parallel = rr.parallel_tool_calls;
    if (rr.store) {
      job->store = &responses_;
      job->conversation = std::move(rr.conversation);
    }
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids, t.make_stream);
    job->gen->submit(1, g);
    if (!cr.stream) {
      while (!job->finished) job->apply(job->gen->next());
      metrics_.count_tokens(job->n_prompt, job->gen->n_generated_total());
      send_json(res, 200, job->events.response());
      return;
    }
    stream_job(res, job, metrics_);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const chat::ChatError& e) {
    send_error(res, to_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/responses: %s\n", e.what());
    send_error(res, ApiError(500, "internal server error"));
  }
}

}  // namespace mmx::server
