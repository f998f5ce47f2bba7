// Incremental block readers for the M2 XML format and the Text-01/M1 JSON-lines format
// (tool_blocks.h). Facts mirrored from vLLM minimax_m2_tool_parser.py / minimax_tool_parser.py:
//   * invoke and parameter names: text after `name=` up to the first '>', whitespace- and
//     quote-stripped (both " and ' quotes);
//   * a parameter value runs to the first `</parameter>` (so it may contain '<', newlines, and
//     even an unterminated `<parameter ...>`); it is whitespace-stripped, then typed (m2_convert);
//   * M1 lines are stripped; `arguments` is re-serialised whatever its JSON type.
#include "chat/tool_blocks.h"

#include <algorithm>
#include <cctype>

#include "base/json_nesting.h"

namespace mmx::chat {

namespace {

size_t skip_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && block_space(s[i])) ++i;
  return i;
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && block_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && block_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string extract_name(std::string_view s) {
  s = strip(s);
  if (s.size() >= 2 &&
      ((s.front() == '"' && s.back() == '"') || (s.front() == '\'' && s.back() == '\'')))
    s = s.substr(1, s.size() - 2);
  return std::string(s);
}

constexpr std::string_view kInvokeStart = "<invoke name=";
constexpr std::string_view kInvokeEnd = "</invoke>";
constexpr std::string_view kParamStart = "<parameter name=";
constexpr std::string_view kParamEnd = "</parameter>";

BlockStep step(BlockStep::Kind kind, size_t consumed) {
  BlockStep s;
  s.kind = kind;
  s.consumed = consumed;
  return s;
}

// Position of `token` in `s`, or npos.
size_t find(std::string_view s, std::string_view token, size_t from = 0) { return s.find(token, from); }

// `a` comes before `b` (npos is last).
bool before(size_t a, size_t b) { return a < b; }

}  // namespace

BlockStep read_m2_step(std::string_view text, const BlockReadContext& ctx) {
  const size_t i = skip_space(text);
  const std::string_view rest = text.substr(i);
  const bool final = ctx.final;
  if (rest.empty()) return step(final ? BlockStep::kEof : BlockStep::kWait, i);
  if (rest.substr(0, ctx.block_end.size()) == ctx.block_end)
    return step(BlockStep::kEnd, i + ctx.block_end.size());
  // Where this element's earlier calls stopped finding a closing tag (they waited): no
  // `</parameter>`, `</invoke>` or block end starts before `from` in `rest`.
  ScanCache local;
  ScanCache& cache = ctx.cache != nullptr ? *ctx.cache : local;
  if (cache.body_at != i) {
    cache.reset();
    cache.body_at = i;
  }
  const size_t from = cache.scanned;
  auto waiting = [&]() {  // none of the closing tags is in `rest`: resume near its end
    const size_t overlap = std::max({kParamEnd.size(), kInvokeEnd.size(), ctx.block_end.size()}) - 1;
    cache.scanned = rest.size() > overlap ? rest.size() - overlap : 0;
    return step(BlockStep::kWait, i);
  };
  const size_t be = find(rest, ctx.block_end, from);
  // The element is cut by the block end or the end of output: it can never complete.
  const bool cut = be != std::string_view::npos || final;

  if (!ctx.in_invoke) {
    if (rest.substr(0, kInvokeStart.size()) == kInvokeStart) {
      const size_t gt = rest.find('>', kInvokeStart.size());
      if (gt == std::string_view::npos) return cut ? step(BlockStep::kBad, i) : waiting();
      const std::string_view seg = rest.substr(kInvokeStart.size(), gt - kInvokeStart.size());
      // The first '>' ends the name; if it is the one of `</invoke>` (or of the block end),
      // the opening tag has no '>' of its own.
      if (seg.empty() || before(be, gt) || seg.find("</invoke") != std::string_view::npos)
        return step(BlockStep::kBad, i);
      BlockStep s = step(BlockStep::kInvokeOpen, i + gt + 1);
      s.name = extract_name(seg);
      if (s.name.empty()) s.kind = BlockStep::kBad, s.consumed = i;
      return s;
    }
    if (!final && (proper_prefix_of(rest, kInvokeStart) || proper_prefix_of(rest, ctx.block_end)))
      return step(BlockStep::kWait, i);
    return step(BlockStep::kBad, i);
  }

  if (rest.substr(0, kInvokeEnd.size()) == kInvokeEnd)
    return step(BlockStep::kInvokeClose, i + kInvokeEnd.size());
  if (rest.substr(0, kParamStart.size()) == kParamStart) {
    const size_t pe = find(rest, kParamEnd, std::max(from, kParamStart.size()));
    const size_t ie = find(rest, kInvokeEnd, std::max(from, kParamStart.size()));
    // The name ends at the first '>', which must come before any closing tag.
    const size_t gt = rest.find('>', kParamStart.size());
    const size_t first_close = std::min({pe, ie, be});
    if (gt == std::string_view::npos)
      return first_close != std::string_view::npos || final ? step(BlockStep::kBad, i) : waiting();
    if (gt >= first_close || gt == kParamStart.size()) return step(BlockStep::kBad, i);
    const std::string name = extract_name(rest.substr(kParamStart.size(), gt - kParamStart.size()));
    const nlohmann::json* prop = nullptr;
    if (ctx.fn_params != nullptr && ctx.fn_params->is_object()) {
      auto props = ctx.fn_params->find("properties");
      if (props != ctx.fn_params->end() && props->is_object()) {
        auto it = props->find(name);
        if (it != props->end()) prop = &*it;
      }
    }
    const std::vector<std::string> types = m2_types_of(prop);
    const bool null_literals = m2_null_literals(prop, types);
    if (m2_is_string_typed(types)) {  // its value streams as text (read_m2_string)
      BlockStep s = step(BlockStep::kStringOpen, i + gt + 1);
      s.name = name;
      s.null_literals = null_literals;
      return s;
    }
    if (pe == std::string_view::npos)
      return cut || ie != std::string_view::npos ? step(BlockStep::kBad, i) : waiting();
    if (before(ie, pe) || before(be, pe)) return step(BlockStep::kBad, i);
    BlockStep s = step(BlockStep::kParam, i + pe + kParamEnd.size());
    s.name = name;
    s.value = m2_convert(std::string(strip(rest.substr(gt + 1, pe - gt - 1))), types, null_literals);
    return s;
  }
  if (!final && (proper_prefix_of(rest, kInvokeEnd) || proper_prefix_of(rest, kParamStart) ||
                 proper_prefix_of(rest, ctx.block_end)))
    return step(BlockStep::kWait, i);
  return step(BlockStep::kBad, i);
}

bool m2_is_string_typed(const std::vector<std::string>& types) {
  // m2_convert's priority order: the first type it would try decides.
  static const char* kPriority[] = {"integer", "int",   "number", "float", "boolean", "bool",
                                    "object",  "array", "string", "str",   "text"};
  for (const char* t : kPriority)
    for (const std::string& x : types) {
      std::string low = x;
      for (char& c : low) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (low == t) return std::string_view(t) == "string" || std::string_view(t) == "str" || std::string_view(t) == "text";
    }
  return false;
}

StringStep read_m2_string(std::string_view text, std::string_view block_end, bool final) {
  return read_string_to(text, kParamEnd, kInvokeEnd, block_end, final);
}

StringStep read_string_to(std::string_view text, std::string_view own_close, std::string_view invoke_end,
                          std::string_view block_end, bool final) {
  const size_t close = std::min({text.find(own_close), text.find(invoke_end), text.find(block_end)});
  if (close != std::string_view::npos) {
    const bool own = own_close != invoke_end && own_close != block_end &&
                     text.substr(close, own_close.size()) == own_close;
    return {close, true, close + (own ? own_close.size() : 0)};
  }
  if (final) return {text.size(), true, text.size()};
  size_t keep = 0;  // a tail that may begin one of the three tags
  for (std::string_view tag : {own_close, invoke_end, block_end})
    for (size_t k = std::min(tag.size() - 1, text.size()); k > keep; --k)
      if (text.substr(text.size() - k) == tag.substr(0, k)) {
        keep = k;
        break;
      }
  return {text.size() - keep, false, text.size() - keep};
}

BlockStep read_m1_step(std::string_view text, const BlockReadContext& ctx) {
  const size_t i = skip_space(text);
  const std::string_view rest = text.substr(i);
  if (rest.empty()) return step(ctx.final ? BlockStep::kEof : BlockStep::kWait, i);
  if (rest.substr(0, ctx.block_end.size()) == ctx.block_end)
    return step(BlockStep::kEnd, i + ctx.block_end.size());
  const size_t line_end = std::min(rest.find('\n'), find(rest, ctx.block_end));
  if (line_end == std::string_view::npos && !ctx.final) return step(BlockStep::kWait, i);
  const std::string_view line = strip(rest.substr(0, line_end));
  const size_t consumed = line_end == std::string_view::npos ? text.size() : i + line_end;
  BlockStep skip = step(BlockStep::kSkip, consumed);
  skip.name = std::string(line);
  if (line.empty() || line.front() != '{' || line.back() != '}') return skip;
  if (json_nesting_depth(line) > 64) return skip;  // dump_py recurses
  ojson j = ojson::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return skip;
  auto name = j.find("name");
  auto args = j.find("arguments");
  if (name == j.end() || !name->is_string() || args == j.end()) return skip;
  BlockStep s = step(BlockStep::kCall, consumed);
  s.name = name->get<std::string>();
  s.value = std::move(*args);
  return s;
}

}  // namespace mmx::chat
