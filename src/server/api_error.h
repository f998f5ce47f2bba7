// ApiError: a request failure the client should see, with its HTTP status. Thrown by
// parsing/validation and caught in the route handlers; any other exception becomes a 500 whose
// message leaks no internals. Its body has the shape of the API the request was for, decided in
// one place (error_shape_for, by path; error_json writes it):
//   OpenAI     {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
//   Anthropic  {"type": "error", "error": {"type": "not_found_error" | ..., "message": ...}}
//              (/v1/messages and every path under it, whoever refuses the request: the front's
//              401/408/413/431, the router's 404/405, a body that cannot be read, the route itself)
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "chat/chat_error.h"

namespace mmx::server {

struct ApiError : std::runtime_error {
  int status;         // 400, 401, 404, 413, 429, 500
  std::string type;   // "invalid_request_error", "authentication_error", ...
  std::string param;  // the offending request field, "" when none
  std::string code;   // machine-readable code, "" when none

  ApiError(int status_, std::string message, std::string param_ = "", std::string code_ = "")
      : std::runtime_error(std::move(message)), status(status_), type(type_for(status_)),
        param(std::move(param_)), code(std::move(code_)) {}

  nlohmann::json to_json() const {
    return {{"error",
             {{"message", what()},
              {"type", type},
              {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
              {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
  }

  static std::string type_for(int status) {
    switch (status) {
      case 401: return "authentication_error";
      case 404: return "not_found_error";
      case 429: return "rate_limit_error";
      case 500: return "internal_server_error";
      default: return "invalid_request_error";
    }
  }
};

enum class ErrorShape { kOpenAI, kAnthropic };

// The shape for a request target ("/v1/messages?beta=true"): Anthropic's for /v1/messages and
// any path under it, OpenAI's for everything else (and for "" when the path is not known yet).
ErrorShape error_shape_for(std::string_view target);

// Anthropic's error type for an HTTP status ("authentication_error" for 401, ...).
const char* anthropic_error_type(int status);

// The error body in `shape`; error_body is its text (invalid UTF-8 replaced, never throws).
nlohmann::ordered_json error_json(const ApiError& e, ErrorShape shape);
std::string error_body(const ApiError& e, ErrorShape shape);

// Shorthand for the common case: a 400 naming the field.
[[noreturn]] inline void bad_request(const std::string& message, const std::string& param = "") {
  throw ApiError(400, message, param);
}

// A conversation src/chat refused (chat/chat_error.h) -> the 400 the client sees: its message,
// its param, and the code of its kind (context_length_exceeded, unsupported_field, unsupported_schema;
// none for kInvalid).
ApiError to_api_error(const chat::ChatError& e);

}  // namespace mmx::server
