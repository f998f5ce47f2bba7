// Forced tool calls: GBNF for a reply that is one tool-call block in the model's own syntax, with
// arguments valid for each tool's parameter schema (tool_choice "required" or a named function).
//
// M2 XML (chat::OutputFormat kM2 / kM2AppendThink; docs/output-parsing.md):
//   <minimax:tool_call>\n
//   <invoke name="f">\n<parameter name="k">VALUE</parameter>\n ... </invoke>\n   (one or more)
//   </minimax:tool_call>
// Parameters come in the schema's order, the required ones always. A VALUE is what the M2 parser
// types back into the schema's type: a string parameter is raw text (non-empty, no leading
// whitespace, no "</", never a bare null/none/nil, which the parser would read as null; with
// minLength / maxLength: that many code points, no '<', no whitespace at either end) or one of
// its enum strings / its const; a union with a string alternative only as string-or-null (raw or
// "null"); any other schema is its JSON (GbnfWriter).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mmx::grammar {

// tools: the request's OpenAI tools array. only: "" = any tool, one or more calls; else exactly one
// call of that function. The start rule is `root`. Throws SchemaError naming a keyword outside the
// subset, mmx::Error for a malformed tool.
std::string m2_tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only);

// M3 namespaced tags (kM3; NS = ]<]minimax[>[, the M3 template's to_xml):
//   NS<tool_call>\n NS<invoke name="f">NS<k>VALUE NS</k>... NS</invoke>\n ... NS</tool_call>
// An object parameter is nested tags (its properties in order, required ones always), an array
// NS<item>s, a string raw text in which "]<" never occurs and that does not end in "]" (bounded
// lengths: no "]" at all), a number or boolean its JSON text, a null nothing; anyOf / oneOf / a
// type list as X-or-null ("null" text). $ref, allOf and unions of two non-null schemas are
// refused (SchemaError): the M3 parser types values by their text, without resolving $ref.
std::string m3_tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only);

// Text-01 / M1 JSON lines (kM1): <tool_calls>\n, one line per call
//   {"name": "f", "arguments": ARGS}\n
// with ARGS the JSON of the tool's parameter schema (the JSON Schema subset of json_schema.h,
// whitespace kept to spaces so a call stays on its line), then </tool_calls>.
std::string m1_tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only);

}  // namespace mmx::grammar
