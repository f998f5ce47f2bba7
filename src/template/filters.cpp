// Filters (`x | name` and `x | name(args)`) and tests (`x is name`), dispatched on the operand's
// type exactly as @huggingface/jinja does: a filter that the reference lacks for a type is an
// error here too (e.g. `none | string`, `"a" | first`), so templates fail the same way.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "template/interpreter.h"

namespace mmx::jinja {

bool run_test(const std::string& name, const Value& v, const Value* arg) {
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "callable") return v.kind == Kind::kFunction;
  if (name == "odd" || name == "even") {
    if (!v.is_int()) throw_eval(fmt::format("cannot {} on {}", name, kind_name(v.kind)));
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_numeric();
  if (name == "integer") return v.is_int();
  if (name == "iterable") return v.kind == Kind::kArray || v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "lower" || name == "upper") {
    return v.is_string() && v.s == (name == "lower" ? js_lower(v.s) : js_upper(v.s));
  }
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq") {
    if (!arg) throw_eval(fmt::format("test {} needs an argument", name));
    return strict_equal(v, *arg);
  }
  throw_eval(fmt::format("Unknown test: {}", name));
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_null() || b.is_null())
    throw_eval(fmt::format("Cannot compare {} with {}", kind_name(a.kind), kind_name(b.kind)));
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined())
    throw_eval(fmt::format("Cannot compare {} with {}", kind_name(a.kind), kind_name(b.kind)));
  bool an = a.is_numeric() || a.kind == Kind::kBool, bn = b.is_numeric() || b.kind == Kind::kBool;
  if (an && bn) return a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
  if (a.kind != b.kind)
    throw_eval(fmt::format("Cannot compare different types: {} and {}", kind_name(a.kind), kind_name(b.kind)));
  if (a.is_string()) {
    // JS compares UTF-16 code units; for BMP text that is code point order.
    std::string x = case_sensitive ? a.s : js_lower(a.s), y = case_sensitive ? b.s : js_lower(b.s);
    auto cx = utf8_decode(x), cy = utf8_decode(y);
    return cx < cy ? -1 : cx > cy ? 1 : 0;
  }
  throw_eval(fmt::format("Cannot compare type: {}", kind_name(a.kind)));
}

// getAttributeValue: "a.b.0" paths through dicts and lists.
static Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attr_container()) {
      const Value* x = v.obj->find(part);
      v = x ? *x : Value::undefined();
    } else if (v.is_array()) {
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || size_t(idx) >= v.arr->size()) return Value::undefined();
      v = (*v.arr)[size_t(idx)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// JS parseInt(s, 10) / parseFloat(s); nullopt for NaN.
static std::optional<double> parse_number(const std::string& str, bool is_int) {
  std::string s = js_trim(str, true, false);
  size_t i = 0;
  std::string t;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) t += s[i++];
  if (!is_int && s.compare(i, 8, "Infinity") == 0) return t == "-" ? -INFINITY : INFINITY;
  size_t digits = 0;
  while (i < s.size() && std::isdigit((unsigned char)s[i])) t += s[i++], ++digits;
  if (!is_int) {
    if (i < s.size() && s[i] == '.') {
      t += s[i++];
      while (i < s.size() && std::isdigit((unsigned char)s[i])) t += s[i++], ++digits;
    }
    if (digits && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      size_t j = i + 1;
      std::string e = "e";
      if (j < s.size() && (s[j] == '+' || s[j] == '-')) e += s[j++];
      if (j < s.size() && std::isdigit((unsigned char)s[j])) {
        while (j < s.size() && std::isdigit((unsigned char)s[j])) e += s[j++];
        t += e;
      }
    }
  }
  if (!digits) return std::nullopt;
  return std::strtod(t.c_str(), nullptr);
}

static std::string js_join(const Array& a, const std::string& sep) {
  std::string out;
  for (size_t k = 0; k < a.size(); ++k) {
    if (k) out += sep;
    if (!a[k].is_null() && !a[k].is_undefined()) out += js_string(a[k]);
  }
  return out;
}

static Value json_filter(const Value& v, const Object& kwargs) {
  JsonOptions opt;
  auto get = [&](const char* k) {
    const Value* x = kwargs.find(k);
    return x ? *x : Value::undefined();
  };
  Value indent = get("indent"), ea = get("ensure_ascii"), sk = get("sort_keys"), sep = get("separators");
  if (!indent.is_undefined() && !indent.is_null()) {
    if (!indent.is_int()) throw_eval("If set, indent must be a number");
    opt.indent = int(indent.i);
  }
  if (!ea.is_undefined()) {
    if (ea.kind != Kind::kBool) throw_eval("If set, ensure_ascii must be a boolean");
    opt.ensure_ascii = ea.b;
  }
  if (!sk.is_undefined()) {
    if (sk.kind != Kind::kBool) throw_eval("If set, sort_keys must be a boolean");
    opt.sort_keys = sk.b;
  }
  if (sep.is_array()) {
    if (sep.arr->size() != 2 || !(*sep.arr)[0].is_string() || !(*sep.arr)[1].is_string())
      throw_eval("separators must be a tuple of two strings");
    opt.has_separators = true;
    opt.item_sep = (*sep.arr)[0].s;
    opt.key_sep = (*sep.arr)[1].s;
  } else if (!sep.is_undefined() && !sep.is_null()) {
    throw_eval("If set, separators must be a tuple of two strings");
  }
  return Value::string(to_json(v, opt));
}

static std::string indent_lines(const std::string& s, const std::string& ind, bool first, bool blank) {
  std::string out;
  size_t start = 0, line = 0;
  while (true) {
    size_t nl = s.find('\n', start);
    std::string x = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line) out += "\n";
    out += ((!first && line == 0) || (!blank && x.empty())) ? x : ind + x;
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return out;
}

static Value sort_array(const Array& a, bool reverse, bool cs, const Value& attr) {
  Array out = a;
  auto key = [&](const Value& x) {
    if (attr.is_null()) return x;
    return attribute_path(x, attr.is_int() ? std::to_string(attr.i) : attr.s);
  };
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    int r = compare_values(key(x), key(y), cs);
    return (reverse ? -r : r) < 0;
  });
  return Value::array(std::move(out));
}

Value Interpreter::apply_filter(const Value& v, const Node* f, const EnvPtr& env) {
  charge(value_size(v));
  if (f->kind == NodeKind::kIdent) {
    const std::string& name = f->str;
    if (name == "safe") return v;
    if (name == "tojson") return Value::string(to_json(v, JsonOptions{}));
    if (v.is_array()) {
      const Array& a = *v.arr;
      if (name == "list") return v;
      if (name == "first") return a.empty() ? Value::undefined() : a.front();
      if (name == "last") return a.empty() ? Value::undefined() : a.back();
      if (name == "length") return Value::integer(int64_t(a.size()));
      if (name == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
      if (name == "sort") return sort_array(a, false, false, Value::null());
      if (name == "join") return Value::string(js_join(a, ""));
      if (name == "string") return Value::string(to_json(v, JsonOptions{}, 0, false));
      if (name == "unique") {
        Array out;
        for (const Value& x : a)
          if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return strict_equal(x, y); }))
            out.push_back(x);
        return Value::array(std::move(out));
      }
      throw_eval(fmt::format("Unknown ArrayValue filter: {}", name));
    }
    if (v.is_string()) {
      if (name == "length" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        Value m = *builtin_member(v, name);
        if (m.kind != Kind::kFunction) return m;
        std::vector<Value> none;
        return (*m.fn)(none, env);
      }
      if (name == "trim") return Value::string(js_trim(v.s, true, true));
      if (name == "indent") return Value::string(indent_lines(v.s, "    ", false, false));
      if (name == "join" || name == "string") return v;
      if (name == "int") {
        auto d = parse_number(v.s, true);
        return d ? int_or_float(std::trunc(*d)) : Value::integer(0);
      }
      if (name == "float") return Value::number(parse_number(v.s, false).value_or(0.0));
      throw_eval(fmt::format("Unknown StringValue filter: {}", name));
    }
    if (v.is_numeric()) {
      if (name == "abs") return v.is_int() ? Value::integer(std::llabs(v.i)) : Value::number(std::fabs(v.f));
      if (name == "int") return int_or_float(std::floor(v.num()));
      if (name == "float") return Value::number(v.num());
      if (name == "string") return Value::string(to_output(v));
      throw_eval(fmt::format("Unknown NumericValue filter: {}", name));
    }
    if (v.is_object()) {
      if (name == "items" || name == "length") {
        if (name == "length") return Value::integer(int64_t(v.obj->items.size()));
      }
      if (auto m = builtin_member(v, name)) {
        if (m->kind != Kind::kFunction) return *m;
        std::vector<Value> none;
        return (*m->fn)(none, env);
      }
      throw_eval(fmt::format("Unknown ObjectValue filter: {}", name));
    }
    if (v.kind == Kind::kBool) {
      if (name == "bool") return v;
      if (name == "int") return Value::integer(v.b ? 1 : 0);
      if (name == "float") return Value::number(v.b ? 1.0 : 0.0);
      if (name == "string") return Value::string(v.b ? "true" : "false");
      throw_eval(fmt::format("Unknown BooleanValue filter: {}", name));
    }
    throw_eval(fmt::format("Cannot apply filter \"{}\" to type: {}", name, kind_name(v.kind)));
  }
  if (f->kind != NodeKind::kCall || f->a->kind != NodeKind::kIdent) throw_eval("Unknown filter");
  const std::string& name = f->a->str;
  const auto& arg_nodes = f->list;
  std::vector<Value> args;
  Object kwargs;
  auto eval_all = [&] { eval_args(arg_nodes, env, args, kwargs); };
  auto pick = [&](size_t i, const char* k, Value def) {
    if (i < args.size()) return args[i];
    if (const Value* x = kwargs.find(k)) return *x;
    return def;
  };
  if (name == "tojson") {
    eval_all();
    return json_filter(v, kwargs);
  }
  if (name == "join") {
    Array items;
    if (v.is_string()) {
      for (auto& ch : utf8_chars(v.s)) items.push_back(Value::string(ch));
    } else if (v.is_array()) {
      items = *v.arr;
    } else {
      throw_eval(fmt::format("Cannot apply filter \"{}\" to type: {}", name, kind_name(v.kind)));
    }
    eval_all();
    Value sep = pick(0, "separator", Value::string(""));
    if (!sep.is_string()) throw_eval("separator must be a string");
    return Value::string(js_join(items, sep.s));
  }
  if (name == "int" || name == "float") {
    eval_all();
    bool is_int = name == "int";
    Value def = pick(0, "default", is_int ? Value::integer(0) : Value::number(0.0));
    if (v.is_string()) {
      auto d = parse_number(v.s, is_int);
      if (!d) return def;
      return is_int ? int_or_float(std::trunc(*d)) : Value::number(*d);
    }
    if (v.is_numeric()) return v;
    if (v.kind == Kind::kBool) return is_int ? Value::integer(v.b) : Value::number(v.b ? 1.0 : 0.0);
    throw_eval(fmt::format("Cannot apply filter \"{}\" to type: {}", name, kind_name(v.kind)));
  }
  if (name == "default") {
    eval_all();
    Value def = args.size() > 0 ? args[0] : Value::string("");
    Value boolean = args.size() > 1 ? args[1] : pick(99, "boolean", Value::boolean(false));
    if (boolean.kind != Kind::kBool) throw_eval("`default` filter flag must be a boolean");
    if (v.is_undefined() || (boolean.b && !truthy(v))) return def;
    return v;
  }
  if (v.is_array()) {
    const Array& a = *v.arr;
    if (name == "sort") {
      eval_all();
      Value rev = pick(0, "reverse", Value::boolean(false));
      if (rev.kind != Kind::kBool) throw_eval("reverse must be a boolean");
      Value cs = pick(1, "case_sensitive", Value::boolean(false));
      if (cs.kind != Kind::kBool) throw_eval("case_sensitive must be a boolean");
      Value attr = pick(2, "attribute", Value::null());
      if (!attr.is_string() && !attr.is_int() && !attr.is_null())
        throw_eval("attribute must be a string, integer, or null");
      return sort_array(a, rev.b, cs.b, attr);
    }
    if (name == "selectattr" || name == "rejectattr") {
      bool select = name == "selectattr";
      for (const Value& x : a)
        if (!x.is_attr_container()) throw_eval(fmt::format("`{}` can only be applied to array of objects", name));
      for (const auto& n : arg_nodes)
        if (n->kind != NodeKind::kString) throw_eval(fmt::format("arguments of `{}` must be strings", name));
      std::vector<Value> sargs;
      for (const auto& n : arg_nodes) sargs.push_back(eval(n.get(), env));
      if (sargs.empty()) throw_eval(fmt::format("`{}` needs an attribute name", name));
      Array out;
      for (const Value& item : a) {
        const Value* attr = item.obj->find(sargs[0].s);
        bool r = false;
        if (attr)
          r = sargs.size() > 1 ? run_test(sargs[1].s, *attr, sargs.size() > 2 ? &sargs[2] : nullptr) : truthy(*attr);
        if (r == select) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (name == "map") {
      eval_all();
      const Value* attr = kwargs.find("attribute");
      if (!attr) throw_eval("`map` expressions without `attribute` set are not currently supported.");
      if (!attr->is_string()) throw_eval("attribute must be a string");
      const Value* def = kwargs.find("default");
      Array out;
      for (const Value& item : a) {
        if (!item.is_attr_container()) throw_eval("items in map must be an object");
        Value x = attribute_path(item, attr->s);
        out.push_back(x.is_undefined() && def ? *def : x);
      }
      return Value::array(std::move(out));
    }
    throw_eval(fmt::format("Unknown ArrayValue filter: {}", name));
  }
  if (v.is_string()) {
    if (name == "indent") {
      eval_all();
      Value width = pick(0, "width", Value::integer(4));
      if (!width.is_int()) throw_eval("width must be a number");
      Value first = pick(1, "first", Value::boolean(false)), blank = pick(2, "blank", Value::boolean(false));
      return Value::string(
          indent_lines(v.s, std::string(size_t(std::max<int64_t>(width.i, 0)), ' '), truthy(first), truthy(blank)));
    }
    if (name == "replace") {
      eval_all();
      args.push_back(Value::object(kwargs, Kind::kKwargs));
      Value m = *builtin_member(v, "replace");
      return (*m.fn)(args, env);
    }
    throw_eval(fmt::format("Unknown StringValue filter: {}", name));
  }
  if (v.is_object()) {
    auto m = builtin_member(v, name);
    if (m && m->kind == Kind::kFunction) {
      eval_all();
      if (!kwargs.items.empty()) args.push_back(Value::object(kwargs, Kind::kKwargs));
      return (*m->fn)(args, env);
    }
    throw_eval(fmt::format("Unknown ObjectValue filter: {}", name));
  }
  throw_eval(fmt::format("Cannot apply filter \"{}\" to type: {}", name, kind_name(v.kind)));
}

}  // namespace mmx::jinja
