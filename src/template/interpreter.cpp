// The evaluator: statements (if/for/set/macro/call/filter blocks) and expressions (operators,
// member access, calls), with @huggingface/jinja's semantics (see value.h for the JS-isms).
// Filters and tests live in filters.cpp; str/dict methods and globals in methods.cpp.
#include "template/interpreter.h"

#include <cmath>

#include "base/error.h"

namespace mmx::jinja {

namespace {
struct BreakSignal {};
struct ContinueSignal {};

// Does a macro body read `kwargs` / `varargs`? (Jinja then accepts extra keyword/positional args.)
void find_special(const Node* n, bool& kw, bool& va) {
  if (!n) return;
  if (n->kind == NodeKind::kIdent) {
    if (n->str == "kwargs") kw = true;
    if (n->str == "varargs") va = true;
    return;
  }
  if (n->kind == NodeKind::kMember && !n->flag) return find_special(n->a.get(), kw, va);
  if (n->kind == NodeKind::kFilter) {
    find_special(n->a.get(), kw, va);
    if (n->b->kind == NodeKind::kCall)
      for (const auto& x : n->b->list) find_special(x.get(), kw, va);
    return;
  }
  if (n->kind == NodeKind::kSet && n->a->kind == NodeKind::kIdent) {
    find_special(n->b.get(), kw, va);
    for (const auto& x : n->body) find_special(x.get(), kw, va);
    return;
  }
  find_special(n->a.get(), kw, va);
  find_special(n->b.get(), kw, va);
  find_special(n->c.get(), kw, va);
  for (const auto& x : n->list) find_special(x.get(), kw, va);
  for (const auto& x : n->body) find_special(x.get(), kw, va);
  for (const auto& x : n->alt) find_special(x.get(), kw, va);
  for (const auto& [k, v] : n->pairs) {
    find_special(k.get(), kw, va);
    find_special(v.get(), kw, va);
  }
}
}  // namespace

[[noreturn]] void throw_eval(std::string msg) { throw EvalError{std::move(msg)}; }

// A JS number that the reference keeps as an IntegerValue: int64 when it fits, else a double
// (prints the same for |x| >= 1e21, Infinity and NaN; see docs/chat-templates.md).
Value int_or_float(double x) {
  if (std::isfinite(x) && std::fabs(x) < 9.2e18) return Value::integer(int64_t(x));
  return Value::number(x);
}

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) return it->second;
  }
  return Value::undefined();
}

Value Interpreter::eval(const Node* n, const EnvPtr& env) {
  if (!n) return Value::undefined();
  // Bounded recursion (runaway recursive macros): the reference hits the JS stack limit there;
  // we measure the C++ stack used since render() began, so the limit holds in any build mode.
  char here;
  auto at = reinterpret_cast<uintptr_t>(&here);
  if (!stack_base_) stack_base_ = at;
  if (stack_base_ > at && stack_base_ - at > kStackBudget)
    throw EvalError{"Maximum call stack size exceeded", false, true, n->pos};
  try {
    Value v = eval_inner(n, env);
    charge(kNodeCost + value_size(v));
    return v;
  } catch (EvalError& e) {
    if (!e.located) {
      e.located = true;
      e.pos = n->pos;
    }
    throw;
  } catch (const std::exception& e) {  // mmx::Error from to_json, std:: conversions
    throw EvalError{e.what(), false, true, n->pos};
  }
}

int64_t value_size(const Value& v) {
  if (v.is_string()) return int64_t(v.s.size());
  if (v.is_array()) return int64_t(v.arr->size());
  if (v.obj) return int64_t(v.obj->items.size());
  return 0;
}

void Interpreter::charge(int64_t units) {
  work_ += units;
  if (work_ > kWorkBudget)
    throw_eval(fmt::format("the template did more than {} units of work (a loop or value that grows without bound?)",
                           kWorkBudget));
}

std::string Interpreter::eval_block(const std::vector<NodePtr>& body, const EnvPtr& env) {
  std::string out;
  for (const auto& st : body) {
    if (st->kind == NodeKind::kString) {  // text: the hot path
      charge(int64_t(st->str.size()));
      out += st->str;
      continue;
    }
    Value v = eval(st.get(), env);
    if (!v.is_null() && !v.is_undefined()) {
      try {
        out += to_output(v);
      } catch (const mmx::Error& e) {
        throw EvalError{e.what(), false, true, st->pos};
      }
    }
  }
  return out;
}

void Interpreter::eval_args(const std::vector<NodePtr>& args, const EnvPtr& env, std::vector<Value>& pos,
                            Object& kwargs) {
  for (const auto& a : args) {
    if (a->kind == NodeKind::kSpread) {
      Value v = eval(a->a.get(), env);
      if (!v.is_array()) throw_eval(fmt::format("Cannot unpack non-iterable type: {}", kind_name(v.kind)));
      for (const Value& x : *v.arr) pos.push_back(x);
    } else if (a->kind != NodeKind::kKwarg && a->kind != NodeKind::kKwSpread) {
      pos.push_back(eval(a.get(), env));
    }
  }
  auto add = [&](const std::string& k, Value v) {
    if (kwargs.find(k)) throw_eval(fmt::format("Got multiple values for keyword argument '{}'", k));
    kwargs.set(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::kKwarg) {
      add(a->str, eval(a->a.get(), env));
    } else if (a->kind == NodeKind::kKwSpread) {
      Value v = eval(a->a.get(), env);
      if (!v.is_object()) throw_eval(fmt::format("Argument after ** must be a mapping, not {}", kind_name(v.kind)));
      for (const auto& [k, x] : v.obj->items) add(k, x);
    }
  }
}

Value Interpreter::call_value(const Value& fn, std::vector<Value>& args, const EnvPtr& env) {
  if (fn.kind != Kind::kFunction)
    throw_eval(fmt::format("Cannot call something that is not a function: got {}", kind_name(fn.kind)));
  return (*fn.fn)(args, env);
}

Value Interpreter::eval_inner(const Node* n, const EnvPtr& env) {
  switch (n->kind) {
    case NodeKind::kString:
      return Value::string(n->str);
    case NodeKind::kInt:
      return Value::integer(n->ival);
    case NodeKind::kFloat:
      return Value::number(n->fval);
    case NodeKind::kIdent:
      return env->lookup(n->str);
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      Array a;
      for (const auto& x : n->list) a.push_back(eval(x.get(), env));
      return Value::array(std::move(a), n->kind == NodeKind::kTuple ? Kind::kTuple : Kind::kArray);
    }
    case NodeKind::kObject: {
      Object o;
      for (const auto& [k, v] : n->pairs) {
        Value key = eval(k.get(), env);
        if (!key.is_string()) throw_eval(fmt::format("Object keys must be strings: got {}", kind_name(key.kind)));
        o.set(key.s, eval(v.get(), env));
      }
      return Value::object(std::move(o));
    }
    case NodeKind::kMember:
      return eval_member(n, env);
    case NodeKind::kCall:
      return eval_call(n, env);
    case NodeKind::kUnary: {
      Value v = eval(n->a.get(), env);
      if (n->str == "not") return Value::boolean(!truthy(v));
      if (v.is_numeric() || v.kind == Kind::kBool) {
        double sign = n->str == "-" ? -1 : 1;
        if (v.kind == Kind::kFloat) return Value::number(sign * v.f);
        return Value::integer(int64_t(sign) * (v.kind == Kind::kBool ? int64_t(v.b) : v.i));
      }
      throw_eval(fmt::format("Unknown operator \"{}\" for {}", n->str, kind_name(v.kind)));
    }
    case NodeKind::kBinary:
      return eval_binary(n, env);
    case NodeKind::kFilter:
      return apply_filter(eval(n->a.get(), env), n->b.get(), env);
    case NodeKind::kTest: {
      Value v = eval(n->a.get(), env);
      bool r = run_test(n->str, v, nullptr);
      return Value::boolean(n->flag ? !r : r);
    }
    case NodeKind::kSelect: {
      if (!truthy(eval(n->b.get(), env))) return Value::undefined();
      return eval(n->a.get(), env);
    }
    case NodeKind::kTernary:
      return truthy(eval(n->b.get(), env)) ? eval(n->a.get(), env) : eval(n->c.get(), env);
    case NodeKind::kIf:
      return Value::string(eval_block(truthy(eval(n->a.get(), env)) ? n->body : n->alt, env));
    case NodeKind::kFor:
      return Value::string(eval_for(n, env));
    case NodeKind::kSet:
      return eval_set(n, env);
    case NodeKind::kMacro:
      return eval_macro(n, env);
    case NodeKind::kCallBlock:
      return eval_call_block(n, env);
    case NodeKind::kFilterBlock:
      return apply_filter(Value::string(eval_block(n->body, env)), n->a.get(), env);
    case NodeKind::kBreak:
      throw BreakSignal{};
    case NodeKind::kContinue:
      throw ContinueSignal{};
    case NodeKind::kComment:
      return Value::null();
    default:
      throw_eval("Unknown node type");
  }
}

Value Interpreter::eval_binary(const Node* n, const EnvPtr& env) {
  const std::string& op = n->str;
  Value l = eval(n->a.get(), env);
  if (op == "and") return truthy(l) ? eval(n->b.get(), env) : l;
  if (op == "or") return truthy(l) ? l : eval(n->b.get(), env);
  Value r = eval(n->b.get(), env);
  charge(value_size(l) + value_size(r));
  if (op == "==") return Value::boolean(loose_equal(l, r));
  if (op == "!=") return Value::boolean(!loose_equal(l, r));
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    throw_eval(fmt::format("Cannot perform operation {} on undefined values", op));
  }
  if (l.is_null() || r.is_null()) throw_eval("Cannot perform operation on null values");
  if (op == "~") return Value::string(js_string(l) + js_string(r));
  bool l_num = l.is_numeric() || l.kind == Kind::kBool, r_num = r.is_numeric() || r.kind == Kind::kBool;
  if (op == "**" && l_num && r_num) {
    double a = l.num(), b = r.num();
    if (a == 0 && b < 0) throw_eval("0.0 cannot be raised to a negative power");
    double res = std::pow(a, b);
    if (!std::isfinite(res)) throw_eval("Exponentiation result is not a finite real number");
    if (l.kind == Kind::kFloat || r.kind == Kind::kFloat || b < 0) return Value::number(res);
    return int_or_float(res);
  }
  if (l.is_numeric() && r.is_numeric()) {
    bool is_float = l.kind == Kind::kFloat || r.kind == Kind::kFloat;
    double a = l.num(), b = r.num();
    auto num = [&](double v) { return is_float ? Value::number(v) : int_or_float(v); };
    int64_t res = 0;
    if (op == "+") return is_float || __builtin_add_overflow(l.i, r.i, &res) ? num(a + b) : Value::integer(res);
    if (op == "-") return is_float || __builtin_sub_overflow(l.i, r.i, &res) ? num(a - b) : Value::integer(res);
    if (op == "*") return is_float || __builtin_mul_overflow(l.i, r.i, &res) ? num(a * b) : Value::integer(res);
    if (op == "/") return Value::number(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "<=") return Value::boolean(a <= b);
  } else if (l.is_array() && r.is_array()) {
    if (op == "+") {
      Array out = *l.arr;
      out.insert(out.end(), r.arr->begin(), r.arr->end());
      return Value::array(std::move(out));
    }
  } else if (r.is_array()) {
    bool member = false;
    for (const Value& x : *r.arr)
      if (strict_equal(x, l)) {
        member = true;
        break;
      }
    if (op == "in") return Value::boolean(member);
    if (op == "not in") return Value::boolean(!member);
  }
  if ((l.is_string() || r.is_string()) && op == "+") return Value::string(js_string(l) + js_string(r));
  if (l.is_string() && r.is_string()) {
    if (op == "in") return Value::boolean(r.s.find(l.s) != std::string::npos);
    if (op == "not in") return Value::boolean(r.s.find(l.s) == std::string::npos);
  }
  if (l.is_string() && r.is_object()) {
    if (op == "in") return Value::boolean(r.obj->find(l.s) != nullptr);
    if (op == "not in") return Value::boolean(r.obj->find(l.s) == nullptr);
  }
  throw_eval(fmt::format("Unknown operator \"{}\" between {} and {}", op, kind_name(l.kind), kind_name(r.kind)));
}

// One UTF-16 code unit of `s` at index `idx` (negative counts from the end), as JS String.at().
static Value string_at(const std::string& s, int64_t idx) {
  std::vector<uint32_t> units;
  for (uint32_t cp : utf8_decode(s)) {
    if (cp >= 0x10000) {
      units.push_back(0xD800 + ((cp - 0x10000) >> 10));
      units.push_back(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      units.push_back(cp);
    }
  }
  if (idx < 0) idx += int64_t(units.size());
  if (idx < 0 || idx >= int64_t(units.size())) return Value::undefined();
  std::string out;
  utf8_append(out, units[size_t(idx)]);
  return Value::string(out);
}

Value Interpreter::eval_member(const Node* n, const EnvPtr& env) {
  Value obj = eval(n->a.get(), env);
  Value prop;
  if (n->flag) {
    if (n->b->kind == NodeKind::kSlice) {
      if (!obj.is_array() && !obj.is_string()) throw_eval("Slice object must be an array or string");
      const char* names[] = {"start", "stop", "step"};
      const Node* parts[] = {n->b->a.get(), n->b->b.get(), n->b->c.get()};
      std::optional<int64_t> v[3];
      for (int k = 0; k < 3; ++k) {
        Value x = eval(parts[k], env);
        if (x.is_int())
          v[k] = x.i;
        else if (!x.is_undefined())
          throw_eval(fmt::format("Slice {} must be numeric or undefined", names[k]));
      }
      if (obj.is_array()) {
        Array out;
        for (size_t i : slice_indices(obj.arr->size(), v[0], v[1], v[2])) out.push_back((*obj.arr)[i]);
        return Value::array(std::move(out));
      }
      auto chars = utf8_chars(obj.s);
      std::string out;
      for (size_t i : slice_indices(chars.size(), v[0], v[1], v[2])) out += chars[i];
      return Value::string(std::move(out));
    }
    prop = eval(n->b.get(), env);
  } else if (n->b->kind == NodeKind::kInt) {
    prop = Value::integer(n->b->ival);
  } else {
    prop = Value::string(n->b->str);
  }
  if (obj.is_attr_container()) {
    if (!prop.is_string())
      throw_eval(fmt::format("Cannot access property with non-string: got {}", kind_name(prop.kind)));
    if (const Value* v = obj.obj->find(prop.s)) return *v;
    if (obj.is_object()) return builtin_member(obj, prop.s).value_or(Value::undefined());
    return Value::undefined();
  }
  if (obj.is_array() || obj.is_string()) {
    if (prop.is_int()) {
      if (obj.is_string()) return string_at(obj.s, prop.i);
      int64_t i = prop.i < 0 ? prop.i + int64_t(obj.arr->size()) : prop.i;
      if (i < 0 || i >= int64_t(obj.arr->size())) return Value::undefined();
      return (*obj.arr)[size_t(i)];
    }
    if (prop.is_string()) return builtin_member(obj, prop.s).value_or(Value::undefined());
    throw_eval(fmt::format("Cannot access property with non-string/non-number: got {}", kind_name(prop.kind)));
  }
  if (!prop.is_string())
    throw_eval(fmt::format("Cannot access property with non-string: got {}", kind_name(prop.kind)));
  return Value::undefined();
}

Value Interpreter::eval_call(const Node* n, const EnvPtr& env) {
  std::vector<Value> args;
  Object kwargs;
  eval_args(n->list, env, args, kwargs);
  if (!kwargs.items.empty()) args.push_back(Value::object(std::move(kwargs), Kind::kKwargs));
  Value fn = eval(n->a.get(), env);
  return call_value(fn, args, env);
}

std::string Interpreter::eval_for(const Node* n, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* test = nullptr;
  Value iterable;
  if (n->b->kind == NodeKind::kSelect) {
    iterable = eval(n->b->a.get(), scope);
    test = n->b->b.get();
  } else {
    iterable = eval(n->b.get(), scope);
  }
  if (!iterable.is_array() && !iterable.is_object())
    throw_eval(fmt::format("Expected iterable or object type in for loop: got {}", kind_name(iterable.kind)));
  Array source;
  if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.obj->items) source.push_back(Value::string(k));
  } else {
    source = *iterable.arr;
  }
  const Node* var = n->a.get();
  auto bind = [&](Env& target, const Value& item) {
    if (var->kind == NodeKind::kIdent) {
      target.set(var->str, item);
      return;
    }
    if (item.kind != Kind::kArray) throw_eval(fmt::format("Cannot unpack non-iterable type: {}", kind_name(item.kind)));
    if (var->list.size() != item.arr->size())
      throw_eval(fmt::format("Too {} items to unpack", var->list.size() > item.arr->size() ? "few" : "many"));
    for (size_t j = 0; j < var->list.size(); ++j) {
      if (var->list[j]->kind != NodeKind::kIdent) throw_eval("Cannot unpack non-identifier type");
      target.set(var->list[j]->str, (*item.arr)[j]);
    }
  };
  Array items;
  for (const Value& cur : source) {
    if (test) {
      auto loop_scope = std::make_shared<Env>(scope);
      bind(*loop_scope, cur);
      if (!truthy(eval(test, loop_scope))) continue;
    } else if (var->kind == NodeKind::kTuple) {
      Env probe;  // raises unpack errors at collection time, as the reference does
      bind(probe, cur);
    }
    items.push_back(cur);
  }
  std::string out;
  bool no_iteration = true;
  int64_t len = int64_t(items.size());
  for (int64_t i = 0; i < len; ++i) {
    charge(16 * kNodeCost);  // a scope and the nine-field loop object per iteration
    Object loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(len - i));
    loop.set("revindex0", Value::integer(len - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == len - 1));
    loop.set("length", Value::integer(len));
    loop.set("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined());
    loop.set("nextitem", i < len - 1 ? items[size_t(i + 1)] : Value::undefined());
    scope->set("loop", Value::object(std::move(loop)));
    bind(*scope, items[size_t(i)]);
    try {
      out += eval_block(n->body, scope);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) out += eval_block(n->alt, scope);
  return out;
}

Value Interpreter::eval_set(const Node* n, const EnvPtr& env) {
  Value rhs = n->b ? eval(n->b.get(), env) : Value::string(eval_block(n->body, env));
  const Node* t = n->a.get();
  if (t->kind == NodeKind::kIdent) {
    env->set(t->str, rhs);
  } else if (t->kind == NodeKind::kTuple) {
    if (!rhs.is_array()) throw_eval(fmt::format("Cannot unpack non-iterable type in set: {}", kind_name(rhs.kind)));
    if (rhs.arr->size() != t->list.size())
      throw_eval(fmt::format("Too {} items to unpack in set", t->list.size() > rhs.arr->size() ? "few" : "many"));
    for (size_t i = 0; i < t->list.size(); ++i) {
      if (t->list[i]->kind != NodeKind::kIdent) throw_eval("Cannot unpack to non-identifier in set");
      env->set(t->list[i]->str, (*rhs.arr)[i]);
    }
  } else if (t->kind == NodeKind::kMember) {
    Value obj = eval(t->a.get(), env);
    if (obj.kind != Kind::kNamespace) throw_eval("cannot assign attribute on non-namespace object");
    if (t->b->kind != NodeKind::kIdent) throw_eval("Cannot assign to member with non-identifier property");
    obj.obj->set(t->b->str, rhs);
  } else {
    throw_eval("Invalid LHS inside assignment expression");
  }
  return Value::null();
}

void Interpreter::bind_macro_args(const std::string& name, const std::vector<NodePtr>& params, bool uses_kwargs,
                                  bool uses_varargs, std::vector<Value> args, const EnvPtr& scope) {
  Object kwargs;
  if (!args.empty() && args.back().kind == Kind::kKwargs) {
    kwargs = *args.back().obj;
    args.pop_back();
  }
  std::vector<const Node*> pending;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node* p = params[i].get();
    std::optional<Value> v;
    if (i < args.size()) v = args[i];
    if (!v) {
      for (auto it = kwargs.items.begin(); it != kwargs.items.end(); ++it)
        if (it->first == p->str) {
          v = it->second;
          kwargs.items.erase(it);
          break;
        }
    }
    if (!v && p->kind == NodeKind::kKwarg) pending.push_back(p);
    scope->set(p->str, v.value_or(Value::undefined()));
  }
  if (uses_kwargs) {
    scope->set("kwargs", Value::object(kwargs));
  } else if (!kwargs.items.empty()) {
    throw_eval(fmt::format("macro {} takes no keyword argument '{}'", name, kwargs.items[0].first));
  }
  if (uses_varargs) {
    Array rest;
    for (size_t i = params.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->set("varargs", Value::array(std::move(rest)));
  } else if (args.size() > params.size()) {
    throw_eval(fmt::format("macro {} takes not more than {} argument(s)", name, params.size()));
  }
  for (const Node* p : pending) scope->set(p->str, eval(p->a.get(), scope));
}

Value Interpreter::eval_macro(const Node* n, const EnvPtr& env) {
  bool kw = false, va = false;
  for (const auto& st : n->body) find_special(st.get(), kw, va);
  for (const auto& p : n->list) {
    if (p->str == "kwargs") kw = false;
    if (p->str == "varargs") va = false;
  }
  env->set(n->str, Value::function([this, n, kw, va](std::vector<Value>& args, const EnvPtr& call_env) {
             auto scope = std::make_shared<Env>(call_env);  // the reference scopes macros dynamically
             bind_macro_args("'" + n->str + "'", n->list, kw, va, args, scope);
             return Value::string(eval_block(n->body, scope));
           }));
  return Value::null();
}

Value Interpreter::eval_call_block(const Node* n, const EnvPtr& env) {
  bool kw = false, va = false;
  for (const auto& st : n->body) find_special(st.get(), kw, va);
  Value caller = Value::function([this, n, env, kw, va](std::vector<Value>& args, const EnvPtr&) {
    auto scope = std::make_shared<Env>(env);
    bind_macro_args("None", n->list, kw, va, args, scope);
    return Value::string(eval_block(n->body, scope));
  });
  const Node* call = n->a.get();
  std::vector<Value> args;
  Object kwargs;
  eval_args(call->list, env, args, kwargs);
  args.push_back(Value::object(std::move(kwargs), Kind::kKwargs));
  Value fn = eval(call->a.get(), env);
  if (fn.kind != Kind::kFunction)
    throw_eval(fmt::format("Cannot call something that is not a function: got {}", kind_name(fn.kind)));
  auto call_env = std::make_shared<Env>(env);
  call_env->set("caller", caller);
  return (*fn.fn)(args, call_env);
}

}  // namespace mmx::jinja
