// Parsers for the body of one tool-call block, one per wire format. Internal to mmx_chat.
//
// Each takes the text between the block's start and end tags and returns the calls, or
// std::nullopt when the body does not parse *cleanly*: anything other than whitespace outside
// the recognised structure (a missing </invoke>, stray text between invokes, a bad JSON line)
// rejects the whole block, and the caller then returns the block verbatim as content. This is
// stricter than vLLM (which keeps the good invokes and silently drops the rest) so that no
// model text is ever lost; docs/output-parsing.md lists the differences.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value_typing.h"

namespace mmx::chat {

struct RawCall {
  std::string name;
  std::string arguments_json;
};

// M2: `\n<invoke name="f">\n<parameter name="k">v</parameter>\n...</invoke>\n...`
std::optional<std::vector<RawCall>> parse_m2_block(std::string_view body, const ToolIndex& tools);

// M3 (namespace token NS = "]<]minimax[>["):
//   `\nNS<invoke name="f">NS<k>v NS</k>NS<obj>NS<a>1NS</a>NS</obj>NS</invoke>\n...`
std::optional<std::vector<RawCall>> parse_m3_block(std::string_view body, const ToolIndex& tools);

// Text-01 / M1: one `{"name": "f", "arguments": {...}}` JSON object per non-empty line.
std::optional<std::vector<RawCall>> parse_m1_block(std::string_view body);

inline constexpr std::string_view kM3Namespace = "]<]minimax[>[";

}  // namespace mmx::chat
