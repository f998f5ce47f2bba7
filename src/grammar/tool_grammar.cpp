#include "grammar/tool_grammar.h"

#include <algorithm>
#include <cctype>
#include <functional>

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

namespace {

// The (key, schema, required) members of an object schema, in the schema's order.
struct Member {
  std::string key;
  const json* schema;
  bool required;
};
std::vector<Member> members(const json& obj) {
  std::vector<Member> out;
  if (!obj.is_object() || !obj.contains("properties") || !obj["properties"].is_object()) return out;
  std::vector<std::string> required;
  if (obj.contains("required") && obj["required"].is_array())
    for (const json& r : obj["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  for (const auto& [k, schema] : obj["properties"].items())
    out.push_back({k, &schema, std::find(required.begin(), required.end(), k) != required.end()});
  return out;
}

// One format's pieces: the block around the calls, and one call's body from its parameters.
struct Syntax {
  std::string block_open, block_close;
  std::function<std::string(GbnfWriter&, const std::string& name, const json& params, int tool)> invoke;
};

std::string tool_call_gbnf(GbnfWriter& w, const Syntax& syn, const json& tools, const std::string& only) {
  if (!tools.is_array() || tools.empty()) throw Error("a forced tool call needs a non-empty 'tools' list");
  std::vector<std::string> invokes;
  int t = 0;
  for (const json& tool : tools) {
    ++t;
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    invokes.push_back(w.rule(fmt::format("invoke-{}", t), syn.invoke(w, name, f.value("parameters", json::object()), t)));
  }
  if (invokes.empty())
    throw Error(only.empty() ? "no usable function in 'tools'" : fmt::format("'tools' has no function named '{}'", only));
  std::string any = "(";
  for (size_t i = 0; i < invokes.size(); ++i) any += (i ? " | " : "") + invokes[i];
  any += only.empty() ? ")+" : ")";
  return w.text(gbnf_literal(syn.block_open) + " " + any + " " + gbnf_literal(syn.block_close));
}

// ---- M3: NS<tool_call>\n NS<invoke name="f">NS<k>VALUE NS</k>... NS</invoke>\n NS</tool_call> ----
const std::string kNs = "]<]minimax[>[";

// A leaf, nested tags for an object, NS<item>s for an array (the M3 template's to_xml).
std::string m3_value(GbnfWriter& w, const json& s, const std::string& path) {
  if (!s.is_object()) throw SchemaError("schema", fmt::format("{}: a parameter schema must be an object", path));
  for (const char* kw : {"$ref", "anyOf", "oneOf", "allOf", "minLength", "maxLength"})
    if (s.contains(kw)) throw SchemaError(kw, fmt::format("{}: '{}' is not supported for forced M3 tool calls", path, kw));
  auto text_of = [&](const json& v) -> std::string {
    if (v.is_string()) {
      const std::string t = v.get<std::string>();
      if (t.find("]<") != std::string::npos || (!t.empty() && t.back() == ']'))
        throw SchemaError("enum", fmt::format("{}: enum value '{}' cannot be written as a raw M3 value", path, t));
      return gbnf_literal(t);
    }
    if (v.is_null() || v.is_structured()) throw SchemaError("enum", fmt::format("{}: enum values must be scalars", path));
    return gbnf_literal(v.dump());
  };
  if (s.contains("const")) return text_of(s["const"]);
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) throw SchemaError("enum", path + ": 'enum' must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < s["enum"].size(); ++i) out += (i ? " | " : "") + text_of(s["enum"][i]);
    return out + ")";
  }
  const std::string type = s.contains("type") && s["type"].is_string() ? s["type"].get<std::string>()
                           : s.contains("properties")                 ? "object"
                           : s.contains("items")                      ? "array"
                                                                      : "";
  if (s.contains("type") && !s["type"].is_string())
    throw SchemaError("type", fmt::format("{}: a list of types is not supported for forced M3 tool calls", path));
  if (type == "string") return "m3-str";
  if (type == "null") return "\"\"";
  if (type == "integer" || type == "number" || type == "boolean") return w.schema_rule(s, "m3" + path);
  if (type == "object") {
    std::string seq;
    for (const Member& m : members(s)) {
      const std::string tag = gbnf_literal(kNs + "<" + m.key + ">") + " " + m3_value(w, *m.schema, path + "-" + m.key) + " " +
                              gbnf_literal(kNs + "</" + m.key + ">");
      seq += " (" + tag + ")" + (m.required ? "" : "?");
    }
    return seq.empty() ? "\"\"" : "(" + seq + " )";
  }
  if (type == "array") {
    const json items = s.value("items", json::object());
    const std::string item = "(" + gbnf_literal(kNs + "<item>") + " " + m3_value(w, items, path + "-item") + " " +
                             gbnf_literal(kNs + "</item>") + ")";
    auto count = [&](const char* kw, int64_t dflt) -> int64_t {
      if (!s.contains(kw)) return dflt;
      const json& v = s[kw];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000)
        throw SchemaError(kw, fmt::format("{}: '{}' must be an integer in 0..1000", path, kw));
      return v.get<int64_t>();
    };
    const int64_t mn = count("minItems", 0), mx = count("maxItems", -1);
    if (mn < 0 || mn > 1000 || mx > 1000 || (mx >= 0 && mx < mn))
      throw SchemaError("maxItems", path + ": minItems / maxItems out of range (0..1000)");
    return mx < 0 ? fmt::format("{}{{{},}}", item, mn) : fmt::format("{}{{{},{}}}", item, mn, mx);
  }
  throw SchemaError("type", fmt::format("{}: a parameter needs a 'type' (string, integer, number, boolean, null, object, array)", path));
}

}  // namespace

std::string m2_tool_call_gbnf(const json& tools, const std::string& only) {
  GbnfWriter w;
  add_raw_string_rules(w);
  Syntax syn{"<minimax:tool_call>\n", "</minimax:tool_call>",
             [](GbnfWriter& w, const std::string& name, const json& params, int t) {
               std::string body = gbnf_literal("<invoke name=\"" + name + "\">\n");
               int n = 0;
               for (const Member& m : members(params)) {
                 const std::string p = w.rule(fmt::format("m2-t{}-p{}", t, ++n),
                                              gbnf_literal("<parameter name=\"" + m.key + "\">") + " " +
                                                  value_expr(w, *m.schema, fmt::format("t{}-{}", t, m.key)) + " " +
                                                  gbnf_literal("</parameter>\n"));
                 body += " " + p + (m.required ? "" : "?");
               }
               return body + " " + gbnf_literal("</invoke>\n");
             }};
  return tool_call_gbnf(w, syn, tools, only);
}

std::string m3_tool_call_gbnf(const json& tools, const std::string& only) {
  GbnfWriter w;
  // A raw M3 string: "]<" never occurs (so the namespace marker cannot), and it does not end in "]".
  w.rule("m3-str", "([^\\]] | \"]\" [^<\\]])*");
  Syntax syn{kNs + "<tool_call>\n", kNs + "</tool_call>",
             [](GbnfWriter& w, const std::string& name, const json& params, int t) {
               json obj = params;
               if (!obj.is_object()) obj = json::object();
               if (!obj.contains("type")) obj["type"] = "object";
               return gbnf_literal(kNs + "<invoke name=\"" + name + "\">") + " " +
                      m3_value(w, obj, fmt::format("t{}", t)) + " " + gbnf_literal(kNs + "</invoke>\n");
             }};
  return tool_call_gbnf(w, syn, tools, only);
}

std::string m1_tool_call_gbnf(const json& tools, const std::string& only) {
  GbnfWriter w;
  w.single_line();  // the M1 parser reads one JSON object per line
  Syntax syn{"<tool_calls>\n", "</tool_calls>",
             [](GbnfWriter& w, const std::string& name, const json& params, int t) {
               const std::string args = w.schema_rule(params.is_object() ? params : json::object(), fmt::format("m1-t{}", t));
               return gbnf_literal("{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ") + " " + args + " " +
                      gbnf_literal("}\n");
             }};
  return tool_call_gbnf(w, syn, tools, only);
}

}  // namespace mmx::grammar
