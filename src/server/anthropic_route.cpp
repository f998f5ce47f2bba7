// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages API over the chat
// route's pipeline, symmetric to openai_route.cpp. The body becomes a ChatRequest
// (anthropic_request.h), then the same chat turn (chat::prepare_turn through
// Server::prepare_chat_turn: prompt, engine request, OutputParser per choice); the engine is
// driven by Generation; only the response shapes differ (anthropic_response.h).
#include <httplib.h>

#include <cstdio>

#include "base/clock.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "chat/prompt.h"
#include "chat/turn.h"
#include "server/generation.h"
#include "server/send.h"
#include "server/server.h"

namespace mmx::server {

namespace {

void send_anthropic_error(httplib::Response& res, const ApiError& e) { send_error(res, e, ErrorShape::kAnthropic); }

// One message being generated: what the stream has sent, and what the whole response needs.
struct MessageJob {
  std::string id, model;
  int64_t n_prompt = 0;
  int ping_ms = 1000;
  std::unique_ptr<Generation> gen;
  MessageEvents events;
  bool started = false, finished = false;
  // accumulated (non-streaming)
  std::string reasoning, text, finish_reason, stop_string;
  std::vector<chat::ToolCall> calls;

  MessageUsage usage() const {
    MessageUsage u;
    const int64_t cached = gen->usage().empty() ? 0 : gen->usage()[0].n_cached;
    u.input = n_prompt - cached;
    u.cache_read = cached;
    u.output = gen->n_generated_total();
    return u;
  }

  // The SSE text of one engine update (or a ping, or the end of the message).
  std::string next_events() {
    if (!started) {
      started = true;
      return events.start(id, model, n_prompt);
    }
    try {
      std::optional<Update> u = gen->next_for(ping_ms);
      if (!u) return anthropic_sse("ping", {{"type", "ping"}});
      std::string out = events.delta(u->delta);
      if (u->finished) {
        finished = true;
        out += events.finish(anthropic_stop_reason(u->finish_reason, u->stop_string), u->stop_string, usage());
      }
      return out;
    } catch (const ApiError& e) {
      gen->cancel_all();  // an engine error mid-stream: reported in-band, and the stream ends
      finished = true;
      return anthropic_sse("error", error_json(e, ErrorShape::kAnthropic));
    } catch (const std::exception&) {
      gen->cancel_all();
      finished = true;
      return anthropic_sse("error", error_json(ApiError(500, "internal error while generating"), ErrorShape::kAnthropic));
    }
  }
};

}  // namespace

void Server::handle_messages(const std::string& body, httplib::Response& res) {
  const double t0 = now_s();
  try {
    MessagesRequest mr = parse_messages_request(parse_body(body), model_);
    ChatRequest& cr = mr.chat;
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    chat::PreparedTurn t = prepare_chat_turn(cr);
    GenRequest& g = t.request;
    // tool_choice any / {tool, name} force a call exactly as the chat route's required / named one.
    g.constraint = constraints_.make(output_structure(cr), cr.tools, cr.tool_choice, cr.forced_tool, t.prompt.starts_in_reasoning,
                                     g.max_tokens, mr.thinking_budget);

    auto job = std::make_shared<MessageJob>();
    job->id = new_id("msg_");
    job->model = model_.name;
    job->n_prompt = int64_t(t.prompt.ids.size());
    job->ping_ms = opts_.stream_ping_ms;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids, t.make_stream);
    job->gen->submit(1, g);
    if (!cr.stream) {
      while (!job->gen->done()) {
        Update u = job->gen->next();
        job->reasoning += u.delta.reasoning;
        job->text += u.delta.content;
        for (chat::ToolCall& c : u.delta.tool_calls) job->calls.push_back(std::move(c));
        if (u.finished) job->finish_reason = u.finish_reason, job->stop_string = u.stop_string;
      }
      metrics_.count_tokens(job->n_prompt, job->gen->n_generated_total());
      send_json(res, 200,
                     anthropic_message(job->id, job->model, job->reasoning, job->text, job->calls,
                                       anthropic_stop_reason(job->finish_reason, job->stop_string), job->stop_string,
                                       job->usage()));
      return;
    }
    job->gen->wait_started();  // an engine refusal (429, ...) still gets its status code
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    ServerMetrics& metrics = metrics_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [job](size_t, httplib::DataSink& sink) {
          const std::string ev = job->next_events();
          if (!ev.empty() && !sink.write(ev.data(), ev.size())) return false;  // client gone
          if (job->finished) sink.done();
          return true;
        },
        [job, &metrics](bool) {
          job->gen->cancel_all();  // no-op when finished; cancels when the client went away
          metrics.count_tokens(job->n_prompt, job->gen->n_generated_total());
        });
  } catch (const ApiError& e) {
    send_anthropic_error(res, e);
  } catch (const chat::ChatError& e) {
    send_anthropic_error(res, to_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/messages: %s\n", e.what());
    send_anthropic_error(res, ApiError(500, "internal server error"));
  }
}

void Server::handle_count_tokens(const std::string& body, httplib::Response& res) {
  try {
    MessagesRequest mr = parse_messages_request(parse_body(body), model_, /*count_tokens=*/true);
    check_model(mr.chat.model);
    // The prompt as /v1/messages would render it (no reasoning dropped: that depends on the
    // server's --drop-reasoning-over and the context, and the count is of what was sent).
    const chat::ChatPrompt p =
        chat::build_chat_prompt(model_, take_conversation(mr.chat), 0, engine_.context_limit(), opts_.special_in_content);
    send_json(res, 200, {{"input_tokens", int64_t(p.ids.size())}});
  } catch (const ApiError& e) {
    send_anthropic_error(res, e);
  } catch (const chat::ChatError& e) {
    send_anthropic_error(res, to_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/messages/count_tokens: %s\n", e.what());
    send_anthropic_error(res, ApiError(500, "internal server error"));
  }
}

}  // namespace mmx::server
