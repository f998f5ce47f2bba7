// Incremental readers for the body of one tool-call block, one per wire format. Internal to
// mmx_chat: OutputParser calls them on the block text received so far, and each call reads
// the next *element* (an invoke's opening tag, one complete parameter, `</invoke>`, an M1 JSON
// line, or the block's end tag) from the front of that text.
//
// A reader decides only on complete evidence, never on where the text happens to end: an
// element whose closing tag has not arrived yet gives kWait (unless `final`), and kBad is
// given only when the text *already* cannot be the element expected there (stray text, a
// closing tag missing before the next structural tag, the block end or the end of output).
// So feeding the same text in any chunking yields the same sequence of steps.
//
// Which text closes what mirrors vLLM's regexes (docs/output-parsing.md): an M2 parameter
// value runs to the first `</parameter>`, an invoke to the first `</invoke>`, and nothing
// runs past the block's end tag.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value_typing.h"

namespace mmx::chat {

struct BlockStep {
  enum Kind {
    kWait,         // the next element is incomplete: feed more text
    kEnd,          // the block's end tag
    kEof,          // `final` and nothing but whitespace is left (no end tag)
    kInvokeOpen,   // M2/M3 `<invoke name="f">`: `name`
    kParam,        // one complete M2/M3 parameter: `name` = key, `value` typed from the schema
    kStringOpen,   // M2 `<parameter name="k">` / M3 `NS<k>` of a string-typed parameter: `name`
                   // = key; its value follows as text, read with read_m2_string / read_m3_string
    kInvokeClose,  // M2/M3 `</invoke>`
    kCall,         // one M1 JSON line: `name`, `value` = its "arguments" (any JSON)
    kSkip,         // M1: a line that is not a call (`name` = the line, stripped); the next one may be
    kBad,          // the text after `consumed` (leading whitespace) is not what may come here
  };
  Kind kind = kWait;
  size_t consumed = 0;  // bytes of the input this step used (leading whitespace included)
  std::string name;
  ojson value;
  bool null_literals = true;  // M2 kStringOpen: the words null/none/nil are null (m2_null_literals)
};

// Where a reader got to in the element at the front of the text while it waited (kWait), so that
// the next call resumes there instead of re-reading a long element from its start (which made a
// long M3 parameter fed token by token quadratic). Only a place to resume, never a decision; valid
// until a step consumes text (OutputParser resets it then).
struct ScanCache {
  size_t body_at = std::string_view::npos;  // where the element's body starts in the text
  size_t scanned = 0;                        // body bytes already scanned
  std::vector<std::string> open;             // M3 nested: the tags open inside the body so far
  void reset() {
    body_at = std::string_view::npos;
    scanned = 0;
    open.clear();
  }
};

struct BlockReadContext {
  std::string_view block_end;            // the format's block end tag
  bool in_invoke = false;                // M2/M3: after an invoke's opening tag
  const nlohmann::json* fn_params = nullptr;  // the open invoke's "parameters" schema, if known
  bool final = false;                    // no more text will come
  ScanCache* cache = nullptr;            // M3: where to resume (may be null: read from the start)
};

// M2: `\n<invoke name="f">\n<parameter name="k">v</parameter>\n...</invoke>\n...`
BlockStep read_m2_step(std::string_view text, const BlockReadContext& ctx);

// M3 (namespace token NS = "]<]minimax[>["):
//   `\nNS<invoke name="f">NS<k>v NS</k>NS<obj>NS<a>1NS</a>NS</obj>NS</invoke>\n...`
BlockStep read_m3_step(std::string_view text, const BlockReadContext& ctx);

// M2: whether a parameter of these schema types (m2_types_of) is typed as a string, so that its
// value can stream as it is written: the first type m2_convert would try is string/str/text.
bool m2_is_string_typed(const std::vector<std::string>& types);

// M2, inside a string parameter (after kStringOpen): the value runs to the first `</parameter>`,
// or, when the model never writes it, to the first `</invoke>`, block end or end of output.
struct StringStep {
  size_t n_value = 0;   // bytes at the front of the text that are value, decided so far
  bool ended = false;   // the value ends after them
  size_t consumed = 0;  // bytes used: the value, plus `</parameter>` when that ended it
};
StringStep read_m2_string(std::string_view text, std::string_view block_end, bool final);

// M3, inside the flat string parameter `name` (after kStringOpen): the value, verbatim, runs to
// the first namespace token NS (the model writes NS only as structure, never inside a value).
// `NS</name>` there closes it (consumed); `NS</invoke>` or the block end close it and are left;
// any other tag (`NS</wrong>`, `NS<k>`) ends the value too and is left for read_m3_step (a
// close tag without opener makes the block go wrong there; an opening tag is the next parameter).
StringStep read_m3_string(std::string_view text, std::string_view name, std::string_view block_end, bool final);

// What both do: the value runs to the first `own_close` (consumed with it), else to the first
// `invoke_end` or `block_end` (left in the text), else to the end of output (`final`); a tail
// that may begin one of the three is held back.
StringStep read_string_to(std::string_view text, std::string_view own_close, std::string_view invoke_end,
                          std::string_view block_end, bool final);

// Text-01 / M1: one `{"name": "f", "arguments": {...}}` JSON object per non-empty line; with
// `final` the last line needs no newline (vLLM also parses a block still open at the end). Each
// line is independent (vLLM): one that is not such an object is kSkip, and the next line is read.
BlockStep read_m1_step(std::string_view text, const BlockReadContext& ctx);

inline constexpr std::string_view kM3Namespace = "]<]minimax[>[";

// Shared by the readers: ASCII whitespace, and "`s` is a proper prefix of `token`".
inline bool block_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
inline bool proper_prefix_of(std::string_view s, std::string_view token) {
  return s.size() < token.size() && token.substr(0, s.size()) == s;
}

}  // namespace mmx::chat
