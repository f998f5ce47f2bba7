// Schema-driven typing of tool-call parameter values (M2 and M3 rule sets) and the
// Python-json.dumps-style writer. See value_typing.h for the rules and their vLLM origin.
#include "chat/value_typing.h"

#include "base/json_nesting.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace mmx::chat {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python "digitpart": digit (["_"] digit)*. Appends the digits to `out`, advances `i`.
bool digit_part(std::string_view s, size_t& i, std::string& out) {
  if (i >= s.size() || !is_digit(s[i])) return false;
  out += s[i++];
  while (i < s.size()) {
    if (is_digit(s[i])) {
      out += s[i++];
    } else if (s[i] == '_' && i + 1 < s.size() && is_digit(s[i + 1])) {
      ++i;
    } else {
      break;
    }
  }
  return true;
}

constexpr int kMaxTypedDepth = 64;

// A JSON value when `s` parses as JSON (any kind), else std::nullopt. Never throws.
// Text nested deeper than kMaxTypedDepth stays a string: it would be walked recursively below.
std::optional<ojson> try_json(std::string_view s) {
  if (json_nesting_depth(s) > kMaxTypedDepth) return std::nullopt;
  ojson j = ojson::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// A finite double that is an integer and fits int64 becomes a JSON integer (Python's
// `int(v)` for integral floats); anything else stays a double.
ojson number_from_double(double d) {
  if (std::floor(d) == d && std::fabs(d) < 9.2e18) return ojson(static_cast<int64_t>(d));
  return ojson(d);
}

void dump_into(const ojson& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += ojson(it.key()).dump(-1, ' ', false, ojson::error_handler_t::replace);
      out += ": ";
      dump_into(it.value(), out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      dump_into(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

}  // namespace

std::string dump_py(const ojson& j) {
  std::string out;
  dump_into(j, out);
  return out;
}

// ---- Python number grammar ----

bool py_parse_int(std::string_view s, ojson& out) {
  s = strip(s);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string digits;
  if (!digit_part(s, i, digits) || i != s.size()) return false;
  std::string text = (neg ? "-" : "") + digits;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0) {
    out = ojson(static_cast<int64_t>(v));
    return true;
  }
  if (!neg) {
    errno = 0;
    unsigned long long u = std::strtoull(text.c_str(), &end, 10);
    if (errno == 0) {
      out = ojson(static_cast<uint64_t>(u));
      return true;
    }
  }
  out = ojson(std::strtod(text.c_str(), nullptr));  // Python would keep a big int
  return true;
}

bool py_parse_float(std::string_view s, double& out) {
  s = strip(s);
  size_t i = 0;
  std::string text;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) text += s[i++];
  bool has_int = digit_part(s, i, text);
  bool has_frac = false;
  if (i < s.size() && s[i] == '.') {
    text += s[i++];
    has_frac = digit_part(s, i, text);
  }
  if (!has_int && !has_frac) return false;  // also rejects inf/nan: not JSON numbers
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    text += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) text += s[i++];
    if (!digit_part(s, i, text)) return false;
  }
  if (i != s.size()) return false;
  double d = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(d)) return false;
  out = d;
  return true;
}

// ---- tool index ----

ToolIndex::ToolIndex(const nlohmann::json& tools) {
  if (!tools.is_array()) return;
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    const nlohmann::json* fn = &t;
    auto f = t.find("function");
    if (f != t.end() && f->is_object()) fn = &*f;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) continue;
    auto params = fn->find("parameters");
    tools_.emplace_back(name->get<std::string>(), params != fn->end() ? *params : nlohmann::json());
  }
}

const nlohmann::json* ToolIndex::parameters(std::string_view name) const {
  for (const auto& [n, p] : tools_)
    if (n == name) return &p;
  return nullptr;
}

// ---- M2 rules ----

namespace {

void m2_collect(const nlohmann::json& schema, std::vector<std::string>& types) {
  auto add = [&](const std::string& t) {
    for (const auto& x : types)
      if (x == t) return;
    types.push_back(t);
  };
  if (!schema.is_object()) {
    add("string");
    return;
  }
  size_t n0 = types.size();
  auto t = schema.find("type");
  if (t != schema.end()) {
    if (t->is_string()) add(t->get<std::string>());
    if (t->is_array())
      for (const auto& x : *t)
        if (x.is_string()) add(x.get<std::string>());
  }
  auto e = schema.find("enum");
  if (e != schema.end() && e->is_array()) {
    for (const auto& v : *e) {
      if (v.is_null())
        add("null");
      else if (v.is_boolean())
        add("boolean");
      else if (v.is_number_integer())
        add("integer");
      else if (v.is_number_float())
        add("number");
      else if (v.is_string())
        add("string");
      else if (v.is_array())
        add("array");
      else if (v.is_object())
        add("object");
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    auto c = schema.find(key);
    if (c != schema.end() && c->is_array())
      for (const auto& sub : *c) m2_collect(sub, types);
  }
  if (types.size() == n0) add("string");
}

}  // namespace

std::vector<std::string> m2_types_of(const nlohmann::json* property_schema) {
  std::vector<std::string> types;
  if (property_schema == nullptr) return {"string"};
  m2_collect(*property_schema, types);
  return types;
}

bool m2_null_literals(const nlohmann::json* property_schema, const std::vector<std::string>& types) {
  if (property_schema == nullptr) return true;
  bool has_null = false, has_string = false;
  for (const auto& t : types) {
    const std::string l = lower(t);
    has_null = has_null || l == "null";
    has_string = has_string || l == "string" || l == "str" || l == "text";
  }
  return has_null || !has_string;
}

ojson m2_convert(const std::string& value, const std::vector<std::string>& types, bool null_literals) {
  const std::string low = lower(value);
  if (null_literals && (low == "null" || low == "none" || low == "nil")) return nullptr;
  std::vector<std::string> norm;
  for (const auto& t : types) norm.push_back(lower(t));
  auto has = [&](const char* t) {
    for (const auto& x : norm)
      if (x == t) return true;
    return false;
  };
  static const char* kPriority[] = {"integer", "int",   "number", "float", "boolean", "bool",
                                    "object",  "array", "string", "str",   "text"};
  for (const char* t : kPriority) {
    if (!has(t)) continue;
    std::string_view tv = t;
    if (tv == "string" || tv == "str" || tv == "text") return value;
    if (tv == "integer" || tv == "int") {
      ojson out;
      if (py_parse_int(value, out)) return out;
    } else if (tv == "number" || tv == "float") {
      double d;
      if (py_parse_float(value, d)) return number_from_double(d);
    } else if (tv == "boolean" || tv == "bool") {
      std::string b(strip(low));
      if (b == "true" || b == "1" || b == "yes" || b == "on") return true;
      if (b == "false" || b == "0" || b == "no" || b == "off") return false;
    } else {  // object / array: any JSON value is accepted, as vLLM does
      if (auto j = try_json(value)) return *j;
    }
  }
  if (auto j = try_json(value)) return *j;
  return value;
}

// ---- M3 rules ----

namespace {

M3Atom atom_from_string(const std::string& s) {
  std::string t = lower(s);
  if (t == "none" || t == "null" || t == "nil") return M3Atom::kNone;
  if (t == "str" || t == "string" || t == "text") return M3Atom::kString;
  if (t == "int" || t == "integer") return M3Atom::kInteger;
  if (t == "float" || t == "number") return M3Atom::kFloat;
  if (t == "bool" || t == "boolean") return M3Atom::kBoolean;
  if (t == "array" || t == "list") return M3Atom::kArray;
  if (t == "object" || t == "dict" || t == "dictionary" || t == "map") return M3Atom::kObject;
  return M3Atom::kOther;
}

M3Atom atom_from_example(const nlohmann::json& v) {
  if (v.is_null()) return M3Atom::kNone;
  if (v.is_string()) return M3Atom::kString;
  if (v.is_boolean()) return M3Atom::kBoolean;
  if (v.is_number_integer()) return M3Atom::kInteger;
  if (v.is_number_float()) return M3Atom::kFloat;
  if (v.is_array()) return M3Atom::kArray;
  if (v.is_object()) return M3Atom::kObject;
  return M3Atom::kOther;
}

// Python truthiness of a JSON value (empty containers / "" / 0 / null are false).
bool truthy(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

void m3_candidates(const nlohmann::json& s, std::vector<M3Atom>& out) {
  if (!s.is_object()) {
    out.push_back(M3Atom::kString);
    return;
  }
  if (auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) {
      out.push_back(atom_from_string(t->get<std::string>()));
    } else if (t->is_array()) {
      for (const auto& x : *t)
        out.push_back(x.is_string() ? atom_from_string(x.get<std::string>()) : M3Atom::kOther);
    } else {
      out.push_back(M3Atom::kOther);
    }
    return;
  }
  auto p = s.find("properties");
  auto ap = s.find("additionalProperties");
  if ((p != s.end() && p->is_object()) ||
      (ap != s.end() && !(ap->is_boolean() && !ap->get<bool>()))) {
    out.push_back(M3Atom::kObject);
    return;
  }
  if (s.contains("items") || s.contains("prefixItems")) {
    out.push_back(M3Atom::kArray);
    return;
  }
  size_t n0 = out.size();
  if (auto c = s.find("const"); c != s.end()) {
    out.push_back(atom_from_example(*c));
  } else if (auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
    for (const auto& v : *e) out.push_back(atom_from_example(v));
  } else {
    for (const char* key : {"anyOf", "oneOf", "allOf"})
      if (auto c = s.find(key); c != s.end() && c->is_array())
        for (const auto& sub : *c) m3_candidates(sub, out);
  }
  if (out.size() == n0) out.push_back(M3Atom::kString);
}

struct Converted {
  ojson value;
  int confidence;
};

std::optional<Converted> m3_convert_one(M3Atom a, const std::string& text) {
  switch (a) {
    case M3Atom::kNone: {
      std::string_view st = strip(text);
      if (st.empty()) return Converted{nullptr, 3};
      if (lower(st) == "null") return Converted{nullptr, 10};
      return std::nullopt;  // vLLM: null with confidence 1 (would drop the text)
    }
    case M3Atom::kString:
      return Converted{text, 2};
    case M3Atom::kInteger: {
      ojson v;
      if (py_parse_int(text, v)) return Converted{v, 10};
      return std::nullopt;
    }
    case M3Atom::kFloat: {
      double d;
      if (py_parse_float(text, d)) return Converted{number_from_double(d), 10};
      std::string t = lower(strip(text));
      if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
      bool neg = strip(text).substr(0, 1) == "-";
      if (t == "nan") return Converted{"NaN", 10};
      if (t == "inf" || t == "infinity") return Converted{neg ? "-Infinity" : "Infinity", 10};
      return std::nullopt;
    }
    case M3Atom::kBoolean: {
      std::string t = lower(strip(text));
      if (t == "true") return Converted{true, 10};
      if (t == "false") return Converted{false, 10};
      if (t == "yes" || t == "on" || t == "1") return Converted{true, 9};
      if (t == "no" || t == "off" || t == "0") return Converted{false, 9};
      return std::nullopt;  // vLLM: false with confidence 1 (would drop the text)
    }
    default:
      if (auto j = try_json(text)) return Converted{*j, 10};
      return std::nullopt;
  }
}

}  // namespace

M3Type M3Type::from_property(const nlohmann::json& property) {
  M3Type t;
  std::vector<M3Atom> all;
  m3_candidates(property, all);
  for (M3Atom a : all)
    if (!std::count(t.candidates.begin(), t.candidates.end(), a)) t.candidates.push_back(a);
  t.schema = property;
  return t;
}

bool M3Type::has(M3Atom a) const { return std::count(candidates.begin(), candidates.end(), a) > 0; }

ojson M3Type::convert(const std::string& text) const {
  // Empty text: the string "" when a string is allowed (the template writes "" as an empty tag,
  // and omits nulls), else {} / [] / null by type.
  if (text.empty()) {
    if (has(M3Atom::kString)) return "";
    if (has(M3Atom::kObject)) return ojson::object();
    if (has(M3Atom::kArray)) return ojson::array();
    if (has(M3Atom::kNone)) return nullptr;
    return "";
  }
  std::optional<Converted> best;
  for (M3Atom a : candidates) {
    auto c = m3_convert_one(a, text);
    if (c && (!best || c->confidence > best->confidence)) best = std::move(c);
  }
  if (!best) return text;
  return best->value;
}

namespace {

const nlohmann::json* get_property(const nlohmann::json& s, const std::string& key) {
  if (!s.is_object()) return nullptr;
  if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
    if (auto v = p->find(key); v != p->end() && truthy(*v)) return &*v;
  }
  if (auto ap = s.find("additionalProperties"); ap != s.end() && ap->is_object() && truthy(*ap))
    return &*ap;
  return nullptr;
}

const nlohmann::json* get_item(const nlohmann::json& s, size_t index) {
  if (!s.is_object()) return nullptr;
  if (auto it = s.find("items"); it != s.end() && truthy(*it)) return &*it;
  if (auto pi = s.find("prefixItems"); pi != s.end() && pi->is_array()) {
    if (index < pi->size()) return &(*pi)[index];
    if (auto ai = s.find("additionalItems"); ai != s.end() && truthy(*ai)) return &*ai;
    if (!pi->empty()) return &pi->back();
  }
  return nullptr;
}

template <typename Get>
std::optional<M3Type> sub_type(const nlohmann::json& schema, Get get) {
  if (!schema.is_object()) return std::nullopt;
  if (const nlohmann::json* p = get(schema); p && truthy(*p)) return M3Type::from_property(*p);
  nlohmann::json choices = nlohmann::json::array();
  for (const char* key : {"anyOf", "oneOf", "allOf"})
    if (auto c = schema.find(key); c != schema.end() && c->is_array())
      for (const auto& sub : *c)
        if (const nlohmann::json* p = get(sub); p && truthy(*p)) choices.push_back(*p);
  if (choices.empty()) return std::nullopt;
  return M3Type::from_property(nlohmann::json{{"anyOf", choices}});
}

}  // namespace

std::optional<M3Type> M3Type::property(const std::string& key) const {
  return sub_type(schema, [&](const nlohmann::json& s) { return get_property(s, key); });
}

M3Type M3Type::of_parameter(const nlohmann::json* parameters, const std::string& key) {
  if (parameters == nullptr) return from_property(nullptr);
  std::optional<M3Type> t = sub_type(*parameters, [&](const nlohmann::json& s) { return get_property(s, key); });
  return t ? std::move(*t) : from_property(nullptr);
}

std::optional<M3Type> M3Type::item(size_t index) const {
  return sub_type(schema, [&](const nlohmann::json& s) { return get_item(s, index); });
}

}  // namespace mmx::chat
