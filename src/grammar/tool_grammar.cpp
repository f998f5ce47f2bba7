#include "grammar/tool_grammar.h"

#include <algorithm>
#include <cctype>

#include "grammar/json_schema.h"

namespace mmx::grammar {

namespace {

using json = nlohmann::ordered_json;

// Raw string values (see the header): a unit is a character, with '<' only before something that
// is neither '/' nor '<' (so "</" never occurs); the first unit is not whitespace; the spellings
// of null / none / nil (any case) are excluded as whole values by walking their letters.
void add_raw_string_rules(GbnfWriter& w) {
  const std::string ws = R"( \t\n\r\x0B\x0C)";
  w.rule("m2-c", R"([^<] | "<" [^/<])");
  w.rule("m2-nw", fmt::format(R"([^<{0}] | "<" [^/<{0}])", ws));
  w.rule("m2-str", fmt::format(R"([nN] m2-n | ([^<nN{0}] | "<" [^/<{0}]) m2-c*)", ws));
  // A state after a prefix of a null word: end here, take the next letter, or leave the word.
  auto state = [&](const std::string& name, const std::string& letters, const std::string& next) {
    std::string other = "[^<";
    for (char c : letters) other += std::string(1, char(std::tolower(c))) + char(std::toupper(c));
    other += "]";
    std::string body = "| " + other + " m2-c* | \"<\" [^/<] m2-c*";
    for (size_t i = 0; i < letters.size(); ++i)
      body += fmt::format(" | [{}{}] {}", char(std::tolower(letters[i])), char(std::toupper(letters[i])), next.substr(i * 8, 8));
    w.rule(name, body);
  };
  // next-state names are padded to 8 characters so one string can carry several
  state("m2-n", "uoi", "m2-nu   m2-no   m2-ni   ");
  state("m2-nu", "l", "m2-nul  ");
  state("m2-nul", "l", "m2-null ");
  state("m2-no", "n", "m2-non  ");
  state("m2-non", "e", "m2-none ");
  state("m2-ni", "l", "m2-nil  ");
  for (const char* whole : {"m2-null", "m2-none", "m2-nil"}) w.rule(whole, "m2-c* m2-nw");  // must go on
}

bool only_strings(const json& e) {
  for (const json& x : e)
    if (!x.is_string()) return false;
  return true;
}

std::string value_expr(GbnfWriter& w, const json& schema, const std::string& prefix) {
  const bool is_string = schema.is_object() && schema.contains("type") && schema["type"] == "string";
  if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty() &&
      only_strings(schema["enum"])) {
    std::string out = "(";
    for (size_t i = 0; i < schema["enum"].size(); ++i) {
      const std::string v = schema["enum"][i].get<std::string>();
      if (v.empty() || v.find("</") != std::string::npos || std::isspace(static_cast<unsigned char>(v.front())) ||
          std::isspace(static_cast<unsigned char>(v.back())))
        throw SchemaError("enum", fmt::format("enum value '{}' cannot be written as a raw M2 parameter value", v));
      out += (i ? " | " : "") + gbnf_literal(v);
    }
    return out + ")";
  }
  if (is_string) {
    for (const char* kw : {"minLength", "maxLength", "const"})
      if (schema.contains(kw))
        throw SchemaError(kw, fmt::format("'{}' on a string parameter is not supported for forced tool calls", kw));
    return "m2-str";
  }
  return w.schema_rule(schema, prefix);
}

}  // namespace

std::string m2_tool_call_gbnf(const json& tools, const std::string& only) {
  if (!tools.is_array() || tools.empty()) throw Error("a forced tool call needs a non-empty 'tools' list");
  GbnfWriter w;
  add_raw_string_rules(w);
  std::vector<std::string> invokes;
  int t = 0;
  for (const json& tool : tools) {
    ++t;
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    std::string body = gbnf_literal("<invoke name=\"" + name + "\">\n");
    const json params = f.value("parameters", json::object());
    if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
      std::vector<std::string> required;
      if (params.contains("required") && params["required"].is_array())
        for (const json& r : params["required"])
          if (r.is_string()) required.push_back(r.get<std::string>());
      int n_param = 0;
      for (const auto& [k, schema] : params["properties"].items()) {
        const std::string p = w.rule(fmt::format("m2-t{}-p{}", t, ++n_param),
                                     gbnf_literal("<parameter name=\"" + k + "\">") + " " +
                                         value_expr(w, schema, fmt::format("t{}-{}", t, k)) + " " + gbnf_literal("</parameter>\n"));
        const bool req = std::find(required.begin(), required.end(), k) != required.end();
        body += " " + p + (req ? "" : "?");
      }
    }
    body += " " + gbnf_literal("</invoke>\n");
    invokes.push_back(w.rule(fmt::format("m2-invoke-{}", t), body));
  }
  if (invokes.empty())
    throw Error(only.empty() ? "no usable function in 'tools'" : fmt::format("'tools' has no function named '{}'", only));
  std::string any = "(";
  for (size_t i = 0; i < invokes.size(); ++i) any += (i ? " | " : "") + invokes[i];
  any += only.empty() ? ")+" : ")";
  return w.text(gbnf_literal("<minimax:tool_call>\n") + " " + any + " " + gbnf_literal("</minimax:tool_call>"));
}

}  // namespace mmx::grammar
