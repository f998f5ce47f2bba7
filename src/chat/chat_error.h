// ChatError: a conversation the model cannot take as it is, thrown by src/chat (rendering, the
// reasoning switch, the context check, the engine request's limits). It carries what an HTTP edge
// needs to answer it — the field at fault and the kind of failure — without src/chat knowing HTTP:
// the server maps it to its ApiError (server/api_error.h, to_api_error), `mmx chat` prints it.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace mmx::chat {

class ChatError : public Error {
 public:
  enum class Kind {
    kInvalid,           // the conversation or a field is not acceptable as given
    kContextExceeded,   // the prompt leaves nothing of the context to generate
    kUnsupportedField,  // a field this model cannot honour
    kUnsupportedSchema, // a JSON Schema keyword outside the structured-output subset (constraints.h)
  };
  ChatError(Kind kind, const std::string& message, std::string param = "")
      : Error(message), kind_(kind), param_(std::move(param)) {}
  Kind kind() const { return kind_; }
  // The offending field as the OpenAI API names it ("messages", "chat_template_kwargs", ...), "" when none.
  const std::string& param() const { return param_; }

 private:
  Kind kind_;
  std::string param_;
};

// Shorthand: an invalid field.
[[noreturn]] inline void invalid(const std::string& message, const std::string& param = "") {
  throw ChatError(ChatError::Kind::kInvalid, message, param);
}

// A prompt that leaves nothing to generate; `n_prompt` says how many tokens it has ("312", or
// "at least 9000" when it was refused from its size before encoding).
[[noreturn]] inline void context_exceeded(int64_t context, const std::string& n_prompt, const std::string& param) {
  throw ChatError(ChatError::Kind::kContextExceeded,
                  "This model's maximum context length is " + std::to_string(context) + " tokens; the prompt has " +
                      n_prompt + " tokens (at least one token must be left to generate)",
                  param);
}

}  // namespace mmx::chat
