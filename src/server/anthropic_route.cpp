// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages API over the chat
// route's pipeline, symmetric to openai_route.cpp. The body becomes a ChatRequest
// (anthropic_request.h), then the same chat turn (chat::prepare_turn through
// Server::prepare_chat_turn: prompt, engine request, OutputParser per choice); the engine is
// driven by Generation; only the response shapes differ (anthropic_response.h).
#include "server/http.h"

#include <cstdint>
#include <cstdio>
#include <vector>

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

void send_anthropic_error(HttpResponse& res, const ApiError& e) { send_error(res, e, ErrorShape::kAnthropic); }

// A conversation src/chat refused, as Anthropic words it: a prompt over the context is
// "prompt is too long: N tokens > M maximum" (the text Claude Code parses to compact its context;
// M is the most a prompt may have, the context less the token left to generate).
ApiError anthropic_api_error(const chat::ChatError& e) {
  if (e.kind() == chat::ChatError::Kind::kContextExceeded)
    return ApiError(400, "prompt is too long: " + std::to_string(e.prompt_tokens) + " tokens > " +
                             std::to_string(e.max_prompt_tokens) + " maximum", e.param(), "context_length_exceeded");
  return to_api_error(e);
}

// The prompt of cr's conversation (with `messages` in place of its own when given), rendered as
// /v1/messages renders it but never refused for its length: count_tokens, and the size of what
// a context edit cleared.
int64_t prompt_tokens(const chat::ServedModel& m, ChatRequest cr, bool special_in_content, ojson messages = nullptr) {
  if (!messages.is_null()) cr.messages = std::move(messages);
  return int64_t(chat::build_chat_prompt(m, take_conversation(cr), 0, INT64_MAX, special_in_content).ids.size());
}

// One message being generated: what the stream has sent, and what the whole response needs.
struct MessageJob {
  std::string id, model;
  int64_t n_prompt = 0;
  int ping_ms = 1000;
  std::unique_ptr<Generation> gen;
  MessageEvents events;
  bool one_call = false;        // tool_choice.disable_parallel_tool_use: end after the first call
  json context_management;      // the response's, null when the request had none
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

  // With one_call, the update that completes the first tool call ends the message there: later
  // calls' pieces are dropped and the generation is cancelled.
  void limit_calls(Update& u) {
    if (!one_call || u.delta.tool_calls.empty()) return;
    u.delta.tool_calls.resize(1);
    // No call ended before this one, so it is the reply's call 0.
    std::erase_if(u.delta.tool_call_deltas, [](const chat::ToolCallDelta& p) { return p.index != 0; });
    gen->cancel_all();
    u.finished = true;
    u.finish_reason = "tool_calls";
    u.stop_string.clear();
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
      limit_calls(*u);
      std::string out = events.delta(u->delta);
      if (u->finished) {
        finished = true;
        out += events.finish(anthropic_stop_reason(u->finish_reason, u->stop_string), u->stop_string, usage(),
                             context_management);
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

void Server::handle_messages(const HttpRequest& req, HttpResponse& res) {
  const double t0 = now_s();
  try {
    MessagesRequest mr = parse_messages_request(parse_body(req.body), model_);
    ChatRequest& cr = mr.chat;
    if (!cr.has_seed) cr.sampling.seed = next_seed();
    check_model(cr.model);
    json context_management;
    if (mr.context_management) {
      int64_t cleared_tokens = 0;
      if (mr.cleared_thinking_turns > 0)
        cleared_tokens = prompt_tokens(model_, cr, opts_.special_in_content, std::move(mr.messages_before_edits)) -
                         prompt_tokens(model_, cr, opts_.special_in_content);
      context_management = anthropic_context_management(mr.cleared_thinking_turns, cleared_tokens);
    }
    chat::PreparedTurn t = prepare_chat_turn(cr);
    GenRequest& g = t.request;
    g.client = req.client;
    // tool_choice any / {tool, name} force a call exactly as the chat route's required / named one.
    g.constraint = constraints_.make(output_structure(cr), cr.tools, cr.tool_choice, cr.forced_tool, t.prompt.starts_in_reasoning,
                                     g.max_tokens, mr.thinking_budget);

    auto job = std::make_shared<MessageJob>();
    job->events = MessageEvents(mr.omit_thinking);
    job->one_call = mr.one_tool_call;
    job->context_management = std::move(context_management);
    job->id = new_id("msg_");
    job->model = model_.name;
    job->n_prompt = int64_t(t.prompt.ids.size());
    job->ping_ms = opts_.stream_ping_ms;
    job->gen = std::make_unique<Generation>(engine_, metrics_, t0, model_.eos_ids, t.make_stream);
    job->gen->submit(1, g);
    if (!cr.stream) {
      for (bool finished = false; !finished && !job->gen->done();) {
        Update u = job->gen->next();
        job->limit_calls(u);
        job->reasoning += u.delta.reasoning;
        job->text += u.delta.content;
        for (chat::ToolCall& c : u.delta.tool_calls) job->calls.push_back(std::move(c));
        if (u.finished) job->finish_reason = u.finish_reason, job->stop_string = u.stop_string, finished = job->one_call;
      }
      metrics_.count_tokens(job->n_prompt, job->gen->n_generated_total());
      send_json(res, 200,
                     anthropic_message(job->id, job->model, job->reasoning, job->text, job->calls,
                                       anthropic_stop_reason(job->finish_reason, job->stop_string), job->stop_string,
                                       job->usage(), mr.omit_thinking, job->context_management));
      return;
    }
    stream_job(res, job, metrics_);
  } catch (const ApiError& e) {
    send_anthropic_error(res, e);
  } catch (const chat::ChatError& e) {
    send_anthropic_error(res, anthropic_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/messages: %s\n", e.what());
    send_anthropic_error(res, ApiError(500, "internal server error"));
  }
}

void Server::handle_count_tokens(const HttpRequest& req, HttpResponse& res) {
  try {
    MessagesRequest mr = parse_messages_request(parse_body(req.body), model_, /*count_tokens=*/true);
    check_model(mr.chat.model);
    // The prompt as /v1/messages would render it, context edits and folded system messages
    // included (no reasoning dropped: that depends on the server's --drop-reasoning-over and the
    // context, and the count is of what was sent). A prompt over the context is counted too:
    // that is when a client needs the count to know how much to cut.
    send_json(res, 200, {{"input_tokens", prompt_tokens(model_, std::move(mr.chat), opts_.special_in_content)}});
  } catch (const ApiError& e) {
    send_anthropic_error(res, e);
  } catch (const chat::ChatError& e) {
    send_anthropic_error(res, anthropic_api_error(e));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mmx serve: internal error in /v1/messages/count_tokens: %s\n", e.what());
    send_anthropic_error(res, ApiError(500, "internal server error"));
  }
}

}  // namespace mmx::server
