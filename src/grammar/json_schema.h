// JSON Schema -> GBNF text whose every sentence is a JSON value valid for the schema.
//
// The subset (docs/structured-output.md): type (one or a list), properties, required,
// additionalProperties (false, true or a schema), enum, const, items, minItems / maxItems,
// minLength / maxLength, integer minimum / maximum / exclusiveMinimum / exclusiveMaximum, anyOf,
// local $ref (#, #/$defs/..., #/definitions/...), and the annotations that change nothing (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly).
// Anything else throws SchemaError naming the keyword (the server answers 400 with it).
//
// Choices (each keeps every output valid): properties come in the schema's order, the required
// ones always and the optional ones when the model writes them; properties not listed are written
// only when additionalProperties is true or a schema (absent counts as "not written": allowed by
// the schema, never needed); whitespace between tokens is bounded (one newline and up to 16
// spaces), so a model cannot stall in it.
#pragma once

#include <nlohmann/json.hpp>
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
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  int n_ = 0;
  bool single_line_ = false;
};

// {minLength, maxLength} of a string schema (maxLength -1: none), refused (SchemaError) as the
// JSON writer refuses them: negative, crossed, or above 10000.
std::pair<int64_t, int64_t> string_length_bounds(const nlohmann::ordered_json& s, const std::string& path);

// A whole grammar (root = the schema's values).
std::string json_schema_to_gbnf(const nlohmann::json& schema);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
std::string json_object_gbnf();
// A GBNF string literal for raw bytes: "..." with ", \ and control bytes escaped.
std::string gbnf_literal(std::string_view bytes);

}  // namespace mmx::grammar
