// How a route writes a JSON answer into an httplib::Response: the body (invalid UTF-8 replaced,
// never throws) and its status. Shared by server.cpp (the shared routes and the error handlers),
// openai_route.cpp and anthropic_route.cpp (its errors in Anthropic's shape).
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace mmx::server {

inline void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "application/json");
}

// An error in the shape of the API its request was for (api_error.h): OpenAI's from the OpenAI
// routes' own handlers, error_shape_for(req.path) from everything that serves any path.
inline void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape = ErrorShape::kOpenAI) {
  res.status = e.status;
  res.set_content(error_body(e, shape), "application/json");
}

}  // namespace mmx::server
