// Methods reachable with `x.name(...)`: str (upper, lower, strip, title, capitalize, rstrip,
// lstrip, startswith, endswith, split, replace, length), dict (get, items, keys, values,
// dictsort), list (length); and the globals (namespace, true/false/none, raise_exception, range,
// strftime_now). Semantics are the reference's, e.g. `strip('\n')` ignores its argument.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "base/error.h"
#include "template/interpreter.h"

namespace mmx::jinja {

std::vector<size_t> slice_indices(size_t len_u, std::optional<int64_t> start_o, std::optional<int64_t> stop_o,
                                  std::optional<int64_t> step_o) {
  int64_t len = int64_t(len_u), step = step_o.value_or(1), start, stop;
  int dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  if (dir >= 0) {
    start = start_o.value_or(0);
    start = start < 0 ? std::max(len + start, int64_t(0)) : std::min(start, len);
    stop = stop_o.value_or(len);
    stop = stop < 0 ? std::max(len + stop, int64_t(0)) : std::min(stop, len);
  } else {
    start = start_o.value_or(len - 1);
    start = start < 0 ? std::max(len + start, int64_t(-1)) : std::min(start, len - 1);
    stop = stop_o.value_or(-1);
    stop = stop < -1 ? std::max(len + stop, int64_t(-1)) : std::min(stop, len - 1);
  }
  std::vector<size_t> out;
  if (dir == 0) return out;
  for (int64_t i = start; dir * i < dir * stop; i += step) out.push_back(size_t(i));
  return out;
}

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Python's str.title as the reference writes it: /\b\w/g upper-cased (ASCII word characters).
std::string title_case(const std::string& s) {
  std::string out = s;
  auto is_w = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
  for (size_t i = 0; i < out.size(); ++i)
    if (is_w(out[i]) && (i == 0 || !is_w(out[i - 1]))) out[i] = char(std::toupper((unsigned char)out[i]));
  return out;
}

Value prefix_test(const std::vector<Value>& args, const std::string& self, bool start, const char* name) {
  if (args.empty()) throw_eval(fmt::format("{}() requires at least one argument", name));
  auto check = [&](const std::string& p) { return start ? starts_with(self, p) : ends_with(self, p); };
  const Value& p = args[0];
  if (p.is_string()) return Value::boolean(check(p.s));
  if (p.is_array()) {
    for (const Value& x : *p.arr) {
      if (!x.is_string()) throw_eval(fmt::format("{}() tuple elements must be strings", name));
      if (check(x.s)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  throw_eval(fmt::format("{}() argument must be a string or tuple of strings", name));
}

Value split(const std::vector<Value>& args, const std::string& self) {
  Value sep = args.size() > 0 ? args[0] : Value::null();
  if (!sep.is_string() && !sep.is_null()) throw_eval("sep argument must be a string or null");
  Value maxsplit = args.size() > 1 ? args[1] : Value::integer(-1);
  if (!maxsplit.is_int()) throw_eval("maxsplit argument must be a number");
  Array out;
  if (sep.is_null()) {
    // Runs of non-whitespace (JS /\S+/g), found in one pass over the code points.
    std::string text = js_trim(self, true, false);
    std::vector<std::pair<size_t, bool>> cps;  // (byte offset, is whitespace) per code point
    for (size_t i = 0; i < text.size();) {
      size_t len = 1;
      while (i + len < text.size() && ((unsigned char)text[i + len] & 0xC0) == 0x80 && len < 4) ++len;
      auto cp = utf8_decode(text.substr(i, len));
      cps.emplace_back(i, cp.size() == 1 && js_is_space(cp[0]));
      i += len;
    }
    cps.emplace_back(text.size(), true);  // sentinel
    for (size_t k = 0; k + 1 < cps.size();) {
      if (cps[k].second) {
        ++k;
        continue;
      }
      size_t e = k;
      while (!cps[e].second) ++e;
      size_t b0 = cps[k].first, b1 = cps[e].first;
      if (maxsplit.i != -1 && int64_t(out.size()) >= maxsplit.i) {
        out.push_back(Value::string(text.substr(b0)));
        break;
      }
      out.push_back(Value::string(text.substr(b0, b1 - b0)));
      k = e;
    }
    return Value::array(std::move(out));
  }
  if (sep.s.empty()) throw_eval("empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t k = self.find(sep.s, start);
    if (k == std::string::npos) break;
    parts.push_back(self.substr(start, k - start));
    start = k + sep.s.size();
  }
  parts.push_back(self.substr(start));
  if (maxsplit.i != -1 && int64_t(parts.size()) > maxsplit.i) {
    std::string rest;
    for (size_t k = size_t(maxsplit.i); k < parts.size(); ++k) rest += (k > size_t(maxsplit.i) ? sep.s : "") + parts[k];
    parts.resize(size_t(maxsplit.i));
    parts.push_back(rest);
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

Value replace(const std::vector<Value>& args, const std::string& self) {
  if (args.size() < 2) throw_eval("replace() requires at least two arguments");
  if (!args[0].is_string() || !args[1].is_string()) throw_eval("replace() arguments must be strings");
  Value count = Value::null();
  if (args.size() > 2) {
    if (args[2].kind == Kind::kKwargs) {
      const Value* c = args[2].obj->find("count");
      count = c ? *c : Value::null();
    } else {
      count = args[2];
    }
  }
  if (!count.is_int() && !count.is_null()) throw_eval("replace() count argument must be a number or null");
  const std::string &from = args[0].s, &to = args[1].s;
  if (count.is_int() && count.i == 0) return Value::string(self);
  int64_t remaining = (count.is_null() || count.i < 0) ? INT64_MAX : count.i;
  std::string out;
  if (from.empty()) {  // /(?=)/gu: an empty match before every code point and at the end
    for (const std::string& ch : utf8_chars(self)) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      out += ch;
    }
    if (remaining > 0) out += to;
    return Value::string(out);
  }
  size_t start = 0;
  while (remaining > 0) {
    size_t k = self.find(from, start);
    if (k == std::string::npos) break;
    out += self.substr(start, k - start) + to;
    start = k + from.size();
    --remaining;
  }
  out += self.substr(start);
  return Value::string(out);
}

Value dictsort(const Value& self, std::vector<Value> args) {
  Object kwargs;
  std::vector<Value> pos;
  for (auto& a : args) {
    if (a.kind == Kind::kKwargs)
      kwargs = *a.obj;
    else
      pos.push_back(a);
  }
  auto pick = [&](size_t i, const char* name, Value def) {
    if (i < pos.size()) return pos[i];
    if (const Value* v = kwargs.find(name)) return *v;
    return def;
  };
  Value cs = pick(0, "case_sensitive", Value::boolean(false));
  if (cs.kind != Kind::kBool) throw_eval("case_sensitive must be a boolean");
  Value by = pick(1, "by", Value::string("key"));
  if (!by.is_string()) throw_eval("by must be a string");
  if (by.s != "key" && by.s != "value") throw_eval("by must be either 'key' or 'value'");
  Value rev = pick(2, "reverse", Value::boolean(false));
  if (rev.kind != Kind::kBool) throw_eval("reverse must be a boolean");
  Array items;
  for (const auto& [k, v] : self.obj->items) items.push_back(Value::array({Value::string(k), v}));
  size_t idx = by.s == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values((*a.arr)[idx], (*b.arr)[idx], cs.b);
    return (rev.b ? -r : r) < 0;
  });
  return Value::array(std::move(items));
}

}  // namespace

std::optional<Value> builtin_member(const Value& self, const std::string& name) {
  if (self.is_string()) {
    const std::string s = self.s;
    auto fn = [](auto f) { return Value::function([f](std::vector<Value>& args, const EnvPtr&) { return f(args); }); };
    if (name == "length") return Value::integer(int64_t(utf16_length(s)));
    if (name == "upper") return fn([s](auto&) { return Value::string(js_upper(s)); });
    if (name == "lower") return fn([s](auto&) { return Value::string(js_lower(s)); });
    if (name == "strip") return fn([s](auto&) { return Value::string(js_trim(s, true, true)); });
    if (name == "rstrip") return fn([s](auto&) { return Value::string(js_trim(s, false, true)); });
    if (name == "lstrip") return fn([s](auto&) { return Value::string(js_trim(s, true, false)); });
    if (name == "title") return fn([s](auto&) { return Value::string(title_case(s)); });
    if (name == "capitalize")
      return fn([s](auto&) {
        auto chars = utf8_chars(s);
        if (chars.empty()) return Value::string("");
        std::string out = js_upper(chars[0]);
        for (size_t k = 1; k < chars.size(); ++k) out += chars[k];
        return Value::string(out);
      });
    if (name == "startswith") return fn([s](auto& a) { return prefix_test(a, s, true, "startswith"); });
    if (name == "endswith") return fn([s](auto& a) { return prefix_test(a, s, false, "endswith"); });
    if (name == "split") return fn([s](auto& a) { return split(a, s); });
    if (name == "replace") return fn([s](auto& a) { return replace(a, s); });
    return std::nullopt;
  }
  if (self.is_array()) {
    if (name == "length") return Value::integer(int64_t(self.arr->size()));
    return std::nullopt;
  }
  if (self.is_object()) {
    Value me = self;
    auto fn = [](auto f) { return Value::function([f](std::vector<Value>& args, const EnvPtr&) { return f(args); }); };
    if (name == "get")
      return fn([me](std::vector<Value>& a) {
        if (a.empty() || !a[0].is_string())
          throw_eval(
              fmt::format("Object key must be a string: got {}", a.empty() ? "UndefinedValue" : kind_name(a[0].kind)));
        if (const Value* v = me.obj->find(a[0].s)) return *v;
        return a.size() > 1 ? a[1] : Value::null();
      });
    if (name == "items")
      return fn([me](auto&) {
        Array out;
        for (const auto& [k, v] : me.obj->items) out.push_back(Value::array({Value::string(k), v}));
        return Value::array(std::move(out));
      });
    if (name == "keys")
      return fn([me](auto&) {
        Array out;
        for (const auto& [k, v] : me.obj->items) out.push_back(Value::string(k));
        return Value::array(std::move(out));
      });
    if (name == "values")
      return fn([me](auto&) {
        Array out;
        for (const auto& [k, v] : me.obj->items) out.push_back(v);
        return Value::array(std::move(out));
      });
    if (name == "dictsort") return fn([me](std::vector<Value>& a) { return dictsort(me, a); });
  }
  return std::nullopt;
}

static std::string strftime_js(const std::string& fmt_s) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  static const char* months[] = {"January", "February", "March",     "April",   "May",      "June",
                                 "July",    "August",   "September", "October", "November", "December"};
  std::string out;
  for (size_t i = 0; i < fmt_s.size(); ++i) {
    if (fmt_s[i] == '%' && i + 1 < fmt_s.size() && std::string("YmdbBHM%").find(fmt_s[i + 1]) != std::string::npos) {
      char c = fmt_s[++i];
      switch (c) {
        case 'Y':
          out += std::to_string(tm.tm_year + 1900);
          break;
        case 'm':
          out += fmt::format("{:02d}", tm.tm_mon + 1);
          break;
        case 'd':
          out += fmt::format("{:02d}", tm.tm_mday);
          break;
        case 'b':
          out += std::string(months[tm.tm_mon]).substr(0, 3);
          break;
        case 'B':
          out += months[tm.tm_mon];
          break;
        case 'H':
          out += fmt::format("{:02d}", tm.tm_hour);
          break;
        case 'M':
          out += fmt::format("{:02d}", tm.tm_min);
          break;
        default:
          out += '%';
      }
    } else {
      out += fmt_s[i];
    }
  }
  return out;
}

void install_globals(Env& env) {
  env.set("namespace", Value::function([](std::vector<Value>& args, const EnvPtr&) {
            std::vector<Value> pos = args;
            Object kwargs;
            if (!pos.empty() && pos.back().kind == Kind::kKwargs) {
              kwargs = *pos.back().obj;
              pos.pop_back();
            }
            if (pos.size() > 1) throw_eval(fmt::format("namespace expected at most 1 argument, got {}", pos.size()));
            Object entries;
            if (pos.size() == 1) {
              const Value& src = pos[0];
              if (src.is_object()) {
                for (const auto& [k, v] : src.obj->items) entries.set(k, v);
              } else if (src.is_array()) {
                for (const Value& pair : *src.arr) {
                  std::vector<Value> kv;
                  if (pair.is_array())
                    kv = *pair.arr;
                  else if (pair.is_string())
                    for (auto& ch : utf8_chars(pair.s)) kv.push_back(Value::string(ch));
                  if (kv.size() != 2) throw_eval("namespace expected an object or an iterable of [key, value] pairs");
                  if (!kv[0].is_string()) throw_eval("namespace keys must be strings");
                  entries.set(kv[0].s, kv[1]);
                }
              } else {
                throw_eval(fmt::format("'{}' object is not iterable", kind_name(src.kind)));
              }
            }
            for (const auto& [k, v] : kwargs.items) entries.set(k, v);
            return Value::object(std::move(entries), Kind::kNamespace);
          }));
  env.set("true", Value::boolean(true));
  env.set("false", Value::boolean(false));
  env.set("none", Value::null());
  env.set("True", Value::boolean(true));
  env.set("False", Value::boolean(false));
  env.set("None", Value::null());
  env.set("raise_exception", Value::function([](std::vector<Value>& args, const EnvPtr&) -> Value {
            EvalError e;
            e.msg = args.empty() || args[0].is_undefined() ? "" : js_string(args[0]);
            e.raised = true;
            throw e;
          }));
  env.set("range", Value::function([](std::vector<Value>& args, const EnvPtr&) {
            if (args.empty() || !args[0].is_numeric()) throw_eval("range() expects numeric arguments");
            double start = args[0].num(), stop, step = args.size() > 2 && args[2].is_numeric() ? args[2].num() : 1;
            if (args.size() > 1 && args[1].is_numeric()) {
              stop = args[1].num();
            } else {
              stop = start;
              start = 0;
            }
            if (step == 0) throw_eval("range() step must not be zero");
            if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step) ||
                std::ceil((stop - start) / step) > double(kMaxRangeLength))
              throw_eval(fmt::format("range() would build more than {} elements", kMaxRangeLength));
            Array out;
            for (double i = start; step > 0 ? i < stop : i > stop; i += step)
              out.push_back(std::fmod(i, 1.0) == 0 ? Value::integer(int64_t(i)) : Value::number(i));
            return Value::array(std::move(out));
          }));
  env.set("strftime_now", Value::function([](std::vector<Value>& args, const EnvPtr&) {
            return Value::string(strftime_js(args.empty() ? "" : js_string(args[0])));
          }));
}

}  // namespace mmx::jinja
