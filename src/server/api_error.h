// ApiError: a request failure the client should see, in the OpenAI error shape
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with its HTTP status. Thrown by parsing/validation and caught in the route handlers; any other
// exception becomes a 500 whose message leaks no internals.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

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

// Shorthand for the common case: a 400 naming the field.
[[noreturn]] inline void bad_request(const std::string& message, const std::string& param = "") {
  throw ApiError(400, message, param);
}

}  // namespace mmx::server
