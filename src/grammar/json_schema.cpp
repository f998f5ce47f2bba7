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
    "$defs", "definitions", "propertyNames"};
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

// ---- numbers with bounds: decimal text compared digit by digit ----

// A bound's magnitude as decimal digits: integer part (no leading zeros, "0" for none) and
// fraction (no trailing zeros), from the JSON number as written by the shortest round trip.
struct Decimal {
  bool negative = false;
  std::string whole = "0", frac;
};

Decimal to_decimal(const json& v, const char* kw, const std::string& path) {
  Decimal d;
  if (v.is_number_integer()) {
    std::string t = v.dump();
    d.negative = t[0] == '-';
    d.whole = d.negative ? t.substr(1) : t;
  } else {
    const double x = v.get<double>();
    if (!std::isfinite(x)) refuse(kw, path, fmt::format("'{}' must be a finite number", kw));
    std::string t = fmt::format("{}", x);  // shortest round trip: "0.1", "1e-07", "1.5e+20"
    d.negative = t[0] == '-';
    if (d.negative) t.erase(0, 1);
    int exp = 0;
    if (const size_t e = t.find_first_of("eE"); e != std::string::npos) {
      exp = std::atoi(t.c_str() + e + 1);
      t.resize(e);
    }
    const size_t dot = t.find('.');
    std::string digits = dot == std::string::npos ? t : t.substr(0, dot) + t.substr(dot + 1);
    int point = int(dot == std::string::npos ? t.size() : dot) + exp;  // digits before the point
    if (point < 0) digits.insert(0, size_t(-point), '0'), point = 0;
    if (point > int(digits.size())) digits.append(size_t(point) - digits.size(), '0');
    d.whole = digits.substr(0, size_t(point));
    d.frac = digits.substr(size_t(point));
  }
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size()));
  if (d.whole.empty()) d.whole = "0";
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  if (d.whole == "0" && d.frac.empty()) d.negative = false;  // -0 is 0
  if (d.whole.size() > 18) refuse(kw, path, "number bounds beyond 18 integer digits are not supported");
  return d;
}

// One side of a fraction's range: the digits after the point of the bound, inclusive or not.
struct FracBound {
  bool on = false;
  std::string digits;
  bool inclusive = true;
};

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
  if (s.contains("propertyNames")) {  // a JSON key is a string: {"type": "string"} (or true) says nothing more
    const json& pn = s["propertyNames"];
    bool no_op = pn.is_boolean() ? pn.get<bool>() : pn.is_object();
    if (pn.is_object())
      for (const auto& [k, v] : pn.items()) no_op &= (k == "type" && v == "string") || kAnnotations.count(k) > 0;
    if (!no_op)
      refuse("propertyNames", path, "'propertyNames' is supported only as {\"type\": \"string\"} (every JSON key is one); "
                                    "a schema that restricts the names is not");
  }
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
    if (const std::optional<json> e = string_choices(s)) return visit(*e, c, path);
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
    else if (t == "number") alts.push_back(number(s, path));
    else if (t == "boolean") alts.push_back(R"(("true" | "false"))");
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
  std::string extra;  // a key-value of an unlisted property, when they are to be written
  std::string extra_value = value_rule();  // the value of an unlisted property
  bool closed = false;                     // additionalProperties: false
  if (s.contains("additionalProperties")) {
    const json& a = s["additionalProperties"];
    if (a.is_object() || (a.is_boolean() && a.get<bool>())) {
      extra_value = visit(a, c, path + "/additionalProperties");
      extra = fmt::format(R"({} {} ":" {} {})", str, ws, ws, extra_value);
    } else if (!a.is_boolean()) {
      refuse("additionalProperties", path, "'additionalProperties' must be a boolean or a schema");
    } else {
      closed = true;
    }
  }
  // A required name not in properties is an additional property: its value follows
  // additionalProperties, and with additionalProperties false no object can have it.
  for (const std::string& r : required)
    if (!props.contains(r)) {
      if (closed)
        refuse("required", path, fmt::format("'{}' is required, but it is not in 'properties' and 'additionalProperties' is "
                                             "false: no object satisfies this schema", r));
      items.emplace_back(kv(r, extra_value), true);
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
  if (mn > kMaxStringLength) refuse("minLength", path, fmt::format("string lengths above {} are not supported", kMaxStringLength));
  // A bound past the grammar's repetition cap is not written into it (docs/structured-output.md):
  // no bound, as the reply's max_tokens bounds it anyway.
  return {mn, mx > kMaxStringLength ? -1 : mx};
}

std::string GbnfWriter::string(const json& s, const std::string& path) {
  string_rule();
  const auto [mn, mx] = string_length_bounds(s, path);
  if (mn == 0 && mx < 0) return "j-string";
  return mx < 0 ? fmt::format(R"("\"" j-char{{{},}} "\"")", mn) : fmt::format(R"("\"" j-char{{{},{}}} "\"")", mn, mx);
}

std::string GbnfWriter::integer(const json& s, const std::string& path) {
  value_rule();
  // A bound that is not an integer is the nearest integer inside it (an integer >= 0.5 is >= 1).
  auto bound = [&](const char* kw, bool up) -> int64_t {
    const json& v = s.at(kw);
    if (v.is_number_float() && std::fabs(v.get<double>()) < 9e18 && v.get<double>() != std::floor(v.get<double>()))
      return int64_t(up ? std::ceil(v.get<double>()) : std::floor(v.get<double>()));
    return get_int(s, kw, path);
  };
  std::optional<int64_t> lo, hi;
  if (s.contains("minimum")) lo = bound("minimum", true);
  if (s.contains("exclusiveMinimum")) {
    if (s["exclusiveMinimum"].is_boolean()) refuse("exclusiveMinimum", path, "boolean exclusiveMinimum (draft 4) is not supported; give the bound");
    const int64_t v = bound("exclusiveMinimum", false) + 1;
    lo = lo ? std::max(*lo, v) : v;
  }
  if (s.contains("maximum")) hi = bound("maximum", false);
  if (s.contains("exclusiveMaximum")) {
    if (s["exclusiveMaximum"].is_boolean()) refuse("exclusiveMaximum", path, "boolean exclusiveMaximum (draft 4) is not supported; give the bound");
    const int64_t v = bound("exclusiveMaximum", true) - 1;
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

namespace {

// a <=> b as decimal values (magnitudes).
int compare(const Decimal& a, const Decimal& b) {
  if (a.whole.size() != b.whole.size()) return a.whole.size() < b.whole.size() ? -1 : 1;
  if (const int c = a.whole.compare(b.whole)) return c < 0 ? -1 : 1;
  const size_t n = std::max(a.frac.size(), b.frac.size());
  const std::string fa = a.frac + std::string(n - a.frac.size(), '0'), fb = b.frac + std::string(n - b.frac.size(), '0');
  const int c = fa.compare(fb);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

// Signed a <=> b.
int compare_signed(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  return a.negative ? -compare(a, b) : compare(a, b);
}

// 0.lo <=> 0.hi for fraction digit strings.
int compare_frac(const std::string& lo, const std::string& hi) {
  Decimal a, b;
  a.frac = lo, b.frac = hi;
  return compare(a, b);
}

struct Bound {
  Decimal v;
  bool inclusive = true;
};

}  // namespace

std::string GbnfWriter::fraction(const std::string& lo, bool lo_on, bool lo_incl, const std::string& hi, bool hi_on,
                                 bool hi_incl, bool nonempty) {
  if (lo_on && lo.empty() && lo_incl) lo_on = false;  // >= 0: no bound
  // The values 0.F form an interval: empty when the bounds cross.
  if (lo_on && hi_on) {
    const int c = compare_frac(lo, hi);
    if (c > 0 || (c == 0 && !(lo_incl && hi_incl))) return "";
  }
  if (!lo_on && hi_on && hi.empty() && !hi_incl) return "";  // < 0
  const bool zero_ok = !lo_on && (!hi_on || !hi.empty() || hi_incl);  // F = "" (value 0)
  if (!lo_on && !hi_on) {
    if (!names_.count("j-digits")) rule("j-digits", "[0-9]{0,15}");
    return nonempty ? "[0-9] j-digits" : "j-digits";
  }
  const std::string key = fmt::format("{}|{}{}|{}|{}{}|{}", lo, int(lo_on), int(lo_incl), hi, int(hi_on), int(hi_incl), int(nonempty));
  if (const auto it = fractions_.find(key); it != fractions_.end()) return it->second;
  const std::string name = fresh("j-frac");
  fractions_[key] = name;  // before the body: a state may lead back to itself ("0" after a bound of 0)
  // The next digit e -> the bounds on the digits after it.
  struct Next {
    bool lo_on, hi_on;
    std::string lo, hi;
    bool ok;
  };
  auto next = [&](int e) {
    Next n{false, false, "", "", true};
    if (lo_on) {
      const int d = lo.empty() ? 0 : lo[0] - '0';
      if (e < d) n.ok = false;
      else if (e == d) n.lo_on = true, n.lo = lo.empty() ? "" : lo.substr(1);
    }
    if (hi_on) {
      const int d = hi.empty() ? 0 : hi[0] - '0';
      if (e > d) n.ok = false;
      else if (e == d) n.hi_on = true, n.hi = hi.empty() ? "" : hi.substr(1);
    }
    return n;
  };
  std::vector<std::string> alts;
  if (zero_ok && !nonempty) alts.push_back("\"\"");
  for (int e = 0; e <= 9;) {
    const Next n = next(e);
    int last = e;
    while (last + 1 <= 9) {
      const Next m = next(last + 1);
      if (m.ok != n.ok || m.lo_on != n.lo_on || m.hi_on != n.hi_on || m.lo != n.lo || m.hi != n.hi) break;
      ++last;
    }
    if (n.ok) {
      const std::string sub = fraction(n.lo, n.lo_on, lo_incl, n.hi, n.hi_on, hi_incl, false);
      if (!sub.empty()) alts.push_back(fmt::format("[{}-{}] {}", e, last, sub));
    }
    e = last + 1;
  }
  std::string body;
  for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
  return rule(name, body);
}

std::string GbnfWriter::number(const json& s, const std::string& path) {
  value_rule();
  std::optional<Bound> lo, hi;
  auto tighter = [](std::optional<Bound>& cur, Bound b, int sign) {  // sign +1: keep the larger (lower bounds)
    if (!cur) return void(cur = b);
    const int c = compare_signed(b.v, cur->v) * sign;
    if (c > 0 || (c == 0 && !b.inclusive)) cur = b;
  };
  for (const char* kw : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!s.contains(kw)) continue;
    const json& v = s[kw];
    if (v.is_boolean()) refuse(kw, path, fmt::format("boolean {} (draft 4) is not supported; give the bound", kw));
    if (!v.is_number()) refuse(kw, path, fmt::format("'{}' must be a number", kw));
    const bool lower = std::string_view(kw).find("inimum") != std::string_view::npos;
    tighter(lower ? lo : hi, Bound{to_decimal(v, kw, path), kw[0] == 'm'}, lower ? 1 : -1);
  }
  if (!lo && !hi) return "j-number";
  if (lo && hi) {
    const int c = compare_signed(lo->v, hi->v);
    if (c > 0 || (c == 0 && !(lo->inclusive && hi->inclusive))) refuse("maximum", path, "no number fits the bounds");
  }
  // Magnitudes m in [p, q] (q none: no bound), written "I" or "I.F" without an exponent.
  auto magnitude = [&](const Bound& p, const std::optional<Bound>& q) -> std::string {
    if (q) {
      const int c = compare(p.v, q->v);
      if (c > 0 || (c == 0 && !(p.inclusive && q->inclusive))) return "";
    }
    std::vector<std::string> alts;
    // I = whole with the fraction bounded by (lo side, hi side).
    auto with_fraction = [&](const std::string& whole, const FracBound& fl, const FracBound& fh) {
      std::vector<std::string> f;
      const bool lo_on = fl.on && !(fl.digits.empty() && fl.inclusive);
      if (!lo_on && (!fh.on || !fh.digits.empty() || fh.inclusive)) f.push_back("\"\"");  // no point: I itself
      const std::string digits = fraction(fl.digits, fl.on, fl.inclusive, fh.digits, fh.on, fh.inclusive, true);
      if (!digits.empty()) f.push_back("\".\" " + digits);
      if (f.empty()) return;
      std::string fs;
      for (size_t i = 0; i < f.size(); ++i) fs += (i ? " | " : "") + f[i];
      alts.push_back(fmt::format("{} ({})", gbnf_literal(whole), fs));
    };
    const FracBound from{true, p.v.frac, p.inclusive}, off{};
    const uint64_t pw = std::stoull(p.v.whole);
    if (q && q->v.whole == p.v.whole) {
      with_fraction(p.v.whole, from, FracBound{true, q->v.frac, q->inclusive});
    } else {
      with_fraction(p.v.whole, from, off);
      const uint64_t qw = q ? std::stoull(q->v.whole) : kNoMax;
      if (!q || pw + 1 <= qw - 1) {  // the integer parts strictly between: any fraction
        std::vector<std::string> mids;
        magnitudes(pw + 1, q ? qw - 1 : kNoMax, mids);
        std::string m;
        for (size_t i = 0; i < mids.size(); ++i) m += (i ? " | " : "") + mids[i];
        alts.push_back(fmt::format("({}) (\".\" [0-9]{{1,15}})?", m));
      }
      if (q) with_fraction(q->v.whole, off, FracBound{true, q->v.frac, q->inclusive});
    }
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out.empty() ? "" : "(" + out + ")";
  };
  auto abs_of = [](Bound b) {
    b.v.negative = false;
    return b;
  };
  std::vector<std::string> alts;
  if (!lo || lo->v.negative) {  // x = -m, m > 0 ("-0" is not written)
    const Bound m_lo = hi && hi->v.negative ? abs_of(*hi) : Bound{Decimal{}, false};
    const std::optional<Bound> m_hi = lo ? std::optional<Bound>(abs_of(*lo)) : std::nullopt;
    if (const std::string m = magnitude(m_lo, m_hi); !m.empty()) alts.push_back("\"-\" " + m);
  }
  if (!hi || !hi->v.negative) {  // x = m >= 0
    const Bound m_lo = lo && !lo->v.negative ? *lo : Bound{Decimal{}, true};
    if (const std::string m = magnitude(m_lo, hi); !m.empty()) alts.push_back(m);
  }
  if (alts.empty()) refuse("maximum", path, "no number fits the bounds");
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::optional<json> string_choices(const json& s) {
  const char* kw = !s.is_object() ? nullptr : s.contains("anyOf") ? "anyOf" : s.contains("oneOf") ? "oneOf" : nullptr;
  if (!kw || !s[kw].is_array() || s[kw].empty()) return std::nullopt;
  std::vector<std::string> order;
  std::map<std::string, int> branches_with;  // value -> how many branches have it
  for (const json& b : s[kw]) {
    if (!b.is_object() || b.contains("const") == b.contains("enum")) return std::nullopt;  // one of the two
    for (const auto& [k, v] : b.items())
      if (k != "const" && k != "enum" && !(k == "type" && v == "string") && !kAnnotations.count(k)) return std::nullopt;
    const json values = b.contains("enum") ? b["enum"] : json::array({b["const"]});
    if (!values.is_array() || values.empty()) return std::nullopt;
    std::set<std::string> mine;
    for (const json& x : values) {
      if (!x.is_string()) return std::nullopt;
      const std::string v = x.get<std::string>();
      if (mine.insert(v).second && branches_with[v]++ == 0) order.push_back(v);
    }
  }
  json e = json::array();
  for (const std::string& v : order)
    if (std::string_view(kw) == "anyOf" || branches_with[v] == 1) e.push_back(v);
  if (e.empty()) return std::nullopt;
  return json{{"enum", e}};
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
