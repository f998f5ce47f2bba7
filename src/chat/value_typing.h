// Typing of tool-call parameter values from the tool's JSON schema, and the JSON writer for
// tool-call arguments. Internal to mmx_chat (the block parsers use it).
//
// Two rule sets, because vLLM's M2 and M3 parsers differ and we mirror each:
//   * m2_convert: vLLM minimax_m2_tool_parser `_convert_param_value_with_types`: the literal
//     null/none/nil (any case) -> null (unless the schema declares a string and no null: then the
//     word is the string, m2_null_literals); then by type priority integer > number > boolean >
//     object/array (any JSON) > string (raw); nothing fits -> JSON if it parses, else raw.
//   * M3Type::convert: vLLM `_llm_nom` data_type.py: every schema candidate type converts with
//     a confidence, the most confident wins; empty text -> {} / [] / null / "" by type.
// Python's int()/float() grammar is reproduced for ASCII input (sign, digits, '_' separators,
// surrounding whitespace for int). Values that would need a Python big int stay doubles.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmx::chat {

using ojson = nlohmann::ordered_json;  // arguments keep the model's key order

// Python json.dumps(x, ensure_ascii=False) layout: ", " and ": " separators, UTF-8 kept;
// invalid UTF-8 is replaced by U+FFFD instead of throwing.
std::string dump_py(const ojson& j);

// ---- schema lookup ----

// Index of the request's tools: name -> "parameters" schema (first tool wins on duplicates).
class ToolIndex {
 public:
  explicit ToolIndex(const nlohmann::json& tools);
  bool empty() const { return tools_.empty(); }
  // The "parameters" schema of `name`, or nullptr when the tool is unknown.
  const nlohmann::json* parameters(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, nlohmann::json>> tools_;
};

// ---- M2 rules ----

// Type names of a property schema ("type" string/list, enum-inferred, anyOf/oneOf/allOf);
// {"string"} when nothing is found or the schema is not an object.
std::vector<std::string> m2_types_of(const nlohmann::json* property_schema);
// Whether the literal null/none/nil (any case) of a parameter with this schema (nullptr: unknown
// tool or parameter) is null: yes unless the schema declares a string type and allows no null
// (`{"enum": ["none", "auto"]}`: the word "none" stays the string). vLLM and SGLang make it null
// whatever the schema, which turns a string "none" into null.
bool m2_null_literals(const nlohmann::json* property_schema, const std::vector<std::string>& types);
ojson m2_convert(const std::string& value, const std::vector<std::string>& types, bool null_literals = true);

// ---- M3 rules ----

enum class M3Atom { kNone, kString, kInteger, kFloat, kBoolean, kArray, kObject, kOther };

struct M3Type {
  std::vector<M3Atom> candidates;  // never empty
  nlohmann::json schema;           // the property schema (null when there is none)

  static M3Type from_property(const nlohmann::json& property);
  // The type of parameter `key` of a function's "parameters" schema: its `properties`, or those of
  // the branches of a top-level anyOf / oneOf / allOf; a string when the schema says nothing.
  static M3Type of_parameter(const nlohmann::json* parameters, const std::string& key);
  bool has(M3Atom a) const;
  ojson convert(const std::string& text) const;
  // Sub-schemas; std::nullopt when the schema says nothing about the key / item.
  std::optional<M3Type> property(const std::string& key) const;
  std::optional<M3Type> item(size_t index) const;
};

// ---- Python number grammar (exposed for tests) ----
bool py_parse_int(std::string_view s, ojson& out);     // int(s)
bool py_parse_float(std::string_view s, double& out);  // float(s), finite values only

}  // namespace mmx::chat
