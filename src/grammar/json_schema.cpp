#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <map>
#include <optional>

namespace mmx::grammar {

using json = nlohmann::ordered_json;

namespace {

// Keywords acted on, and annotations that change nothing about validity.
const std::set<std::string> kHandled = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems", "maxItems",
    "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "$ref",
    "$defs", "definitions"};
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "deprecated", "readOnly", "writeOnly"};

std::string where(const std::string& path) { return path.empty() ? "the schema" : "schema at " + path; }

[[noreturn]] void refuse(const std::string& kw, const std::string& path, const std::string& why) {
  throw SchemaError(kw, fmt::format("{}: {}", where(path), why));
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
  return out.empty() ? "x" : out.substr(0, 40);
}

int64_t get_int(const json& s, const char* kw, const std::string& path) {
  const json& v = s.at(kw);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) refuse(kw, path, fmt::format("'{}' is out of range", kw));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(std::fabs(d) < 9e18)) refuse(kw, path, fmt::format("'{}' is out of range", kw));
    if (d == std::floor(d)) return int64_t(d);
  }
  refuse(kw, path, fmt::format("'{}' must be an integer", kw));
}

// Non-negative integers in [a, b] spelled without leading zeros, both of `len` digits (a <= b).
std::string same_len(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return gbnf_literal(a);
  const size_t rest = a.size() - 1;
  const bool a_low = a.find_first_not_of('0', 1) == std::string::npos;
  const bool b_high = b.find_first_not_of('9', 1) == std::string::npos;
  const std::string any_rest = rest ? fmt::format(" [0-9]{{{}}}", rest) : "";
  if (a[0] == b[0]) return fmt::format("{} ({})", gbnf_literal(a.substr(0, 1)), same_len(a.substr(1), b.substr(1)));
  if (a_low && b_high) return fmt::format("[{}-{}]{}", a[0], b[0], any_rest);
  std::vector<std::string> alts;
  alts.push_back(fmt::format("{} ({})", gbnf_literal(a.substr(0, 1)), same_len(a.substr(1), std::string(rest, '9'))));
  if (a[0] + 1 <= b[0] - 1) alts.push_back(fmt::format("[{}-{}]{}", char(a[0] + 1), char(b[0] - 1), any_rest));
  alts.push_back(fmt::format("{} ({})", gbnf_literal(b.substr(0, 1)), same_len(std::string(rest, '0'), b.substr(1))));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

constexpr uint64_t kNoMax = UINT64_MAX;

// Non-negative integers in [lo, hi] (hi == kNoMax: unbounded; at most 19 digits), as alternatives.
void magnitudes(uint64_t lo, uint64_t hi, std::vector<std::string>& alts) {
  uint64_t p = 1;  // 10^(len-1)
  for (int len = 1; len <= 19; ++len, p *= 10) {
    const uint64_t first = len == 1 ? 0 : p, last = len == 19 ? 9999999999999999999ull : p * 10 - 1;
    if (last < lo) continue;
    if (first > hi) break;
    if (hi == kNoMax && lo <= first) {  // every length from here on
      alts.push_back(len == 1 ? "[0-9]" : fmt::format("[1-9] [0-9]{{{},18}}", len - 1));
      if (len == 1) alts.push_back("[1-9] [0-9]{1,18}");
      return;
    }
    alts.push_back(same_len(std::to_string(std::max(lo, first)), std::to_string(std::min(hi, last))));
  }
}

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  }
  return out + "\"";
}

struct GbnfWriter::Ctx {
  const json* root;
  std::string prefix;
  std::map<std::string, std::string> refs;  // "$ref" -> rule name
};

std::string GbnfWriter::fresh(const std::string& base) {
  std::string name = sanitize(base);
  while (names_.count(name)) name = fmt::format("{}-{}", sanitize(base), ++n_);
  names_.insert(name);
  return name;
}

std::string GbnfWriter::rule(const std::string& name, const std::string& body) {
  names_.insert(name);
  rules_.emplace_back(name, body);
  return name;
}

std::string GbnfWriter::text(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (const auto& [n, b] : rules_) out += n + " ::= " + b + "\n";
  return out;
}

std::string GbnfWriter::ws_rule() {
  if (!names_.count("j-ws")) rule("j-ws", single_line_ ? R"(| " ")" : R"(| " " | "\n" [ ]{0,16})");
  return "j-ws";
}

std::string GbnfWriter::string_rule() {
  if (!names_.count("j-string")) {
    rule("j-hex", "[0-9a-fA-F]");
    // \u escapes of surrogates are left out, so a string's length in code points is exact.
    rule("j-char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] j-hex j-hex j-hex | [dD] [0-7] j-hex j-hex)))");
    rule("j-string", R"("\"" j-char* "\"")");
  }
  return "j-string";
}

std::string GbnfWriter::value_rule() {
  if (!names_.count("j-value")) {
    const std::string ws = ws_rule(), str = string_rule();
    rule("j-value", "j-object | j-array | j-string | j-number | \"true\" | \"false\" | \"null\"");
    rule("j-object", fmt::format(R"("{{" {0} ({1} {0} ":" {0} j-value ({0} "," {0} {1} {0} ":" {0} j-value)*)? {0} "}}")", ws, str));
    rule("j-array", fmt::format(R"("[" {0} (j-value ({0} "," {0} j-value)*)? {0} "]")", ws));
    rule("j-integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))");
    rule("j-number", R"(j-integer ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?)");
  }
  return "j-value";
}

std::string GbnfWriter::object_rule() {
  value_rule();
  return "j-object";
}

std::string GbnfWriter::schema_rule(const nlohmann::json& schema, const std::string& prefix) {
  const json s = json::parse(schema.dump());
  return schema_rule(s, prefix);
}

std::string GbnfWriter::schema_rule(const nlohmann::ordered_json& schema, const std::string& prefix) {
  Ctx c{&schema, prefix, {}};
  const std::string name = fresh(prefix);
  const std::string body = visit(schema, c, "");
  return rule(name, body);
}

std::string GbnfWriter::visit(const json& s, Ctx& c, const std::string& path) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return value_rule();
    refuse("false", path, "the schema `false` allows no value");
  }
  if (!s.is_object()) refuse("schema", path, "a schema must be an object or a boolean");
  for (const auto& [k, v] : s.items())
    if (!kHandled.count(k) && !kAnnotations.count(k))
      refuse(k, path, fmt::format("the keyword '{}' is outside the supported JSON Schema subset (docs/structured-output.md)", k));
  if (s.contains("$ref")) {
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && k != "$defs" && k != "definitions" && !kAnnotations.count(k))
        refuse(k, path, fmt::format("'{}' beside '$ref' is not supported", k));
    if (!s["$ref"].is_string()) refuse("$ref", path, "'$ref' must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') refuse("$ref", path, fmt::format("only local references (#...) are supported, got '{}'", ref));
    if (const auto it = c.refs.find(ref); it != c.refs.end()) return it->second;
    const json* target = nullptr;
    try {
      target = &c.root->at(json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      refuse("$ref", path, fmt::format("'{}' does not resolve within the schema", ref));
    }
    const std::string name = fresh(c.prefix + "-ref-" + ref.substr(ref.rfind('/') + 1));
    c.refs[ref] = name;
    rule(name, visit(*target, c, ref.substr(1)));
    return name;
  }
  auto literal = [&](const json& v) {
    try {
      return gbnf_literal(v.dump());
    } catch (const std::exception&) {
      refuse("enum", path, "a value is not valid UTF-8");
    }
  };
  if (s.contains("const")) return literal(s["const"]);
  if (s.contains("enum")) {
    const json& e = s["enum"];
    if (!e.is_array() || e.empty()) refuse("enum", path, "'enum' must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < e.size(); ++i) out += (i ? " | " : "") + literal(e[i]);
    return out + ")";
  }
  if (s.contains("anyOf")) {
    const json& a = s["anyOf"];
    if (!a.is_array() || a.empty()) refuse("anyOf", path, "'anyOf' must be a non-empty array");
    for (const auto& [k, v] : s.items())
      if (k != "anyOf" && k != "$defs" && k != "definitions" && !kAnnotations.count(k))
        refuse(k, path, fmt::format("'{}' beside 'anyOf' is not supported (move it into each branch)", k));
    std::string out = "(";
    for (size_t i = 0; i < a.size(); ++i) out += (i ? " | " : "") + visit(a[i], c, fmt::format("{}/anyOf/{}", path, i));
    return out + ")";
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array() && !t.empty())
      for (const json& x : t) {
        if (!x.is_string()) refuse("type", path, "'type' must be a string or a list of strings");
        types.push_back(x.get<std::string>());
      }
    else refuse("type", path, "'type' must be a string or a non-empty list of strings");
  } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("minLength") || s.contains("maxLength")) {
    types.push_back("string");
  } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
    types.push_back("integer");
  } else {
    return value_rule();
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    if (t == "object") alts.push_back(object(s, c, path));
    else if (t == "array") alts.push_back(array(s, c, path));
    else if (t == "string") alts.push_back(string(s, path));
    else if (t == "integer") alts.push_back(integer(s, path));
    else if (t == "number") {
      for (const char* kw : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(kw)) refuse(kw, path, fmt::format("'{}' is supported on integers only", kw));
      value_rule();
      alts.push_back("j-number");
    } else if (t == "boolean") alts.push_back(R"(("true" | "false"))");
    else if (t == "null") alts.push_back(R"("null")");
    else refuse("type", path, fmt::format("unknown type '{}'", t));
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::string GbnfWriter::object(const json& s, Ctx& c, const std::string& path) {
  const std::string ws = ws_rule(), str = string_rule();
  const json props = s.value("properties", json::object());
  if (!props.is_object()) refuse("properties", path, "'properties' must be an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) refuse("required", path, "'required' must be a list of names");
    for (const json& r : s["required"]) {
      if (!r.is_string()) refuse("required", path, "'required' must be a list of names");
      required.push_back(r.get<std::string>());
    }
  }
  auto is_required = [&](const std::string& k) { return std::find(required.begin(), required.end(), k) != required.end(); };
  // (key-value expression, required) in the schema's order; required names not in properties last.
  std::vector<std::pair<std::string, bool>> items;
  auto kv = [&](const std::string& key, const std::string& value) {
    std::string lit;
    try {
      lit = gbnf_literal(nlohmann::json(key).dump());
    } catch (const std::exception&) {
      refuse("properties", path, "a property name is not valid UTF-8");
    }
    return fmt::format(R"({} {} ":" {} {})", lit, ws, ws, value);
  };
  for (const auto& [k, v] : props.items())
    items.emplace_back(kv(k, visit(v, c, path + "/properties/" + k)), is_required(k));
  for (const std::string& r : required)
    if (!props.contains(r)) items.emplace_back(kv(r, value_rule()), true);
  std::string extra;  // a key-value of an unlisted property, when they are to be written
  if (s.contains("additionalProperties")) {
    const json& a = s["additionalProperties"];
    if (a.is_object() || (a.is_boolean() && a.get<bool>()))
      extra = fmt::format(R"({} {} ":" {} {})", str, ws, ws, visit(a, c, path + "/additionalProperties"));
    else if (!a.is_boolean()) refuse("additionalProperties", path, "'additionalProperties' must be a boolean or a schema");
  }
  // first_i: the members from i on when none was written yet; rest_i: after one was.
  const std::string base = fresh(c.prefix + "-obj");
  std::string first = extra.empty() ? "" : fmt::format("({} ({} \",\" {} {})*)?", extra, ws, ws, extra);
  std::string rest = extra.empty() ? "" : fmt::format("({} \",\" {} {})*", ws, ws, extra);
  for (size_t i = items.size(); i-- > 0;) {
    const auto& [e, req] = items[i];
    const std::string fi = fmt::format("{}-f{}", base, i), ri = fmt::format("{}-r{}", base, i);
    const std::string r_body = req ? fmt::format(R"({} "," {} {} {})", ws, ws, e, rest)
                                   : fmt::format(R"(({} "," {} {})? {})", ws, ws, e, rest);
    const std::string f_body = req ? fmt::format("{} {}", e, rest) : fmt::format("{} {} | {}", e, rest, first.empty() ? "" : first);
    rule(ri, r_body);
    rule(fi, f_body);
    first = fi, rest = ri;
  }
  return fmt::format(R"("{{" {} {} {} "}}")", ws, first, ws);
}

std::string GbnfWriter::array(const json& s, Ctx& c, const std::string& path) {
  const std::string ws = ws_rule();
  if (s.contains("items") && s["items"].is_array()) refuse("items", path, "tuple 'items' (a list of schemas) is not supported");
  const std::string item = s.contains("items") ? visit(s["items"], c, path + "/items") : value_rule();
  const int64_t mn = s.contains("minItems") ? get_int(s, "minItems", path) : 0;
  const int64_t mx = s.contains("maxItems") ? get_int(s, "maxItems", path) : -1;
  if (mn < 0 || (mx >= 0 && mx < mn)) refuse(mx >= 0 && mx < mn ? "maxItems" : "minItems", path, "no array length fits minItems / maxItems");
  if (mn > 1000 || mx > 1000) refuse(mn > 1000 ? "minItems" : "maxItems", path, "item counts above 1000 are not supported");
  if (mx == 0) return fmt::format(R"("[" {} "]")", ws);
  const std::string more = fmt::format(R"(({} "," {} {}))", ws, ws, item);
  const std::string reps = mx < 0 ? fmt::format("{{{},}}", std::max<int64_t>(mn - 1, 0))
                                   : fmt::format("{{{},{}}}", std::max<int64_t>(mn - 1, 0), mx - 1);
  if (mn == 0) return fmt::format(R"("[" {} ({} {}{})? {} "]")", ws, item, more, reps, ws);
  return fmt::format(R"("[" {} {} {}{} {} "]")", ws, item, more, reps, ws);
}

std::pair<int64_t, int64_t> string_length_bounds(const json& s, const std::string& path) {
  const int64_t mn = s.contains("minLength") ? get_int(s, "minLength", path) : 0;
  const int64_t mx = s.contains("maxLength") ? get_int(s, "maxLength", path) : -1;
  if (mn < 0 || (mx >= 0 && mx < mn)) refuse(mx >= 0 && mx < mn ? "maxLength" : "minLength", path, "no string length fits minLength / maxLength");
  if (mn > 10000 || mx > 10000) refuse(mn > 10000 ? "minLength" : "maxLength", path, "string lengths above 10000 are not supported");
  return {mn, mx};
}

std::string GbnfWriter::string(const json& s, const std::string& path) {
  string_rule();
  const auto [mn, mx] = string_length_bounds(s, path);
  if (mn == 0 && mx < 0) return "j-string";
  return mx < 0 ? fmt::format(R"("\"" j-char{{{},}} "\"")", mn) : fmt::format(R"("\"" j-char{{{},{}}} "\"")", mn, mx);
}

std::string GbnfWriter::integer(const json& s, const std::string& path) {
  value_rule();
  std::optional<int64_t> lo, hi;
  if (s.contains("minimum")) lo = get_int(s, "minimum", path);
  if (s.contains("exclusiveMinimum")) {
    if (s["exclusiveMinimum"].is_boolean()) refuse("exclusiveMinimum", path, "boolean exclusiveMinimum (draft 4) is not supported; give the bound");
    const int64_t v = get_int(s, "exclusiveMinimum", path) + 1;
    lo = lo ? std::max(*lo, v) : v;
  }
  if (s.contains("maximum")) hi = get_int(s, "maximum", path);
  if (s.contains("exclusiveMaximum")) {
    if (s["exclusiveMaximum"].is_boolean()) refuse("exclusiveMaximum", path, "boolean exclusiveMaximum (draft 4) is not supported; give the bound");
    const int64_t v = get_int(s, "exclusiveMaximum", path) - 1;
    hi = hi ? std::min(*hi, v) : v;
  }
  if (!lo && !hi) return "j-integer";
  if (lo && hi && *lo > *hi) refuse("maximum", path, "no integer fits minimum / maximum");
  const int64_t kLim = 999999999999999999;  // 18 digits: no overflow below
  if ((lo && (*lo > kLim || *lo < -kLim)) || (hi && (*hi > kLim || *hi < -kLim)))
    refuse(lo && (*lo > kLim || *lo < -kLim) ? "minimum" : "maximum", path, "integer bounds beyond 18 digits are not supported");
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives -m with m in [max(1, -hi), -lo]
    std::vector<std::string> neg;
    magnitudes(uint64_t(hi && *hi < 0 ? -*hi : 1), lo ? uint64_t(-*lo) : kNoMax, neg);
    for (const auto& m : neg) alts.push_back("\"-\" (" + m + ")");
  }
  if (!hi || *hi >= 0) magnitudes(uint64_t(lo && *lo > 0 ? *lo : 0), hi ? uint64_t(*hi) : kNoMax, alts);
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::string json_schema_to_gbnf(const nlohmann::json& schema) { return json_schema_to_gbnf(json::parse(schema.dump())); }

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  GbnfWriter w;
  const std::string r = w.schema_rule(schema, "s");
  return w.text(r);
}

std::string json_object_gbnf() {
  GbnfWriter w;
  return w.text(w.object_rule());
}

}  // namespace mmx::grammar
