// Internal to mmx_template: the tree-walking evaluator shared by interpreter.cpp (statements and
// expressions), filters.cpp (filters and tests) and methods.cpp (str/dict methods and globals).
// Users include template/jinja.h instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace mmx::jinja {

// A scope. Lookups walk the parent chain; assignments go to the innermost scope.
struct Env {
  EnvPtr parent;
  std::unordered_map<std::string, Value> vars;
  explicit Env(EnvPtr p = nullptr) : parent(std::move(p)) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars[name] = std::move(v); }
};

// An evaluation error; the innermost node being evaluated gives it a position.
struct EvalError {
  std::string msg;
  bool raised = false;  // from raise_exception()
  bool located = false;
  uint32_t pos = 0;
};
[[noreturn]] void throw_eval(std::string msg);
// An integer result: int64 when it fits, else a double (JS keeps such values as IntegerValue).
Value int_or_float(double x);
// What a value weighs in the work budget: characters of a string, elements of a list or dict.
int64_t value_size(const Value& v);
// The longest list range() builds (1 Mi elements; the reference has no limit).
constexpr int64_t kMaxRangeLength = int64_t(1) << 20;

class Interpreter {
 public:
  Value eval(const Node* n, const EnvPtr& env);
  std::string eval_block(const std::vector<NodePtr>& body, const EnvPtr& env);
  // Evaluates call arguments the reference's way: all positionals (with *spread), then keywords.
  void eval_args(const std::vector<NodePtr>& args, const EnvPtr& env, std::vector<Value>& pos, Object& kwargs);

  Value apply_filter(const Value& operand, const Node* filter, const EnvPtr& env);  // filters.cpp
  Value call_value(const Value& fn, std::vector<Value>& args, const EnvPtr& env);

 private:
  // Stack bytes render() may use (the main thread and std::thread get 8 MiB on Linux).
  static constexpr uintptr_t kStackBudget = 1 << 20;
  uintptr_t stack_base_ = 0;
  // The work one render may do, in units: each evaluated node costs kNodeCost (about what
  // copying that many bytes takes) plus the size (characters, or elements) of what it produces,
  // and a filter or operator also the size of what it reads; literal text costs its length. A
  // chat template over 2,000 turns and 3 MB of text spends 31 M (tests/template); a template
  // that loops or grows without bound (a hostile checkpoint, or a fuzzer's input) stops with an
  // error within seconds instead of running for hours or taking all memory. The reference has
  // no such limit (it runs out of memory or time).
  static constexpr int64_t kNodeCost = 32;
  static constexpr int64_t kWorkBudget = int64_t(1) << 28;
  int64_t work_ = 0;
  void charge(int64_t units);
  Value eval_inner(const Node* n, const EnvPtr& env);
  Value eval_binary(const Node* n, const EnvPtr& env);
  Value eval_member(const Node* n, const EnvPtr& env);
  Value eval_call(const Node* n, const EnvPtr& env);
  std::string eval_for(const Node* n, const EnvPtr& env);
  Value eval_set(const Node* n, const EnvPtr& env);
  Value eval_macro(const Node* n, const EnvPtr& env);
  Value eval_call_block(const Node* n, const EnvPtr& env);
  void bind_macro_args(const std::string& name, const std::vector<NodePtr>& params, bool uses_kwargs, bool uses_varargs,
                       std::vector<Value> args, const EnvPtr& scope);
};

// ---- filters.cpp ----
// A named test (`x is string`); `arg` is the second operand where a test takes one (equalto).
bool run_test(const std::string& name, const Value& operand, const Value* arg);
// -1/0/1 ordering of sort keys; throws on incomparable types (compareRuntimeValues).
int compare_values(const Value& a, const Value& b, bool case_sensitive);

// ---- methods.cpp ----
// The member `name` of a string / dict / list value (methods and `length`), if any.
std::optional<Value> builtin_member(const Value& self, const std::string& name);
// namespace, true/false/none, raise_exception, range, strftime_now.
void install_globals(Env& env);
// Python-style slicing with JS index clamping.
std::vector<size_t> slice_indices(size_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  std::optional<int64_t> step);

}  // namespace mmx::jinja
