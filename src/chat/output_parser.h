// MiniMax model-output parser: splits raw generated text into content, reasoning and OpenAI
// tool calls, one detokenized text delta at a time (docs/output-parsing.md has the formats).
//
// What it is: a small streaming state machine (reasoning -> content -> tool-call block) plus
// one block parser per wire format: M2 XML (`<minimax:tool_call><invoke name=..><parameter
// name=..>`), M3 namespaced tags (`]<]minimax[>[<tool_call>` with nested objects and `<item>`
// arrays), Text-01/M1 `<tool_calls>` JSON lines. Parameter values are typed from the request's
// OpenAI `tools` array the way vLLM's parsers do (see value_typing.h).
// What it is not: a tokenizer or detokenizer (feed it complete UTF-8 text), nor the SSE layer.
//
// Guarantees (tested in tests/chat):
//   * feeding a text whole, one byte at a time, or in any chunking gives the same concatenated
//     result (text that might be the start of a tag is held back until it is decided);
//   * malformed or truncated output never throws and never drops text: a tool-call block that
//     goes wrong before its first call opened is returned verbatim as content; one that goes
//     wrong later keeps the calls already streamed (the open one is closed) and returns the
//     rest of the block as content (docs/output-parsing.md, "Streaming tool calls");
//   * tool calls stream: a call's id and name as soon as its first element after the opening tag
//     parsed (an invoke cut off before any never shows: it is content), then one
//     arguments fragment per typed parameter as each closes (`{"k": v`, `, "k2": v2`, `}`) and a
//     string parameter's value as it is written (M2 and M3: `, "k3": "`, `Pa`, `ris"`; never a
//     UTF-8 character or JSON escape cut), and the whole ToolCall when it ends. M1 JSON lines come
//     as one piece per call.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmx::chat {

struct ToolCall {
  std::string id;              // "call_" + 24 hex digits, deterministic in (id_seed, index)
  std::string name;            // function name as the model wrote it (may be unknown to `tools`)
  std::string arguments_json;  // a JSON object, Python json.dumps style: {"k": "v", "n": 1}
};

// One streamed piece of a tool call (OpenAI's `delta.tool_calls[i]`). A call's first piece
// carries its id and name; concatenating the `arguments` of all pieces of one index gives
// exactly that call's ToolCall::arguments_json.
struct ToolCallDelta {
  size_t index = 0;       // the call's position in the whole output: 0, 1, 2, ...
  std::string id;         // first piece only
  std::string name;       // first piece only
  std::string arguments;  // the next fragment of the arguments JSON (may be empty)
};

struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;             // calls that ended in this delta, whole
  std::vector<ToolCallDelta> tool_call_deltas;  // the same calls as streamed pieces, as written

  bool empty() const {
    return content.empty() && reasoning.empty() && tool_calls.empty() && tool_call_deltas.empty();
  }
  // Appends `other` (content to content, reasoning to reasoning, calls to calls).
  void append(ParsedDelta other);
};

// The serving parser to mirror (vLLM names in parentheses).
enum class OutputFormat {
  kM2,             // M2 family (reasoning parser `minimax_m2`, tool parser `minimax_m2`)
  kM2AppendThink,  // M2 family (`minimax_m2_append_think`): no reasoning field, "<think>" + text
  kM3,             // M3 (`minimax_m3` reasoning + tool parsers)
  kM1,             // Text-01 / M1 (tool parser `minimax`, `<think>` reasoning)
};

// The markers a model of format f writes in its own output: reasoning open/close, tool-call
// block open/close (M3's carry its namespace prefix).
struct Tags {
  std::string think_start, think_end, block_start, block_end;
};
Tags tags_for(OutputFormat f);

// "minimax_m2", "minimax_m2_append_think", "minimax_m3", "minimax" / "minimax_m1";
// std::nullopt for anything else.
std::optional<OutputFormat> output_format_from_name(std::string_view name);

// Choices a server makes about odd model output (docs/api.md, "What the parsers do with odd model
// output").
struct ParserOptions {
  // A call to a function the request's `tools` do not list is dropped (vLLM and SGLang drop it
  // too): no piece, no ToolCall, no content; the next call gets the next index. true: it is
  // emitted like any other (`mmx serve --keep-unknown-tool-calls`). A request without tools has
  // nothing to check against: its calls are always emitted.
  bool keep_unknown_tool_calls = false;
};

class OutputParser {
 public:
  // tools: the request's OpenAI tools array ([{"type":"function","function":{"name":..,
  //   "parameters":{JSON schema}}}, ...]); anything else (null, malformed entries) is ignored.
  // starts_in_reasoning: the generation prompt already opened the reasoning block (M2 always
  //   prefills "<think>\n"; M3 with thinking_mode=enabled prefills "<mm:think>"). Ignored for
  //   kM2AppendThink, which never separates reasoning.
  // id_seed: seeds the tool-call ids (a chat turn passes its choice's: turn.h, TurnOptions::tool_call_id_seed).
  OutputParser(OutputFormat format, const nlohmann::json& tools, bool starts_in_reasoning,
               uint64_t id_seed = 0, ParserOptions options = {});
  ~OutputParser();
  OutputParser(OutputParser&&) noexcept;
  OutputParser& operator=(OutputParser&&) noexcept;

  // Consumes one text delta (any size, including empty); returns what is decided so far.
  ParsedDelta feed(std::string_view delta);
  // End of generation: releases held-back text, turns an open tool block into content.
  // Later feed()/finish() calls return nothing.
  ParsedDelta finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Whole text at once: feed(text) followed by finish().
ParsedDelta parse_full(OutputFormat format, std::string_view text, const nlohmann::json& tools,
                       bool starts_in_reasoning, uint64_t id_seed = 0, ParserOptions options = {});

}  // namespace mmx::chat
