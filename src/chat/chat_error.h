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
  // kContextExceeded: the prompt's tokens (a lower bound when refused from its size) and the
  // most a prompt may have (the context less the one token left to generate); 0 otherwise.
  int64_t prompt_tokens = 0, max_prompt_tokens = 0;
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

// A prompt that leaves nothing to generate: it has n_prompt tokens ("at least" n_prompt when it
// was refused from its size before encoding).
[[noreturn]] inline void context_exceeded(int64_t context, int64_t n_prompt, const std::string& param,
                                          bool at_least = false) {
  ChatError e(ChatError::Kind::kContextExceeded,
              "This model's maximum context length is " + std::to_string(context) + " tokens; the prompt has " +
                  (at_least ? "at least " : "") + std::to_string(n_prompt) +
                  " tokens (at least one token must be left to generate)",
              param);
  e.prompt_tokens = n_prompt;
  e.max_prompt_tokens = context - 1;
  throw e;
}

}  // namespace mmx::chat
