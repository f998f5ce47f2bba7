#include "server/api_error.h"

namespace mmx::server {

ErrorShape error_shape_for(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  constexpr std::string_view kMessages = "/v1/messages";
  if (path.substr(0, kMessages.size()) == kMessages && (path.size() == kMessages.size() || path[kMessages.size()] == '/'))
    return ErrorShape::kAnthropic;
  return ErrorShape::kOpenAI;
}

const char* anthropic_error_type(int status) {
  // Anthropic's table (https://docs.claude.com/en/api/errors, "HTTP errors"): 400
  // invalid_request_error ("also used for other 4XX status codes not listed"), 401
  // authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
  // rate_limit_error, 500 api_error, 529 overloaded_error. Ours beside it: 503 (this server
  // refusing work for now: too many connections or held bytes) is overloaded_error too, any
  // other 5xx api_error.
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json error_json(const ApiError& e, ErrorShape shape) {
  if (shape == ErrorShape::kAnthropic)
    return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.what()}}}};
  return e.to_json();
}

ApiError to_api_error(const chat::ChatError& e) {
  switch (e.kind()) {
    case chat::ChatError::Kind::kContextExceeded: return ApiError(400, e.what(), e.param(), "context_length_exceeded");
    case chat::ChatError::Kind::kUnsupportedField: return ApiError(400, e.what(), e.param(), "unsupported_field");
    case chat::ChatError::Kind::kUnsupportedSchema: return ApiError(400, e.what(), e.param(), "unsupported_schema");
    case chat::ChatError::Kind::kInvalid: break;
  }
  return ApiError(400, e.what(), e.param());
}

std::string error_body(const ApiError& e, ErrorShape shape) {
  return error_json(e, shape).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace mmx::server
