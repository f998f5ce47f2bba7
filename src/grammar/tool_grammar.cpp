#include "grammar/tool_grammar.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>

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

// ---- length-bounded raw strings ----
constexpr const char* kWs = R"( \t\n\r\x0B\x0C)";

std::string rep(const std::string& x, int64_t a, int64_t b) {  // x{a,b}; b < 0: no bound
  if (a == 0 && b == 0) return "\"\"";
  return b < 0 ? fmt::format("{}{{{},}}", x, a) : fmt::format("{}{{{},{}}}", x, a, b);
}

std::string alternatives(const std::vector<std::string>& alts) {
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Raw text of lo..hi code points (hi < 0: no bound) from the class [^never]. strip_null (M2):
// the M2 parser strips whitespace and reads null / none / nil (any case) as null, so the first
// and last characters are not whitespace and those words are left out as whole values — by
// walking their letters (a trie) and leaving it with any other character.
class BoundedRaw {
 public:
  BoundedRaw(GbnfWriter& w, std::string never, int64_t lo, int64_t hi, bool strip_null, std::string name)
      : w_(w), never_(std::move(never)), lo_(lo), hi_(hi), strip_null_(strip_null), name_(std::move(name)) {}
  std::string build() {
    if (!strip_null_) return rep(fmt::format("[^{}]", never_), lo_, hi_);
    auto r = node("");
    return r ? *r : throw SchemaError("maxLength", "no raw string fits minLength / maxLength");
  }

 private:
  bool fits(int64_t n) const { return n >= lo_ && (hi_ < 0 || n <= hi_); }
  std::string any() const { return fmt::format("[^{}]", never_); }
  std::string edge() const { return fmt::format("[^{}{}]", never_, kWs); }
  // Lengths a..b (b < 0: no bound) ending in a non-whitespace character; may be empty unless told.
  std::optional<std::string> tail(int64_t a, int64_t b, bool nonempty) const {
    std::vector<std::string> alts;
    if (!nonempty && a <= 0) alts.push_back("\"\"");
    const int64_t a1 = std::max<int64_t>(a, 1);
    if (b < 0 || a1 <= b) alts.push_back(rep(any(), a1 - 1, b < 0 ? -1 : b - 1) + " " + edge());
    if (alts.empty()) return std::nullopt;
    return alternatives(alts);
  }
  // Strings that begin with `prefix`, a prefix of a null word (lowercase; matched in any case).
  std::optional<std::string> node(const std::string& prefix) {
    static const std::vector<std::string> kNull = {"null", "none", "nil"};
    const int64_t k = int64_t(prefix.size());
    std::vector<std::string> alts;
    if (k == 0 ? lo_ == 0 : fits(k) && std::find(kNull.begin(), kNull.end(), prefix) == kNull.end())
      alts.push_back("\"\"");
    std::string next;  // letters that continue a null word
    for (const std::string& word : kNull)
      if (word.size() > prefix.size() && word.compare(0, prefix.size(), prefix) == 0 &&
          next.find(word[prefix.size()]) == std::string::npos)
        next += word[prefix.size()];
    if (hi_ >= 0 && k + 1 > hi_) return alts.empty() ? std::nullopt : std::optional(alternatives(alts));
    std::string cased;
    for (char c : next) {
      cased += std::string(1, c) + char(std::toupper(static_cast<unsigned char>(c)));
      if (auto sub = node(prefix + c)) alts.push_back(fmt::format("[{}{}] {}", c, char(std::toupper(static_cast<unsigned char>(c))), *sub));
    }
    const int64_t a = lo_ - k - 1, b = hi_ < 0 ? -1 : hi_ - k - 1;
    if (auto t = tail(a, b, false)) alts.push_back(fmt::format("[^{}{}{}] {}", never_, cased, kWs, *t));
    if (k > 0)  // whitespace inside (never first): the string must go on to a non-space
      if (auto t = tail(a, b, true)) alts.push_back(fmt::format("[{}] {}", kWs, *t));
    if (alts.empty()) return std::nullopt;
    return w_.rule(w_.fresh(fmt::format("{}-{}", name_, prefix.empty() ? "s" : prefix)), alternatives(alts));
  }
  GbnfWriter& w_;
  std::string never_;
  int64_t lo_, hi_;
  bool strip_null_;
  std::string name_;
};

// The alternatives of a union: anyOf / oneOf, or a type list (each type with the schema's other
// keywords); empty when `s` is not one. kw names the keyword for errors.
std::vector<json> union_branches(const json& s, const char*& kw) {
  std::vector<json> out;
  kw = !s.is_object() ? nullptr : s.contains("anyOf") ? "anyOf" : s.contains("oneOf") ? "oneOf"
       : s.contains("type") && s["type"].is_array() ? "type" : nullptr;
  if (!kw) return out;
  if (std::string_view(kw) == "type") {
    for (const json& t : s["type"]) {
      json b = s;
      b["type"] = t;
      out.push_back(b);
    }
  } else if (s[kw].is_array()) {
    for (const json& b : s[kw]) out.push_back(b);
  }
  if (out.empty()) throw SchemaError(kw, fmt::format("'{}' must be a non-empty array", kw));
  return out;
}
bool is_null_schema(const json& b) { return b.is_object() && b.contains("type") && b["type"] == "null"; }
bool is_string_schema(const json& b) {
  return b.is_object() && ((b.contains("type") && b["type"] == "string") || (b.contains("const") && b["const"].is_string()) ||
                           (b.contains("enum") && b["enum"].is_array() && !b["enum"].empty() && b["enum"][0].is_string()));
}

bool only_strings(const json& e) {
  for (const json& x : e)
    if (!x.is_string()) return false;
  return true;
}

std::string value_expr(GbnfWriter& w, const json& schema, const std::string& prefix) {
  if (const std::optional<json> e = string_choices(schema)) return value_expr(w, *e, prefix);  // one enum
  // A union with a string alternative: the string is written raw and typed back by its text, so
  // only string-or-null is safe (a raw "5" of a string | integer union would read back as 5).
  const char* union_kw = nullptr;
  const std::vector<json> branches = union_branches(schema, union_kw);
  if (std::any_of(branches.begin(), branches.end(), is_string_schema)) {
    std::vector<const json*> other;
    for (const json& b : branches)
      if (!is_null_schema(b)) other.push_back(&b);
    if (other.size() > 1)
      throw SchemaError(union_kw, fmt::format("'{}' with a string alternative is supported for forced M2 tool calls only "
                                              "as string or null: a raw value is typed back by its text", union_kw));
    return fmt::format("({} | {})", value_expr(w, *other[0], prefix + "-u"), gbnf_literal("null"));
  }
  const bool is_string = schema.is_object() && schema.contains("type") && schema["type"] == "string";
  // String choices (enum of strings, or a string const) are written raw, as the parser reads them.
  json choices;
  if (schema.is_object() && schema.contains("const") && schema["const"].is_string()) choices = json::array({schema["const"]});
  else if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty() &&
           only_strings(schema["enum"]))
    choices = schema["enum"];
  if (!choices.is_null()) {
    const char* kw = schema.contains("const") ? "const" : "enum";
    std::vector<std::string> alts;
    for (const json& c : choices) {
      const std::string v = c.get<std::string>();
      const std::string low = [&] { std::string l = v; for (char& ch : l) ch = char(std::tolower(static_cast<unsigned char>(ch))); return l; }();
      if (v.empty() || v.find("</") != std::string::npos || std::isspace(static_cast<unsigned char>(v.front())) ||
          std::isspace(static_cast<unsigned char>(v.back())) || low == "null" || low == "none" || low == "nil")
        throw SchemaError(kw, fmt::format("{} value '{}' cannot be written as a raw M2 parameter value", kw, v));
      alts.push_back(gbnf_literal(v));
    }
    return alternatives(alts);
  }
  if (is_string) {
    const auto [lo, hi] = string_length_bounds(schema, prefix);
    if (lo == 0 && hi < 0) return "m2-str";
    // Bounded: one character per unit, so '<' is left out (it could begin "</").
    return BoundedRaw(w, "<", lo, hi, /*strip_null=*/true, "m2-" + prefix).build();
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
  if (s.contains("$ref"))  // (vLLM's M3 parser, which ours follows, types values without resolving it)
    throw SchemaError("$ref", fmt::format("{}: '$ref' is not supported for forced M3 tool calls: the M3 output parser "
                                          "types arguments from the schema without resolving references", path));
  if (s.contains("allOf")) throw SchemaError("allOf", fmt::format("{}: 'allOf' is not supported for forced M3 tool calls", path));
  if (const std::optional<json> e = string_choices(s)) return m3_value(w, *e, path);  // one enum
  // X or null (Optional[X]): anyOf / oneOf of a schema and {"type": "null"}, or a type list [t, "null"].
  const char* union_kw = nullptr;
  const std::vector<json> branches = union_branches(s, union_kw);
  if (union_kw) {
    std::vector<const json*> other;
    for (const json& b : branches)
      if (!is_null_schema(b)) other.push_back(&b);
    if (other.size() > 1)
      throw SchemaError(union_kw, fmt::format("{}: forced M3 tool calls support '{}' only as one schema or null: the M3 "
                                              "parser types a value by its text, so two alternatives could read back "
                                              "as each other", path, union_kw));
    if (other.empty()) return gbnf_literal("null");
    return fmt::format("({} | {})", m3_value(w, *other[0], path + "-u"), gbnf_literal("null"));
  }
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
    throw SchemaError("type", fmt::format("{}: 'type' must be a string or a list of strings", path));
  if (type == "string") {
    const auto [lo, hi] = string_length_bounds(s, path);
    if (lo == 0 && hi < 0) return "m3-str";
    // Bounded: one character per unit, so ']' is left out (it could begin "]<" or end the value).
    return BoundedRaw(w, "\\]", lo, hi, /*strip_null=*/false, "m3" + path).build();
  }
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
    const std::string item = fmt::format("({} {} {})", gbnf_literal(kNs + "<item>"), m3_value(w, items, path + "-item"),
                                         gbnf_literal(kNs + "</item>"));
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
