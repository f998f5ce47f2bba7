// Runtime values of the Jinja interpreter, modelled on @huggingface/jinja (the reference our
// chat-template output must match byte for byte), not on Python Jinja2.
//
// The reference runs on JavaScript, so its semantics leak into rendered prompts; this file
// reproduces the ones that matter: every number is a JS double (an Int is a double with an
// integral value; JSON `1.0` becomes Int 1), `==` is JS loose equality on the underlying value,
// `~` and `+` stringify with JS `String(x)`, arrays/objects print as JSON, dicts keep insertion
// order (but JSON input objects put array-index-like keys first, as JS objects do).
//
// Not here: evaluation (interpreter.cpp), filters and tests (filters.cpp), methods (methods.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mmx::jinja {

struct Value;
class Interpreter;
struct Env;
using EnvPtr = std::shared_ptr<Env>;

// Insertion-ordered string-keyed map (a JS Map).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};
using Array = std::vector<Value>;
// A callable: receives positional args, plus a trailing kKwargs value when keywords were given
// (the reference's calling convention), and the environment of the call site.
using Function = std::function<Value(std::vector<Value>& args, const EnvPtr& env)>;

enum class Kind : uint8_t {
  kUndefined,
  kNull,
  kBool,
  kInt,
  kFloat,
  kString,
  kArray,
  kTuple,  // an Array for most purposes, but tojson and `is iterable` treat it differently
  kObject,
  kKwargs,     // an Object holding keyword arguments of a call
  kNamespace,  // mutable attribute bag from namespace(); no dict methods
  kFunction,
};

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> arr;   // kArray, kTuple
  std::shared_ptr<Object> obj;  // kObject, kKwargs, kNamespace
  std::shared_ptr<Function> fn;

  static Value undefined() { return {}; }
  static Value null();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);  // Float
  static Value string(std::string v);
  static Value array(Array v, Kind k = Kind::kArray);
  static Value object(Object v, Kind k = Kind::kObject);
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_null() const { return kind == Kind::kNull; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_int() const { return kind == Kind::kInt; }
  bool is_numeric() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_array() const { return kind == Kind::kArray || kind == Kind::kTuple; }     // instanceof ArrayValue
  bool is_object() const { return kind == Kind::kObject || kind == Kind::kKwargs; }  // instanceof ObjectValue
  bool is_attr_container() const { return is_object() || kind == Kind::kNamespace; }
  double num() const { return kind == Kind::kInt ? double(i) : kind == Kind::kFloat ? f : (b ? 1 : 0); }
};

// The reference's type names ("StringValue", ...), used in error messages.
const char* kind_name(Kind k);

// __bool__: Python-like truthiness (empty containers are false; a namespace is always true).
bool truthy(const Value& v);
// RuntimeValue.toString(): what `{{ x }}` prints (floats keep ".0"; containers print as JSON).
std::string to_output(const Value& v);
// JS String(x.value): what `~`, `+` and `join` use (floats print as JS numbers, 2.0 -> "2").
std::string js_string(const Value& v);
// JS Number.prototype.toString() for a double.
std::string js_number(double d);

struct JsonOptions {
  int indent = 0;  // 0 or negative = single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// The reference's toJSON(); throws mmx::Error for functions, tuples and kwargs.
// Deeper values are refused with an error (mmx::Error), never a stack overflow.
constexpr int kMaxToJsonDepth = 256;
std::string to_json(const Value& v, const JsonOptions& opt, int depth = 0, bool undefined_to_null = true);
// JSON.stringify(string), optionally with \uXXXX escapes for code units >= 0x7f.
std::string json_quote(const std::string& s, bool ensure_ascii);

// JS `a.value == b.value` (loose) and `a.value === b.value` (strict; containers by identity).
bool loose_equal(const Value& a, const Value& b);
bool strict_equal(const Value& a, const Value& b);

// JSON (as parsed by JS JSON.parse) -> Value.
Value from_json(const nlohmann::ordered_json& j);

// ---- UTF-8 helpers with JavaScript semantics ----
std::vector<uint32_t> utf8_decode(const std::string& s);  // invalid bytes -> U+FFFD
void utf8_append(std::string& out, uint32_t cp);
std::vector<std::string> utf8_chars(const std::string& s);  // Array.from(str): one entry per code point
bool js_is_space(uint32_t cp);                              // JS \s
std::string js_trim(const std::string& s, bool start, bool end);
size_t utf16_length(const std::string& s);
std::string js_upper(const std::string& s);
std::string js_lower(const std::string& s);

}  // namespace mmx::jinja
