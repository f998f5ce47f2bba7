// Which top-level request fields each endpoint accepts (request_fields.cpp holds the table).
//
// A body field is one of:
//   honoured     parsed and acted on (request.cpp);
//   no effect    accepted and not acted on, only where OpenAI's server gives it no effect on the
//                output either (e.g. `user`, `metadata`);
//   default only accepted at its default value (e.g. `response_format: {"type": "text"}`), any
//                other value is 400 naming the field and what is supported;
//   refused      400 naming the field whatever its value (null counts as absent);
//   unknown      not in the table: 400 naming it (OpenAI: "Unrecognized request argument").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mmx::server {

using ojson = nlohmann::ordered_json;

enum class Endpoint { kChat, kCompletion, kTokenize, kDetokenize, kMessages, kCountTokens, kResponses };

struct FieldRule {
  enum Kind { kHonoured, kNoEffect, kDefaultOnly, kRefused };
  std::string name;
  Kind kind;
  std::string why;  // kDefaultOnly: the accepted value and why; kRefused: why
};

const std::vector<FieldRule>& field_rules(Endpoint e);

// Throws ApiError 400 (param = the field) for an unknown, refused or non-default field.
void check_fields(const ojson& body, Endpoint e);

}  // namespace mmx::server
