// Streaming state machine of the MiniMax output parser (output_parser.h).
//
//   kReasoning --think_end--> kContent --block_start--> kToolBlock --block_end--> kContent
//                             kContent --think_start (once)--> kReasoning
//                                          kToolBlock --malformed--> kBadBlock --block_end--> kContent
//   (M2: a `</think>` in the content is dropped, as vLLM's minimax_m2 reasoning parser does.)
//
// In kToolBlock the format's reader (tool_blocks.h) takes one element at a time off the front
// of the buffer and each becomes a streamed tool-call piece; kBadBlock passes the rest of a
// block that went wrong through as content.
//
// Every decision depends only on the text, never on where a delta ends: a suffix of the buffer
// that is a proper prefix of a tag the current mode watches is held back until more text (or
// finish()) decides it. That is what makes whole / per-byte / random chunking agree.
//
// Whitespace policy (the only text that is ever dropped, all of it tag syntax in the templates,
// besides the calls to unknown tools that ParserOptions drops and M2's repeated `</think>`):
//   * the "\n\n" separator after the reasoning end tag (leading CR/LF of the content), and the
//     newlines right after an explicit reasoning start tag;
//   * trailing whitespace of the reasoning (the template's "\n" before </think>);
//   * whitespace-only content that directly precedes or follows a parsed tool-call block.
#include "chat/output_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "chat/tool_blocks.h"

namespace mmx::chat {

void ParsedDelta::append(ParsedDelta other) {
  content += other.content;
  reasoning += other.reasoning;
  for (auto& c : other.tool_calls) tool_calls.push_back(std::move(c));
  for (auto& c : other.tool_call_deltas) tool_call_deltas.push_back(std::move(c));
}

std::optional<OutputFormat> output_format_from_name(std::string_view name) {
  if (name == "minimax_m2") return OutputFormat::kM2;
  if (name == "minimax_m2_append_think") return OutputFormat::kM2AppendThink;
  if (name == "minimax_m3") return OutputFormat::kM3;
  if (name == "minimax" || name == "minimax_m1") return OutputFormat::kM1;
  return std::nullopt;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

Tags tags_for(OutputFormat f) {
  switch (f) {
    case OutputFormat::kM3:
      return {"<mm:think>", "</mm:think>", std::string(kM3Namespace) + "<tool_call>",
              std::string(kM3Namespace) + "</tool_call>"};
    case OutputFormat::kM1:
      return {"<think>", "</think>", "<tool_calls>", "</tool_calls>"};
    default:
      return {"<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"};
  }
}

namespace {

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  size_t max_k = std::min(s.size(), tag.size() - 1);
  for (size_t k = max_k; k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

struct OutputParser::State {
  enum class Mode { kReasoning, kContent, kToolBlock, kBadBlock };

  OutputFormat format;
  Tags tags;
  ToolIndex tools;
  uint64_t id_seed;
  ParserOptions opts;
  size_t n_calls = 0;

  Mode mode;
  std::string buf;                  // text not yet decided
  bool at_output_start = true;      // kContent and nothing consumed: a stray think_end is dropped
  bool at_reasoning_start = false;  // kReasoning and nothing consumed: a repeated think_start too
  bool had_reasoning = false;       // think_start opens reasoning at most once
  bool strip_leading_nl = false;    // just left the reasoning: drop the separator newlines
  bool strip_reasoning_nl = false;  // just read an explicit reasoning start tag: drop its newlines
  std::string pending_content_ws;   // trailing whitespace of the content, not yet released
  bool ws_after_tool = false;       // ... and it follows a parsed tool-call block
  std::string pending_reasoning_ws;
  // kToolBlock: the block being read.
  std::string block_raw;     // its text consumed while no call has started (for a verbatim fallback)
  bool block_has_call = false;
  bool in_call = false;      // a call is open (M2/M3: after its invoke tag)
  ToolCall call;             // the open call, arguments so far
  const nlohmann::json* call_params = nullptr;  // its "parameters" schema, if the tool is known
  // The open call's first piece (id, name) waits for its first element (a complete parameter, a
  // string value's start, `</invoke>`, the block end): an invoke cut off before it is not a call,
  // and its text (call_raw) is content. drop_call: a call to an unknown tool, read and dropped.
  bool header_pending = false;
  bool drop_call = false;
  std::string call_raw;
  std::vector<std::string> skipped_lines;  // M1: lines that are not calls, before the block's first call
  ScanCache scan;  // the block reader's place in an element it waits for (tool_blocks.h)
  // String parameter streaming (after kStringOpen), see string_text().
  bool in_string = false;
  bool string_verbatim = false;  // M3: the value is the text as written (M2: stripped, null literals)
  bool string_null_literals = true;  // M2: the words null/none/nil are null (m2_null_literals)
  std::string string_name;       // M3: the parameter, whose closing tag ends the value
  bool string_started = false;   // its opening quote was sent
  std::string string_held;       // before: the value so far (left-stripped); after: a held tail
  // kBadBlock: whether the block's end tag is content too (no call had started).
  bool bad_block_keeps_end = false;
  bool prefix_sent = false;  // kM2AppendThink: "<think>" emitted
  bool finished = false;

  State(OutputFormat f, const nlohmann::json& tools_json, bool starts_in_reasoning, uint64_t seed, ParserOptions o)
      : format(f), tags(tags_for(f)), tools(tools_json), id_seed(seed), opts(o) {
    bool reasoning = starts_in_reasoning && f != OutputFormat::kM2AppendThink;
    mode = reasoning ? Mode::kReasoning : Mode::kContent;
    at_reasoning_start = reasoning;
    at_output_start = !reasoning;
    had_reasoning = reasoning;
  }

  bool separates_reasoning() const { return format != OutputFormat::kM2AppendThink; }

  void emit_reasoning(std::string_view s, ParsedDelta& out) {
    if (strip_reasoning_nl) {
      while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
      if (s.empty()) return;
      strip_reasoning_nl = false;
    }
    if (s.empty()) return;
    size_t last = s.size();
    while (last > 0 && is_space(s[last - 1])) --last;
    if (last == 0) {
      pending_reasoning_ws += s;
      return;
    }
    out.reasoning += pending_reasoning_ws;
    pending_reasoning_ws.clear();
    out.reasoning += s.substr(0, last);
    pending_reasoning_ws = std::string(s.substr(last));
  }

  void emit_content(std::string_view s, ParsedDelta& out) {
    if (strip_leading_nl) {
      while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
      if (s.empty()) return;
      strip_leading_nl = false;
    }
    if (s.empty()) return;
    size_t last = s.size();
    while (last > 0 && is_space(s[last - 1])) --last;
    if (last == 0) {
      pending_content_ws += s;
      return;
    }
    out.content += pending_content_ws;
    pending_content_ws.clear();
    ws_after_tool = false;
    out.content += s.substr(0, last);
    pending_content_ws = std::string(s.substr(last));
  }

  void end_reasoning() {
    pending_reasoning_ws.clear();
    strip_leading_nl = true;
    had_reasoning = true;
    mode = Mode::kContent;
  }

  std::string next_id() {
    uint64_t a = splitmix64(id_seed ^ splitmix64(n_calls * 2 + 1));
    uint64_t b = splitmix64(a);
    char hex[33];
    std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    ++n_calls;
    return "call_" + std::string(hex, 24);
  }

  BlockStep read_step(bool final) {
    BlockReadContext ctx{tags.block_end, in_call, call_params, final, &scan};
    switch (format) {
      case OutputFormat::kM3:
        return read_m3_step(buf, ctx);
      case OutputFormat::kM1:
        return read_m1_step(buf, ctx);
      default:
        return read_m2_step(buf, ctx);
    }
  }

  // The block has a parsed call: what was held for a verbatim fallback goes.
  void mark_block_has_call(ParsedDelta& out) {
    if (block_has_call) return;
    block_has_call = true;
    block_raw.clear();
    pending_content_ws.clear();  // whitespace before a parsed block is dropped
    for (const std::string& line : skipped_lines) emit_content(line + "\n", out);  // M1 (kSkip)
    skipped_lines.clear();
  }

  // `raw`: the opening tag's text, content again if the call is cut off before its first element.
  void start_call(std::string name, std::string raw) {
    call = ToolCall{"", std::move(name), ""};
    call_params = tools.parameters(call.name);
    in_call = true;
    drop_call = !opts.keep_unknown_tool_calls && !tools.empty() && call_params == nullptr;
    header_pending = !drop_call;
    call_raw = std::move(raw);
  }

  void send_header(ParsedDelta& out) {
    if (!header_pending) return;
    header_pending = false;
    call_raw.clear();
    mark_block_has_call(out);
    call.id = next_id();
    out.tool_call_deltas.push_back({n_calls - 1, call.id, call.name, ""});
  }

  void reset_call() {
    call = ToolCall{};
    call_params = nullptr;
    in_call = header_pending = drop_call = false;
    call_raw.clear();
  }

  // Adds to the open call's arguments; merged into this delta's piece of the call if it has one.
  void append_fragment(std::string fragment, ParsedDelta& out) {
    if (drop_call) return;
    send_header(out);
    call.arguments_json += fragment;
    const size_t index = n_calls - 1;
    if (out.tool_call_deltas.empty() || out.tool_call_deltas.back().index != index)
      out.tool_call_deltas.push_back({index, "", "", ""});
    out.tool_call_deltas.back().arguments += fragment;
  }

  void end_call(ParsedDelta& out) {
    if (!in_call) return;
    if (drop_call) {
      mark_block_has_call(out);  // a dropped call is tool syntax, not content
    } else {
      append_fragment(call.arguments_json.empty() ? "{}" : "}", out);
      out.tool_calls.push_back(std::move(call));
    }
    reset_call();
  }

  // The open call was cut off before its first element: it never showed, and its text is content
  // (with the rest of the block; before the block's first call, the whole block is).
  void abandon_call(ParsedDelta& out) {
    if (!in_call || !header_pending) return;
    if (block_has_call) emit_content(call_raw, out);
    reset_call();
  }

  // ---- a string parameter's value, streamed as it is written ----
  // M2: the value is whitespace-stripped and the literal null/none/nil (any case) is null
  // (m2_convert): nothing is sent until the value cannot be such a literal any more, and trailing
  // whitespace (and an incomplete UTF-8 character) is held until something follows it.
  // M3 (string_verbatim): the value is the text as written; the opening quote goes out with the
  // key, and only an incomplete UTF-8 character is held. Each piece is escaped whole, so an
  // escape is never split.

  static std::string escape(std::string_view s) {  // the JSON string body, without quotes
    std::string q = dump_py(ojson(std::string(s)));
    return q.substr(1, q.size() - 2);
  }
  static size_t incomplete_utf8_tail(std::string_view s) {
    for (size_t k = 1; k <= std::min<size_t>(4, s.size()); ++k) {
      const unsigned char c = static_cast<unsigned char>(s[s.size() - k]);
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return k < need ? k : 0;
    }
    return 0;
  }
  static bool maybe_null_literal(std::string_view v) {
    std::string low(v);
    for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view lit : {"null", "none", "nil"})
      if (low.size() <= lit.size() && lit.substr(0, low.size()) == low) return true;
    return false;
  }
  static std::string_view rstrip(std::string_view v) {
    while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
    return v;
  }
  // Sends s but a tail that may still change meaning: an incomplete character, trailing whitespace.
  void release_string(std::string s, ParsedDelta& out) {
    size_t hold = incomplete_utf8_tail(s);
    if (hold == 0 && !string_verbatim) hold = s.size() - rstrip(s).size();
    if (hold < s.size()) append_fragment(escape(std::string_view(s).substr(0, s.size() - hold)), out);
    string_held = s.substr(s.size() - hold);
  }
  void string_text(std::string_view t, ParsedDelta& out) {
    if (t.empty()) return;
    if (string_started) {
      std::string s = std::move(string_held);
      release_string(s.append(t), out);
      return;
    }
    if (string_held.empty())
      while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
    string_held += t;
    const std::string_view v = rstrip(string_held);
    if (v.empty() || (string_null_literals && maybe_null_literal(v))) return;
    string_started = true;
    append_fragment("\"", out);
    release_string(std::move(string_held), out);
  }
  void end_string(ParsedDelta& out) {
    if (string_verbatim) {
      append_fragment(escape(string_held) + "\"", out);  // (a held incomplete character: U+FFFD)
    } else if (!string_started) {
      append_fragment(dump_py(m2_convert(std::string(rstrip(string_held)), {"string"}, string_null_literals)), out);
    } else {
      if (!rstrip(string_held).empty()) append_fragment(escape(string_held), out);  // an incomplete character
      append_fragment("\"", out);
    }
    in_string = string_started = string_verbatim = false;
    string_null_literals = true;
    string_held.clear();
    string_name.clear();
  }

  // The block went wrong at buf[skip..]: fall back as docs/output-parsing.md says.
  void fail_block(size_t skip, ParsedDelta& out) {
    const bool abandoned = in_call && header_pending;
    abandon_call(out);
    if (abandoned && block_has_call) {  // the cut call's text and what follows are content
      bad_block_keeps_end = false;
      mode = Mode::kBadBlock;
      return;
    }
    if (block_has_call) {
      end_call(out);
      buf.erase(0, skip);  // whitespace next to the calls is syntax
      bad_block_keeps_end = false;
    } else {  // (a dropped call's text included: it went wrong, so it was no call after all)
      reset_call();
      skipped_lines.clear();
      emit_content(tags.block_start + block_raw, out);
      block_raw.clear();
      bad_block_keeps_end = true;
    }
    mode = Mode::kBadBlock;
  }

  // The block closed (`with_end`: by its end tag; else by the end of output) after `consumed`.
  void close_block(size_t consumed, bool with_end, ParsedDelta& out) {
    if (with_end) {
      end_call(out);  // an invoke still open at the block end is closed by it
    } else {
      abandon_call(out);  // the end of output: an invoke that showed nothing is not a call
      end_call(out);
    }
    skipped_lines.clear();  // (no call: they are in block_raw)
    if (block_has_call) {
      ws_after_tool = true;
    } else {
      std::string raw = tags.block_start + block_raw + buf.substr(0, consumed);
      emit_content(raw, out);
    }
    buf.erase(0, consumed);
    block_raw.clear();
    mode = Mode::kContent;
  }

  // Decides as much of `buf` as possible; with `final`, decides all of it.
  void process(bool final, ParsedDelta& out) {
    for (;;) {
      if (mode == Mode::kReasoning) {
        const std::string& start = tags.think_start;
        if (at_reasoning_start) {
          if (!final && buf.size() < start.size() && start.compare(0, buf.size(), buf) == 0) return;
          if (buf.compare(0, start.size(), start) == 0) {
            buf.erase(0, start.size());
            strip_reasoning_nl = true;
          }
          at_reasoning_start = false;
        }
        size_t pos = buf.find(tags.think_end);
        if (pos != std::string::npos) {
          emit_reasoning(std::string_view(buf).substr(0, pos), out);
          buf.erase(0, pos + tags.think_end.size());
          end_reasoning();
          continue;
        }
        size_t keep = final ? 0 : partial_suffix(buf, tags.think_end);
        emit_reasoning(std::string_view(buf).substr(0, buf.size() - keep), out);
        buf.erase(0, buf.size() - keep);
        if (final) pending_reasoning_ws.clear();
        return;
      }

      if (mode == Mode::kContent) {
        if (at_output_start && separates_reasoning()) {
          const std::string& end = tags.think_end;
          if (!final && buf.size() < end.size() && end.compare(0, buf.size(), buf) == 0) return;
          if (buf.compare(0, end.size(), end) == 0) {
            buf.erase(0, end.size());
            strip_leading_nl = true;
            had_reasoning = true;
          }
        }
        at_output_start = false;
        bool watch_think = separates_reasoning() && !had_reasoning;
        // vLLM's minimax_m2 reasoning parser strips every later `</think>` from the content.
        const bool drop_think_end = format == OutputFormat::kM2;
        size_t pos_block = buf.find(tags.block_start);
        size_t pos_think = watch_think ? buf.find(tags.think_start) : std::string::npos;
        size_t pos_end = drop_think_end ? buf.find(tags.think_end) : std::string::npos;
        if (pos_end < std::min(pos_block, pos_think)) {
          // handled below, after the earlier markers
        } else if (pos_block != std::string::npos || pos_think != std::string::npos) {
          bool is_block = pos_block <= pos_think;  // npos is the largest value
          size_t pos = is_block ? pos_block : pos_think;
          emit_content(std::string_view(buf).substr(0, pos), out);
          if (is_block) {
            buf.erase(0, pos + tags.block_start.size());
            mode = Mode::kToolBlock;
            block_raw.clear();
            block_has_call = false;
          } else {
            buf.erase(0, pos + tags.think_start.size());
            mode = Mode::kReasoning;
            had_reasoning = true;
            strip_reasoning_nl = true;
          }
          continue;
        }
        if (pos_end != std::string::npos) {  // M2: a repeated reasoning end tag is dropped
          emit_content(std::string_view(buf).substr(0, pos_end), out);
          buf.erase(0, pos_end + tags.think_end.size());
          continue;
        }
        size_t keep = 0;
        if (!final) {
          keep = partial_suffix(buf, tags.block_start);
          if (watch_think) keep = std::max(keep, partial_suffix(buf, tags.think_start));
          if (drop_think_end) keep = std::max(keep, partial_suffix(buf, tags.think_end));
        }
        emit_content(std::string_view(buf).substr(0, buf.size() - keep), out);
        buf.erase(0, buf.size() - keep);
        return;
      }

      if (mode == Mode::kBadBlock) {
        size_t pos = buf.find(tags.block_end);
        if (pos != std::string::npos) {
          emit_content(std::string_view(buf).substr(0, pos), out);
          if (bad_block_keeps_end) {
            emit_content(tags.block_end, out);
          } else {  // the end tag closes a block that had calls: whitespace next to it is syntax
            pending_content_ws.clear();
            ws_after_tool = true;
          }
          buf.erase(0, pos + tags.block_end.size());
          mode = Mode::kContent;
          continue;
        }
        size_t keep = final ? 0 : partial_suffix(buf, tags.block_end);
        emit_content(std::string_view(buf).substr(0, buf.size() - keep), out);
        buf.erase(0, buf.size() - keep);
        if (final) mode = Mode::kContent;
        return;
      }

      // Mode::kToolBlock: buf holds the rest of the block body (the start tag is consumed).
      if (in_string) {
        const StringStep ss = string_verbatim ? read_m3_string(buf, string_name, tags.block_end, final)
                                              : read_m2_string(buf, tags.block_end, final);
        string_text(std::string_view(buf).substr(0, ss.n_value), out);
        buf.erase(0, ss.consumed);
        if (!ss.ended) return;
        end_string(out);
        continue;
      }
      BlockStep st = read_step(final);
      if (st.kind != BlockStep::kWait) scan.reset();  // text is consumed: the place is stale
      switch (st.kind) {
        case BlockStep::kWait:
          return;
        case BlockStep::kBad:
          fail_block(st.consumed, out);
          continue;
        case BlockStep::kEnd:
          close_block(st.consumed, /*with_end=*/true, out);
          continue;
        case BlockStep::kEof:
          close_block(st.consumed, /*with_end=*/false, out);
          continue;
        default:
          break;
      }
      std::string raw = buf.substr(0, st.consumed);
      if (!block_has_call) block_raw += raw;
      if (header_pending) call_raw += raw;
      buf.erase(0, st.consumed);
      switch (st.kind) {
        case BlockStep::kInvokeOpen:
          start_call(std::move(st.name), std::move(raw));
          break;
        case BlockStep::kSkip:  // M1: not a call; content (held for the verbatim block before a call)
          if (block_has_call)
            emit_content(st.name + "\n", out);
          else
            skipped_lines.push_back(std::move(st.name));
          break;
        case BlockStep::kParam: {
          std::string piece = call.arguments_json.empty() ? "{" : ", ";
          piece += dump_py(ojson(st.name));
          piece += ": ";
          piece += dump_py(st.value);
          append_fragment(std::move(piece), out);
          break;
        }
        case BlockStep::kStringOpen: {
          std::string piece = call.arguments_json.empty() ? "{" : ", ";
          piece += dump_py(ojson(st.name));
          piece += ": ";
          in_string = true;
          string_null_literals = st.null_literals;
          if (format == OutputFormat::kM3) {  // verbatim: the value has begun
            string_verbatim = string_started = true;
            string_name = std::move(st.name);
            piece += "\"";
          }
          append_fragment(std::move(piece), out);
          break;
        }
        case BlockStep::kInvokeClose:
          end_call(out);
          break;
        case BlockStep::kCall:  // M1: a whole call in one piece
          start_call(std::move(st.name), "");
          if (!drop_call) {
            append_fragment(dump_py(st.value), out);
            out.tool_calls.push_back(std::move(call));
          } else {
            mark_block_has_call(out);
          }
          reset_call();
          break;
        default:
          break;
      }
    }
  }
};

OutputParser::OutputParser(OutputFormat format, const nlohmann::json& tools,
                           bool starts_in_reasoning, uint64_t id_seed, ParserOptions options)
    : s_(std::make_unique<State>(format, tools, starts_in_reasoning, id_seed, options)) {}

OutputParser::~OutputParser() = default;
OutputParser::OutputParser(OutputParser&&) noexcept = default;
OutputParser& OutputParser::operator=(OutputParser&&) noexcept = default;

ParsedDelta OutputParser::feed(std::string_view delta) {
  ParsedDelta out;
  if (s_->finished) return out;
  if (s_->format == OutputFormat::kM2AppendThink && !s_->prefix_sent) {
    s_->prefix_sent = true;
    s_->emit_content("<think>", out);
  }
  s_->buf += delta;
  s_->process(/*final=*/false, out);
  return out;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta out;
  if (s_->finished) return out;
  if (s_->format == OutputFormat::kM2AppendThink && !s_->prefix_sent) {
    s_->prefix_sent = true;
    s_->emit_content("<think>", out);
  }
  s_->process(/*final=*/true, out);
  if (!s_->ws_after_tool) out.content += s_->pending_content_ws;
  s_->pending_content_ws.clear();
  s_->pending_reasoning_ws.clear();
  s_->finished = true;
  return out;
}

ParsedDelta parse_full(OutputFormat format, std::string_view text, const nlohmann::json& tools,
                       bool starts_in_reasoning, uint64_t id_seed, ParserOptions options) {
  OutputParser p(format, tools, starts_in_reasoning, id_seed, options);
  ParsedDelta out = p.feed(text);
  out.append(p.finish());
  return out;
}

}  // namespace mmx::chat
