// Runtime values: construction, truthiness, printing (JS number formatting, JSON), equality,
// JSON input conversion and the UTF-8 helpers that emulate JavaScript string functions.
#include "template/value.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace mmx::jinja {

// ---- Object ----

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

// ---- construction ----

Value Value::null() {
  Value v;
  v.kind = Kind::kNull;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::array(Array x, Kind k) {
  Value v;
  v.kind = k;
  v.arr = std::make_shared<Array>(std::move(x));
  return v;
}
Value Value::object(Object x, Kind k) {
  Value v;
  v.kind = k;
  v.obj = std::make_shared<Object>(std::move(x));
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUndefined:
      return "UndefinedValue";
    case Kind::kNull:
      return "NullValue";
    case Kind::kBool:
      return "BooleanValue";
    case Kind::kInt:
      return "IntegerValue";
    case Kind::kFloat:
      return "FloatValue";
    case Kind::kString:
      return "StringValue";
    case Kind::kArray:
      return "ArrayValue";
    case Kind::kTuple:
      return "TupleValue";
    case Kind::kObject:
      return "ObjectValue";
    case Kind::kKwargs:
      return "KeywordArgumentsValue";
    case Kind::kNamespace:
      return "NamespaceValue";
    case Kind::kFunction:
      return "FunctionValue";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNull:
      return false;
    case Kind::kBool:
      return v.b;
    case Kind::kInt:
      return v.i != 0;
    case Kind::kFloat:
      return v.f != 0 && !std::isnan(v.f);
    case Kind::kString:
      return !v.s.empty();
    case Kind::kArray:
    case Kind::kTuple:
      return !v.arr->empty();
    case Kind::kObject:
    case Kind::kKwargs:
      return !v.obj->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

// ---- numbers ----

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp10 = std::stoi(sci.substr(epos + 1));
  int k = int(digits.size());
  int n = exp10 + 1;  // position of the decimal point relative to the digits
  if (k <= n && n <= 21) {
    out += digits + std::string(size_t(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(size_t(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += "e";
    out += (n - 1 >= 0 ? "+" : "-");
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

static std::string float_output(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::fmod(d, 1.0) == 0) {
    if (std::fabs(d) >= 1e21) return js_number(d);
    return fmt::format("{:.1f}", d);
  }
  return js_number(d);
}

// ---- strings of values ----

std::string to_output(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return v.b ? "true" : "false";
    case Kind::kInt:
      return std::to_string(v.i);
    case Kind::kFloat:
      return float_output(v.f);
    case Kind::kString:
      return v.s;
    case Kind::kFunction:
      return "[function]";
    default:
      return to_json(v, JsonOptions{}, 0, false);
  }
}

std::string js_string(const Value& v) {
  switch (v.kind) {
    case Kind::kFloat:
      return js_number(v.f);
    case Kind::kArray:
    case Kind::kTuple: {
      // Array.prototype.toString on RuntimeValue objects joins their toString() with ",".
      std::string out;
      for (size_t k = 0; k < v.arr->size(); ++k) {
        if (k) out += ",";
        out += to_output((*v.arr)[k]);
      }
      return out;
    }
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace:
      return "[object Map]";
    default:
      return to_output(v);
  }
}

// ---- JSON ----

std::string json_quote(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (uint32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (cp < 0x20) {
          out += fmt::format("\\u{:04x}", cp);
        } else if (ensure_ascii && cp >= 0x7f) {
          if (cp >= 0x10000) {
            uint32_t c = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          utf8_append(out, cp);
        }
    }
  }
  out += "\"";
  return out;
}

std::string to_json(const Value& v, const JsonOptions& opt, int depth, bool undefined_to_null) {
  // Values can nest without bound (a list appended to itself, or a deep client JSON): refuse
  // before the recursion exhausts the stack.
  if (depth > kMaxToJsonDepth) fail("tojson: the value is nested deeper than {} levels", kMaxToJsonDepth);
  std::string item_sep = ", ", key_sep = ": ";
  if (opt.has_separators) {
    item_sep = opt.item_sep;
    key_sep = opt.key_sep;
  } else if (opt.indent > 0) {
    item_sep = ",";
  }
  switch (v.kind) {
    case Kind::kNull:
      return "null";
    case Kind::kUndefined:
      return undefined_to_null ? "null" : "undefined";
    case Kind::kInt:
      return std::to_string(v.i);
    case Kind::kFloat:
      return std::isfinite(v.f) ? js_number(v.f) : "null";
    case Kind::kBool:
      return v.b ? "true" : "false";
    case Kind::kString:
      return json_quote(v.s, opt.ensure_ascii);
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: {
      std::string ind = opt.indent > 0 ? std::string(size_t(opt.indent), ' ') : "";
      std::string base = "\n";
      for (int d = 0; d < depth; ++d) base += ind;
      std::string child = base + ind;
      std::vector<std::string> core;
      if (v.kind == Kind::kArray) {
        for (const Value& x : *v.arr) core.push_back(to_json(x, opt, depth + 1, undefined_to_null));
        std::string out = "[";
        if (opt.indent > 0 && !core.empty()) {
          out += child;
          for (size_t k = 0; k < core.size(); ++k) out += (k ? item_sep + child : "") + core[k];
          return out + base + "]";
        }
        for (size_t k = 0; k < core.size(); ++k) out += (k ? item_sep : "") + core[k];
        return out + "]";
      }
      auto items = v.obj->items;
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [k, x] : items) {
        std::string e = json_quote(k, opt.ensure_ascii) + key_sep + to_json(x, opt, depth + 1, undefined_to_null);
        core.push_back(opt.indent > 0 ? child + e : e);
      }
      std::string out = "{";
      for (size_t k = 0; k < core.size(); ++k) out += (k ? item_sep : "") + core[k];
      return out + (opt.indent > 0 && !core.empty() ? base + "}" : "}");
    }
    default:
      fail("Cannot convert to JSON: {}", kind_name(v.kind));
  }
}

// ---- equality ----

// JS ToNumber for a string: trimmed, empty -> 0, decimal/hex/Infinity, otherwise NaN.
static double js_to_number(const std::string& str) {
  std::string s = js_trim(str, true, true);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    double r = 0;
    for (size_t k = 2; k < s.size(); ++k) {
      int d = std::isdigit((unsigned char)s[k])                          ? s[k] - '0'
              : (std::tolower(s[k]) >= 'a' && std::tolower(s[k]) <= 'f') ? std::tolower(s[k]) - 'a' + 10
                                                                         : -1;
      if (d < 0) return NAN;
      r = r * 16 + d;
    }
    return r;
  }
  if (s == "Infinity" || s == "+Infinity") return INFINITY;
  if (s == "-Infinity") return -INFINITY;
  for (char c : s)
    if (!(std::isdigit((unsigned char)c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return NAN;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() ? d : NAN;
}

static bool is_ref(const Value& v) { return v.is_array() || v.is_attr_container() || v.kind == Kind::kFunction; }

static const void* ref_ptr(const Value& v) {
  if (v.is_array()) return v.arr.get();
  if (v.is_attr_container()) return v.obj.get();
  return v.fn.get();
}

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) return a.num() == b.num();
  if (is_ref(a) && is_ref(b)) return ref_ptr(a) == ref_ptr(b);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return a.b == b.b;
    case Kind::kString:
      return a.s == b.s;
    default:
      return false;
  }
}

bool loose_equal(const Value& a, const Value& b) {
  bool a_nullish = a.is_null() || a.is_undefined(), b_nullish = b.is_null() || b.is_undefined();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (is_ref(a) && is_ref(b)) return ref_ptr(a) == ref_ptr(b);
  if (is_ref(a)) return loose_equal(Value::string(js_string(a)), b);  // ToPrimitive
  if (is_ref(b)) return loose_equal(a, Value::string(js_string(b)));
  if (a.is_string() && b.is_string()) return a.s == b.s;
  auto to_num = [](const Value& v) { return v.is_string() ? js_to_number(v.s) : v.num(); };
  return to_num(a) == to_num(b);
}

// ---- JSON input ----

// A canonical array index ("0", "17"; no leading zeros, < 2^32 - 1) sorts first in a JS object.
static bool is_array_index(const std::string& k) {
  if (k.empty() || k.size() > 10) return false;
  if (k.size() > 1 && k[0] == '0') return false;
  for (char c : k)
    if (!std::isdigit((unsigned char)c)) return false;
  return std::stoull(k) < 4294967295ull;
}

Value from_json(const nlohmann::ordered_json& j) {
  using nlohmann::ordered_json;
  switch (j.type()) {
    case ordered_json::value_t::null:
      return Value::null();
    case ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? Value::integer(int64_t(u)) : Value::number(double(u));
    }
    case ordered_json::value_t::number_float: {
      double d = j.get<double>();
      if (std::isfinite(d) && std::fmod(d, 1.0) == 0 && std::fabs(d) < 9.2e18) return Value::integer(int64_t(d));
      return Value::number(d);
    }
    case ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case ordered_json::value_t::array: {
      Array a;
      for (const auto& x : j) a.push_back(from_json(x));
      return Value::array(std::move(a));
    }
    case ordered_json::value_t::object: {
      std::vector<std::pair<uint64_t, std::string>> index_keys;
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (is_array_index(it.key())) index_keys.emplace_back(std::stoull(it.key()), it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [n, k] : index_keys) o.set(k, from_json(j.at(k)));
      for (auto it = j.begin(); it != j.end(); ++it)
        if (!is_array_index(it.key())) o.set(it.key(), from_json(it.value()));
      return Value::object(std::move(o));
    }
    default:
      return Value::undefined();
  }
}

// ---- UTF-8 ----

std::vector<uint32_t> utf8_decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    uint32_t cp;
    int len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07;
      len = 4;
    } else {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    if (i + size_t(len) > n) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = (unsigned char)s[i + size_t(k)];
      if ((cc & 0xC0) != 0x80) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogates are written as U+FFFD by Node
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (uint32_t cp : utf8_decode(s)) {
    std::string c;
    utf8_append(c, cp);
    out.push_back(std::move(c));
  }
  return out;
}

bool js_is_space(uint32_t cp) {
  return cp == 0x09 || cp == 0x0A || cp == 0x0B || cp == 0x0C || cp == 0x0D || cp == 0x20 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

// Byte length of the UTF-8 sequence starting with lead byte c (1 for invalid bytes).
static size_t seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

std::string js_trim(const std::string& s, bool start, bool end) {
  size_t b = 0, e = s.size();
  if (start) {
    while (b < e) {
      size_t len = std::min(seq_len((unsigned char)s[b]), e - b);
      auto cps = utf8_decode(s.substr(b, len));
      if (cps.size() != 1 || !js_is_space(cps[0])) break;
      b += len;
    }
  }
  if (end) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && ((unsigned char)s[k] & 0xC0) == 0x80 && e - k < 4) --k;
      auto cps = utf8_decode(s.substr(k, e - k));
      if (cps.size() != 1 || !js_is_space(cps[0])) break;
      e = k;
    }
  }
  return s.substr(b, e - b);
}

size_t utf16_length(const std::string& s) {
  size_t n = 0;
  for (uint32_t cp : utf8_decode(s)) n += cp >= 0x10000 ? 2 : 1;
  return n;
}

// Case mapping: ASCII by hand, everything else through glibc's simple Unicode case mapping
// (towupper_l/towlower_l in C.UTF-8), plus the one-to-many mappings JS applies that matter
// (see docs/chat-templates.md for what is left).
static locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  return loc;
}

static void map_case(std::string& out, uint32_t cp, bool upper) {
  if (cp < 0x80) {
    if (upper && cp >= 'a' && cp <= 'z') cp -= 32;
    if (!upper && cp >= 'A' && cp <= 'Z') cp += 32;
    out += char(cp);
    return;
  }
  if (upper && cp == 0xDF) {  // sharp s
    out += "SS";
    return;
  }
  if (!upper && cp == 0x130) {  // dotted capital I -> i + combining dot above
    out += "i";
    utf8_append(out, 0x307);
    return;
  }
  if (locale_t loc = utf8_locale()) {
    wint_t m = upper ? towupper_l(wint_t(cp), loc) : towlower_l(wint_t(cp), loc);
    utf8_append(out, uint32_t(m));
    return;
  }
  utf8_append(out, cp);
}

std::string js_upper(const std::string& s) {
  std::string out;
  for (uint32_t cp : utf8_decode(s)) map_case(out, cp, true);
  return out;
}

std::string js_lower(const std::string& s) {
  std::string out;
  for (uint32_t cp : utf8_decode(s)) map_case(out, cp, false);
  return out;
}

}  // namespace mmx::jinja
