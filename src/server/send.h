// How a route writes a JSON answer into an HttpResponse (http.h): the body (invalid UTF-8 replaced,
// never throws) and its status. Shared by server.cpp (the shared routes and the error handlers),
// openai_route.cpp, anthropic_route.cpp (its errors in Anthropic's shape) and responses_route.cpp.
#pragma once

#include "server/http.h"

#include <nlohmann/json.hpp>

#include <memory>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/metrics.h"

namespace mmx::server {

inline void send_json(HttpResponse& res, int status, const nlohmann::ordered_json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "application/json");
}

// An error in the shape of the API its request was for (api_error.h): OpenAI's from the OpenAI
// routes' own handlers, error_shape_for(req.path) from everything that serves any path.
inline void send_error(HttpResponse& res, const ApiError& e, ErrorShape shape = ErrorShape::kOpenAI) {
  res.status = e.status;
  res.set_content(error_body(e, shape), "application/json");
}

// Streams a generation job as SSE (the Anthropic and Responses routes). Job has next_events() (the
// text of the next update, a keep-alive, or the last events), `finished`, `gen` (a Generation
// already submitted) and `n_prompt`. The 200 goes out only after the engine took every choice, so
// a refusal (429, ...) still gets its status; a client that goes away cancels the generation.
template <class Job>
void stream_job(HttpResponse& res, std::shared_ptr<Job> job, ServerMetrics& metrics) {
  job->gen->wait_started();
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](StreamSink& sink) {
        const std::string ev = job->next_events();
        if (!ev.empty() && !sink.write(ev.data(), ev.size())) return false;  // client gone
        if (job->finished) sink.done();
        return true;
      },
      [job, &metrics](bool) {
        job->gen->cancel_all();  // no-op when finished; cancels when the client went away
        metrics.count_tokens(job->n_prompt, job->gen->n_generated_total());
      });
}

}  // namespace mmx::server
