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

// The streamed pieces of every delta, checked against the whole calls: indices 0, 1, 2, ... in
// order, a call's first piece (and only that one) carries its id and name, and the pieces of one
// index concatenate exactly to that call's arguments. Also checks that each call was complete
// (its whole ToolCall emitted) no earlier than its last piece.
inline void expect_pieces_match_calls(const std::vector<ParsedDelta>& deltas) {
  std::vector<ToolCall> assembled;
  size_t n_whole = 0;
  for (const ParsedDelta& d : deltas) {
    for (const ToolCallDelta& p : d.tool_call_deltas) {
      ASSERT_LE(p.index, assembled.size()) << "piece for a call that has not started";
      ASSERT_GE(p.index + 1, assembled.size()) << "piece for an earlier call after a later one";
      if (p.index == assembled.size()) {
        EXPECT_FALSE(p.id.empty()) << "first piece of call " << p.index << " without id";
        EXPECT_FALSE(p.name.empty()) << "first piece of call " << p.index << " without name";
        assembled.push_back({p.id, p.name, ""});
      } else {
        EXPECT_TRUE(p.id.empty() && p.name.empty()) << "id/name repeated on a later piece";
      }
      ASSERT_LT(n_whole, assembled.size());
      EXPECT_GE(p.index, n_whole) << "piece after the call was complete";
      assembled[p.index].arguments_json += p.arguments;
    }
    for (const ToolCall& c : d.tool_calls) {
      ASSERT_LT(n_whole, assembled.size()) << "whole call " << c.name << " never streamed";
      EXPECT_EQ(assembled[n_whole].id, c.id);
      EXPECT_EQ(assembled[n_whole].name, c.name);
      EXPECT_EQ(assembled[n_whole].arguments_json, c.arguments_json);
      ++n_whole;
    }
  }
  EXPECT_EQ(n_whole, assembled.size()) << "a streamed call was never completed";
}

// Feeds `text` cut at the given (increasing) offsets, then finish(); concatenates the deltas
// (and checks the streamed tool-call pieces of the run against its whole calls).
inline ParsedDelta parse_cut(OutputFormat f, std::string_view text, const std::vector<size_t>& cuts,
                             bool starts_in_reasoning, const nlohmann::json& tools = test_tools(),
                             ParserOptions opts = {}) {
  OutputParser p(f, tools, starts_in_reasoning, /*id_seed=*/7, opts);
  std::vector<ParsedDelta> deltas;
  size_t prev = 0;
  for (size_t c : cuts) {
    deltas.push_back(p.feed(text.substr(prev, c - prev)));
    prev = c;
  }
  deltas.push_back(p.feed(text.substr(prev)));
  deltas.push_back(p.finish());
  expect_pieces_match_calls(deltas);
  ParsedDelta out;
  for (ParsedDelta& d : deltas) out.append(std::move(d));
  return out;
}

inline std::string describe(const ParsedDelta& d) {
  std::string s = "content=[" + d.content + "] reasoning=[" + d.reasoning + "] calls=";
  for (const auto& c : d.tool_calls) s += "{" + c.id + " " + c.name + " " + c.arguments_json + "}";
  // The pieces joined per call (the chunking decides how they are cut, not what they say).
  std::vector<std::string> joined;
  for (const auto& p : d.tool_call_deltas) {
    if (p.index >= joined.size()) joined.resize(p.index + 1);
    if (!p.id.empty()) joined[p.index] += p.id + " " + p.name + " ";
    joined[p.index] += p.arguments;
  }
  s += " pieces=";
  for (const auto& j : joined) s += "{" + j + "}";
  return s;
}

inline void expect_same(const ParsedDelta& a, const ParsedDelta& b, const std::string& what) {
  EXPECT_EQ(describe(a), describe(b)) << what;
}

// Parses `text` whole (one feed), byte by byte, with an empty delta between bytes, and in
// random chunk sizes for several seeds; expects identical results and returns the whole one.
inline ParsedDelta parse_all_modes(OutputFormat f, std::string_view text, bool starts_in_reasoning,
                                   const nlohmann::json& tools = test_tools(), ParserOptions opts = {}) {
  ParsedDelta whole = parse_cut(f, text, {}, starts_in_reasoning, tools, opts);
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  expect_same(whole, parse_cut(f, text, bytes, starts_in_reasoning, tools, opts), "byte by byte");
  std::vector<size_t> doubled;  // every cut twice: empty deltas in between
  for (size_t c : bytes) {
    doubled.push_back(c);
    doubled.push_back(c);
  }
  expect_same(whole, parse_cut(f, text, doubled, starts_in_reasoning, tools, opts), "with empty deltas");
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> step(1, 9);  // token-sized pieces
    std::vector<size_t> cuts;
    for (size_t c = step(rng); c < text.size(); c += step(rng)) cuts.push_back(c);
    expect_same(whole, parse_cut(f, text, cuts, starts_in_reasoning, tools, opts),
                "random chunks, seed " + std::to_string(seed));
  }
  return whole;
}

// Feeds `parts` one by one; returns the delta of each feed (finish() appended last).
inline std::vector<ParsedDelta> feed_parts(OutputFormat f, const std::vector<std::string>& parts,
                                          const nlohmann::json& tools = test_tools()) {
  OutputParser p(f, tools, /*starts_in_reasoning=*/false, /*id_seed=*/3);
  std::vector<ParsedDelta> out;
  for (const auto& s : parts) out.push_back(p.feed(s));
  out.push_back(p.finish());
  expect_pieces_match_calls(out);
  return out;
}

// The streamed pieces of one delta: "[index name arguments]" each (name on a first piece only).
inline std::string pieces(const ParsedDelta& d) {
  std::string s;
  for (const auto& p : d.tool_call_deltas)
    s += "[" + std::to_string(p.index) + (p.name.empty() ? "" : " " + p.name) + " " + p.arguments + "]";
  return s;
}

}  // namespace mmx::chat::testing
