// OpenAI chat messages -> the shape every MiniMax chat template renders without losing a word
// (build_chat_prompt, prompt.h, calls it before rendering; docs/api.md, "Chat completions").
//
// Roles. The templates read one system prompt, the first message: M2 only a `system` one (a
// leading `developer` rendered nothing), M3 a `system` or `developer` one, Text-01/M1 every
// `system` message concatenated at the top (and no `developer`); a system or developer message
// anywhere else was rendered by none of them. So:
//   * a leading `developer` message becomes the `system` one (same text);
//   * every later `system` / `developer` message (the second of two leading ones included) is
//     folded into the message after it when that one is a `user` message: the user content becomes
//     SYSTEM_TEXT + "\n\n" + USER_TEXT (several such messages in a row: their texts joined by
//     "\n\n", in order); when the next message is not a user message (or there is none), it
//     becomes a `user` message of its own, at its place, with its text.
//   Either way the text keeps its place in the conversation, and a conversation that grows at its
//   end renders as a prefix of what it renders next (the prefix cache keeps working).
//
// Tool-call arguments (assistant tool_calls[j].function.arguments): a JSON object, or a string
// holding one (parsed into the object: the templates iterate it); "" (or only whitespace), null and
// absent are {} (clients send "" for a call without parameters). Anything else — a string that is
// not JSON, or JSON that is not an object ("null", "[1]", "3") — is ChatError kInvalid naming
// messages[i].tool_calls[j].function.arguments (the template would fail on it with a message of
// its own, or render it wrongly).
//
// What it is not: the request validator (server/request.cpp checks types and content parts first).
#pragma once

#include <nlohmann/json.hpp>

namespace mmx::chat {

// messages: the OpenAI messages array (content null -> "" is the caller's). Returns the copy the
// template renders. Throws ChatError (chat_error.h) for arguments it cannot read, naming "messages".
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

}  // namespace mmx::chat
