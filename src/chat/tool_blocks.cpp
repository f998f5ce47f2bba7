// Block parsers for the M2 XML format and the Text-01/M1 JSON-lines format (tool_blocks.h).
// Facts mirrored from vLLM minimax_m2_tool_parser.py / minimax_tool_parser.py:
//   * invoke and parameter names: text after `name=` up to the first '>', whitespace- and
//     quote-stripped (both " and ' quotes);
//   * a parameter value runs to the first `</parameter>` (so it may contain '<', newlines, and
//     even an unterminated `<parameter ...>`); it is whitespace-stripped, then typed (m2_convert);
//   * a repeated parameter name keeps its first position and the last value;
//   * M1 lines are stripped; `arguments` is re-serialised whatever its JSON type.
#include "chat/tool_blocks.h"

#include "base/json_nesting.h"

namespace mmx::chat {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

void skip_space(std::string_view s, size_t& i) {
  while (i < s.size() && is_space(s[i])) ++i;
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
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

// One `<start NAME>BODY</end>` element at s[i..] after optional whitespace. On success sets i
// past `end` and returns {name, body}; nullopt if the element is missing or malformed.
struct Element {
  std::string name;
  std::string_view body;
};
std::optional<Element> next_element(std::string_view s, size_t& i, std::string_view start,
                                    std::string_view end) {
  if (s.substr(i, start.size()) != start) return std::nullopt;
  const size_t p = i + start.size();
  const size_t close = s.find(end, p);
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view seg = s.substr(p, close - p);
  const size_t gt = seg.find('>');
  if (gt == std::string_view::npos || gt == 0) return std::nullopt;
  i = close + end.size();
  return Element{extract_name(seg.substr(0, gt)), seg.substr(gt + 1)};
}

// Parameters of one invoke (the text after the name's '>'); nullopt on stray text.
std::optional<ojson> m2_params(std::string_view s, const nlohmann::json* properties) {
  ojson args = ojson::object();
  size_t i = 0;
  for (;;) {
    skip_space(s, i);
    if (i == s.size()) return args;
    auto el = next_element(s, i, kParamStart, kParamEnd);
    if (!el) return std::nullopt;
    std::string value(strip(el->body));
    const nlohmann::json* prop = nullptr;
    if (properties != nullptr && properties->is_object()) {
      auto it = properties->find(el->name);
      if (it != properties->end()) prop = &*it;
    }
    args[el->name] = m2_convert(value, m2_types_of(prop));
  }
}

}  // namespace

std::optional<std::vector<RawCall>> parse_m2_block(std::string_view body, const ToolIndex& tools) {
  std::vector<RawCall> calls;
  size_t i = 0;
  for (;;) {
    skip_space(body, i);
    if (i == body.size()) break;
    auto inv = next_element(body, i, kInvokeStart, kInvokeEnd);
    if (!inv || inv->name.empty()) return std::nullopt;
    const nlohmann::json* params = tools.parameters(inv->name);
    const nlohmann::json* properties = nullptr;
    if (params != nullptr && params->is_object()) {
      auto it = params->find("properties");
      if (it != params->end()) properties = &*it;
    }
    auto args = m2_params(inv->body, properties);
    if (!args) return std::nullopt;
    calls.push_back({std::move(inv->name), dump_py(*args)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<RawCall>> parse_m1_block(std::string_view body) {
  std::vector<RawCall> calls;
  size_t i = 0;
  while (i <= body.size()) {
    size_t nl = body.find('\n', i);
    if (nl == std::string_view::npos) nl = body.size();
    std::string_view line = strip(body.substr(i, nl - i));
    i = nl + 1;
    if (line.empty()) continue;
    if (line.front() != '{' || line.back() != '}') return std::nullopt;
    if (json_nesting_depth(line) > 64) return std::nullopt;  // walked recursively by dump_py
    ojson j = ojson::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    auto name = j.find("name");
    auto args = j.find("arguments");
    if (name == j.end() || !name->is_string() || args == j.end()) return std::nullopt;
    calls.push_back({name->get<std::string>(), dump_py(*args)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace mmx::chat
