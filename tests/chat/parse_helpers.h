// Test helpers for the output parser: run one text through the parser whole, byte by byte and
// in seeded random chunks, and check that every way gives the same concatenated result.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.h"

namespace mmx::chat::testing {

// The tools used across the suite: every JSON-schema type the parsers care about.
inline const nlohmann::json& test_tools() {
  static const nlohmann::json tools = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {
        "city":   {"type": "string"},
        "days":   {"type": "integer"},
        "metric": {"type": "boolean"},
        "ratio":  {"type": "number"},
        "opts":   {"type": "object", "properties": {
                     "lang": {"type": "string"}, "depth": {"type": "integer"}}},
        "tags":   {"type": "array", "items": {"type": "string"}},
        "ids":    {"type": "array", "items": {"type": "integer"}},
        "rows":   {"type": "array", "items": {"type": "object", "properties": {
                     "k": {"type": "string"}, "v": {"type": "number"}}}},
        "maybe":  {"type": ["integer", "null"]},
        "unit":   {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "run_code", "parameters": {
      "type": "object", "properties": {
        "code": {"type": "string"}, "timeout": {"type": "number"}}}}}
  ])");
  return tools;
}

// Feeds `text` cut at the given (increasing) offsets, then finish(); concatenates the deltas.
inline ParsedDelta parse_cut(OutputFormat f, std::string_view text, const std::vector<size_t>& cuts,
                             bool starts_in_reasoning, const nlohmann::json& tools = test_tools()) {
  OutputParser p(f, tools, starts_in_reasoning, /*id_seed=*/7);
  ParsedDelta out;
  size_t prev = 0;
  for (size_t c : cuts) {
    out.append(p.feed(text.substr(prev, c - prev)));
    prev = c;
  }
  out.append(p.feed(text.substr(prev)));
  out.append(p.finish());
  return out;
}

inline std::string describe(const ParsedDelta& d) {
  std::string s = "content=[" + d.content + "] reasoning=[" + d.reasoning + "] calls=";
  for (const auto& c : d.tool_calls) s += "{" + c.id + " " + c.name + " " + c.arguments_json + "}";
  return s;
}

inline void expect_same(const ParsedDelta& a, const ParsedDelta& b, const std::string& what) {
  EXPECT_EQ(describe(a), describe(b)) << what;
}

// Parses `text` whole (one feed), byte by byte, with an empty delta between bytes, and in
// random chunk sizes for several seeds; expects identical results and returns the whole one.
inline ParsedDelta parse_all_modes(OutputFormat f, std::string_view text, bool starts_in_reasoning,
                                   const nlohmann::json& tools = test_tools()) {
  ParsedDelta whole = parse_cut(f, text, {}, starts_in_reasoning, tools);
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  expect_same(whole, parse_cut(f, text, bytes, starts_in_reasoning, tools), "byte by byte");
  std::vector<size_t> doubled;  // every cut twice: empty deltas in between
  for (size_t c : bytes) {
    doubled.push_back(c);
    doubled.push_back(c);
  }
  expect_same(whole, parse_cut(f, text, doubled, starts_in_reasoning, tools), "with empty deltas");
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> step(1, 9);  // token-sized pieces
    std::vector<size_t> cuts;
    for (size_t c = step(rng); c < text.size(); c += step(rng)) cuts.push_back(c);
    expect_same(whole, parse_cut(f, text, cuts, starts_in_reasoning, tools),
                "random chunks, seed " + std::to_string(seed));
  }
  return whole;
}

}  // namespace mmx::chat::testing
