// JSON Schema -> GBNF text whose every sentence is a JSON value valid for the schema.
//
// The subset (docs/structured-output.md): type (one or a list), properties, required,
// additionalProperties (false, true or a schema), propertyNames only as {"type": "string"} (what
// every key is), enum, const, items, minItems / maxItems, minLength / maxLength (a maxLength above
// kMaxStringLength is no bound), minimum / maximum / exclusiveMinimum / exclusiveMaximum on
// integers and numbers, anyOf (one of only string consts / string enums is one enum), local $ref
// (#, #/$defs/..., #/definitions/...), and the annotations that change nothing (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly).
// Anything else throws SchemaError naming the keyword (the server answers 400 with it).
//
// A number with bounds is written without an exponent, and its digits are compared with the
// bounds' decimal digits (a bound is its shortest round-trip decimal: 0.1 is "0.1"), so every
// value is within them exactly; an unbounded number may carry an exponent.
//
// Choices (each keeps every output valid): properties come in the schema's order, the required
// ones always and the optional ones when the model writes them; properties not listed are written
// only when additionalProperties is true or a schema (absent counts as "not written": allowed by
// the schema, never needed); whitespace between tokens is bounded (one newline and up to 16
// spaces), so a model cannot stall in it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mmx::grammar {

class SchemaError : public Error {
 public:
  SchemaError(std::string keyword, const std::string& msg) : Error(msg), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

// Collects GBNF rules; several schemas (a tool's parameters, ...) can go into one grammar.
class GbnfWriter {
 public:
  // The name of a rule whose sentences are the JSON values valid for `schema`; its local $refs
  // resolve within it. `prefix` keeps the rule names of different schemas apart.
  std::string schema_rule(const nlohmann::json& schema, const std::string& prefix);
  // The same, keeping the schema's property order (parse request bodies with ordered_json for it).
  std::string schema_rule(const nlohmann::ordered_json& schema, const std::string& prefix);
  // Shared building blocks: any JSON value / object, a JSON string, bounded whitespace.
  std::string value_rule();
  std::string object_rule();
  std::string string_rule();
  std::string ws_rule();
  // A rule name not taken yet, made from `base` (characters other than [A-Za-z0-9-] become '-').
  std::string fresh(const std::string& base);
  // Adds `name ::= body` (the name must be new); returns the name.
  std::string rule(const std::string& name, const std::string& body);
  // "root ::= root_body" and every rule collected.
  std::string text(const std::string& root_body) const;
  // Whitespace between JSON tokens without newlines (a value that must stay on one line, as an
  // M1 tool-call line). Set before the first rule is written.
  void single_line() { single_line_ = true; }

 private:
  struct Ctx;
  std::string visit(const nlohmann::ordered_json& s, Ctx& c, const std::string& path);
  std::string object(const nlohmann::ordered_json& s, Ctx& c, const std::string& path);
  std::string array(const nlohmann::ordered_json& s, Ctx& c, const std::string& path);
  std::string string(const nlohmann::ordered_json& s, const std::string& path);
  std::string integer(const nlohmann::ordered_json& s, const std::string& path);
  std::string number(const nlohmann::ordered_json& s, const std::string& path);
  // Digit strings F (the fraction after the point) with lo <= 0.F <= hi (each side on or not,
  // inclusive or not); nonempty: F has at least one digit. "" when no such F exists.
  std::string fraction(const std::string& lo, bool lo_on, bool lo_incl, const std::string& hi, bool hi_on,
                       bool hi_incl, bool nonempty);
  std::map<std::string, std::string> fractions_;  // fraction()'s rules by their arguments
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  int n_ = 0;
  bool single_line_ = false;
};

// String lengths the grammar can count (a bounded repetition costs a rule per count).
inline constexpr int64_t kMaxStringLength = 10000;

// {minLength, maxLength} of a string schema (maxLength -1: none, also when it is above
// kMaxStringLength), refused (SchemaError) as the JSON writer refuses them: negative, crossed, or
// a minLength above kMaxStringLength.
std::pair<int64_t, int64_t> string_length_bounds(const nlohmann::ordered_json& s, const std::string& path);

// An anyOf (or oneOf) whose every branch is a string const or an enum of strings (with "type":
// "string" or annotations beside them, nothing else) as one {"enum": [...]} of their values in
// order, each once (oneOf: a value in two branches matches both, so it is left out); nullopt
// when `s` is not one, or oneOf leaves no value.
std::optional<nlohmann::ordered_json> string_choices(const nlohmann::ordered_json& s);

// A whole grammar (root = the schema's values).
std::string json_schema_to_gbnf(const nlohmann::json& schema);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
std::string json_object_gbnf();
// A GBNF string literal for raw bytes: "..." with ", \ and control bytes escaped.
std::string gbnf_literal(std::string_view bytes);

}  // namespace mmx::grammar
