// OpenAI chat messages -> the message shape the MiniMax-Text-01 / M1 chat template reads.
//
// The M1 template (data/chat_templates/minimax_m1.jinja, as MiniMax ships it) reads
// `content[0]['text']` for system and user turns, the `text` parts of an assistant turn, and
// `{name, text}` parts of a tool turn; it renders no `tool_calls` or `reasoning_content` field.
// OpenAI clients send string content, tool calls as fields and tool results as strings, so the
// server (format kM1, with such a template: template_reads_m1_messages) reshapes them first — what the model itself writes, so that the output
// parser (OutputFormat::kM1) reads a rendered turn back as the same message:
//   string content                -> [{"type": "text", "text": content}] (null -> "")
//   assistant reasoning_content R -> "<think>R</think>\n" before the text
//   assistant tool_calls          -> "<tool_calls>\n" + one {"name": f, "arguments": {...}} JSON
//                                    line per call + "\n</tool_calls>" after the text
//                                    (string arguments are parsed when they are a JSON object)
//   tool content                  -> [{"type": "text", "name": <the tool's name>, "text": content}]
//                                    (name from the message, else from the assistant tool call
//                                    whose id is tool_call_id, else "")
//   system / user content parts   -> one text part, the texts joined (the template reads only
//                                    content[0]['text']; a second part was dropped)
// An assistant's or a tool's content that is already a list of parts is kept; every other field
// is passed through.
// What it is not: a template (the M1 template still renders), nor a validator.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace mmx::chat {

// True when a chat template reads messages the M1 way: it indexes `['content'][0]['text']` (the
// Text-01 / M1 templates MiniMax ships). A Text-01 checkpoint served with another template (the
// models/ ones trained by `mmx train` carry the M2 template) keeps OpenAI-shaped messages.
bool template_reads_m1_messages(std::string_view template_source);

// messages: a JSON array of OpenAI chat messages; returns the reshaped copy (anything that is not
// an object is copied as it is).
nlohmann::ordered_json to_m1_messages(const nlohmann::ordered_json& messages);

}  // namespace mmx::chat
