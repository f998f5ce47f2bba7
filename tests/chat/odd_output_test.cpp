// Regression tests for what the parsers do with odd model output (docs/api.md, "What the parsers
// do with odd model output"): each case failed before its fix. Every case runs whole, byte by
// byte and in random chunks (parse_helpers.h).
#include <chrono>
#include <cstdio>

#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::describe;
using testing::parse_all_modes;
constexpr auto kM2 = OutputFormat::kM2;
constexpr auto kM3 = OutputFormat::kM3;
constexpr auto kM1 = OutputFormat::kM1;
const std::string NS = "]<]minimax[>[";

nlohmann::json one_tool(const std::string& name, const char* properties) {
  return nlohmann::json::array({{{"type", "function"},
                                 {"function",
                                  {{"name", name},
                                   {"parameters", {{"type", "object"}, {"properties", nlohmann::json::parse(properties)}}}}}}});
}

std::string m2_call(const std::string& name, const std::string& k, const std::string& v) {
  return "<minimax:tool_call><invoke name=\"" + name + "\"><parameter name=\"" + k + "\">" + v +
         "</parameter></invoke></minimax:tool_call>";
}

// ---- M2: the words none / nil / null ----

TEST(OddOutput, M2NoneIsAStringWhereTheSchemaSaysString) {
  const auto tools = one_tool("set", R"({"mode": {"type": "string", "enum": ["none", "auto"]},
                                        "note": {"type": "string"}, "opt": {"type": ["string", "null"]},
                                        "n": {"type": "integer"}})");
  auto args = [&](const std::string& k, const std::string& v) {
    auto d = parse_all_modes(kM2, m2_call("set", k, v), false, tools);
    return d.tool_calls.size() == 1 ? d.tool_calls[0].arguments_json : describe(d);
  };
  EXPECT_EQ(args("mode", "none"), R"({"mode": "none"})");  // was null
  EXPECT_EQ(args("note", "Nil"), R"({"note": "Nil"})");    // was null
  EXPECT_EQ(args("note", "null"), R"({"note": "null"})");  // a string parameter without null
  EXPECT_EQ(args("opt", "none"), R"({"opt": null})");      // the schema allows null
  EXPECT_EQ(args("n", "None"), R"({"n": null})");          // the schema allows no string
  // No schema (unknown parameter): vLLM's rule, the word is null.
  EXPECT_EQ(args("other", "none"), R"({"other": null})");
}

// ---- unknown tools ----

TEST(OddOutput, CallsToUnknownToolsAreDroppedUnlessKept) {
  const std::string text = "Hi." + m2_call("delete_all", "x", "1") + m2_call("get_weather", "city", "Oslo");
  auto d = parse_all_modes(kM2, text, false);
  EXPECT_EQ(d.content, "Hi.");
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_call_deltas.front().index, 0u);  // the kept call is call 0
  ParserOptions keep;
  keep.keep_unknown_tool_calls = true;
  d = parse_all_modes(kM2, text, false, testing::test_tools(), keep);
  ASSERT_EQ(d.tool_calls.size(), 2u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].name, "delete_all");
  // M3 and M1 too.
  d = parse_all_modes(kM3, NS + "<tool_call>" + NS + "<invoke name=\"nope\">" + NS + "<a>1" + NS + "</a>" + NS +
                               "</invoke>" + NS + "</tool_call>ok", false);
  EXPECT_TRUE(d.tool_calls.empty()) << describe(d);
  EXPECT_EQ(d.content, "ok");
  d = parse_all_modes(kM1, "<tool_calls>\n{\"name\": \"nope\", \"arguments\": {}}\n{\"name\": \"run_code\", "
                           "\"arguments\": {\"code\": \"1\"}}\n</tool_calls>", false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].name, "run_code");
  EXPECT_EQ(d.content, "");
  // A dropped call whose block then goes wrong: the block is content as written, and the next
  // block is read afresh (the dropped call does not stay open).
  const std::string bad = "<minimax:tool_call><invoke name=\"nope\">junk</minimax:tool_call>";
  d = parse_all_modes(kM2, bad + " then " + m2_call("get_weather", "city", "A"), false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "A"})");
  EXPECT_EQ(d.content, bad + " then");
  // A request without tools has nothing to check against: the call stands.
  d = parse_all_modes(kM2, m2_call("anything", "x", "1"), false, nullptr);
  EXPECT_EQ(d.tool_calls.size(), 1u) << describe(d);
}

// ---- M2: a second </think> ----

TEST(OddOutput, M2SecondThinkEndIsDropped) {
  auto d = parse_all_modes(kM2, "r</think>\n\nanswer</think> more", true);
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "answer more");
  d = parse_all_modes(kM2, "r</think>a</thi", true);  // a prefix at the end is still text
  EXPECT_EQ(d.content, "a</thi");
}

// ---- M1: lines are independent ----

TEST(OddOutput, M1BadLineKeepsTheCallsAfterIt) {
  auto d = parse_all_modes(kM1, "<tool_calls>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"a\"}}\nnot json\n"
                                "{\"name\": \"run_code\", \"arguments\": {\"code\": \"b\"}}\n</tool_calls>", false);
  ASSERT_EQ(d.tool_calls.size(), 2u) << describe(d);
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"code": "b"})");
  EXPECT_EQ(d.content, "not json");
  // A bad line before the first call is content too.
  d = parse_all_modes(kM1, "<tool_calls>\n{oops}\n{\"name\": \"run_code\", \"arguments\": {}}\n</tool_calls>", false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.content, "{oops}");
}

// ---- M3 ----

std::string m3_call(const std::string& name, const std::string& body) {
  return NS + "<tool_call>" + NS + "<invoke name=\"" + name + "\">" + body + NS + "</invoke>" + NS + "</tool_call>";
}

TEST(OddOutput, M3NamespacedTagEndsAValue) {
  // get_weather.city is a string (it streams): the stray close tag is not part of it.
  auto d = parse_all_modes(kM3, m3_call("get_weather", NS + "<city>Beijing" + NS + "</wrong>" + NS + "</city>"), false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Beijing"})");
  // The block goes wrong at the stray tag: the rest of it is content (the call stands, closed).
  EXPECT_EQ(d.content, NS + "</wrong>" + NS + "</city>" + NS + "</invoke>");
  // A typed value alike.
  d = parse_all_modes(kM3, m3_call("get_weather", NS + "<days>3" + NS + "</wrong>" + NS + "</days>"), false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"days": 3})");
}

TEST(OddOutput, M3InvokeCutAfterItsOpeningTagIsNotACall) {
  const std::string first = NS + "<invoke name=\"get_weather\">" + NS + "<days>1" + NS + "</days>" + NS + "</invoke>";
  auto d = parse_all_modes(kM3, NS + "<tool_call>" + first + "\n" + NS + "<invoke name=\"get_weather\">", false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.content, "\n" + NS + "<invoke name=\"get_weather\">");
  // The same in M2, and an invoke that is the whole (cut) block: the block is content.
  d = parse_all_modes(kM2, "<minimax:tool_call><invoke name=\"get_weather\">", false);
  EXPECT_TRUE(d.tool_calls.empty()) << describe(d);
  EXPECT_EQ(d.content, "<minimax:tool_call><invoke name=\"get_weather\">");
}

TEST(OddOutput, M3EmptyArrayOrStringIsTheEmptyString) {
  const auto tools = one_tool("f", R"({"v": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
                                      "a": {"type": "array"}})");
  auto d = parse_all_modes(kM3, m3_call("f", NS + "<v>" + NS + "</v>" + NS + "<a>" + NS + "</a>"), false, tools);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"v": "", "a": []})");
}

TEST(OddOutput, M3LayoutBetweenChildrenIsNotText) {
  auto d = parse_all_modes(kM3, m3_call("get_weather", NS + "<opts>\n" + NS + "<lang>nb" + NS + "</lang>\n" + NS + "</opts>"),
                           false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"opts": {"lang": "nb"}})");
  // Real text beside children stays, under "$text" (vLLM's M3 parser).
  d = parse_all_modes(kM3, m3_call("get_weather", NS + "<opts>" + NS + "<lang>nb" + NS + "</lang>hi" + NS + "</opts>"), false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"opts": {"lang": "nb", "$text": "hi"}})");
}

TEST(OddOutput, M3NestedToolCallElementDoesNotEndTheBlock) {
  auto d = parse_all_modes(kM3,
                           m3_call("get_weather", NS + "<opts>" + NS + "<tool_call>x" + NS + "</tool_call>" + NS +
                                                      "<invoke>y" + NS + "</invoke>" + NS + "</opts>" + NS + "<days>2" +
                                                      NS + "</days>"),
                           false);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"opts": {"tool_call": "x", "invoke": "y"}, "days": 2})");
  EXPECT_EQ(d.content, "");
}

TEST(OddOutput, M3PropertiesUnderATopLevelOneOfAreTyped) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"oneOf": [{"type": "object", "properties": {"n": {"type": "integer"}}},
                 {"type": "object", "properties": {"b": {"type": "boolean"}}}]}}}])");
  auto d = parse_all_modes(kM3, m3_call("f", NS + "<n>7" + NS + "</n>" + NS + "<b>true" + NS + "</b>"), false, tools);
  ASSERT_EQ(d.tool_calls.size(), 1u) << describe(d);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"n": 7, "b": true})");
}

// A long typed M2 parameter fed in token-sized pieces: each feed resumes the search for its
// closing tag (it used to start again from the parameter's start). Correctness only.
TEST(OddOutput, M2LongTypedParameterInSmallPieces) {
  std::string ids = "[";
  for (int i = 0; i < 60000; ++i) ids += (i ? ", " : "") + std::to_string(i % 1000);
  ids += "]";
  const std::string text = m2_call("get_weather", "ids", ids);
  std::vector<size_t> cuts;
  for (size_t c = 4; c < text.size(); c += 4) cuts.push_back(c);
  const auto t0 = std::chrono::steady_clock::now();
  auto d = testing::parse_cut(kM2, text, cuts, false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{\"ids\": " + ids + "}");
  testing::expect_same(d, testing::parse_cut(kM2, text, {}, false), "whole");
  std::printf("[ long M2 parameter ] %zu bytes in %zu pieces: %.1f ms\n", text.size(), cuts.size() + 1, ms);
}

// 20,000 nested levels (660 KB): deeper than 128 levels the value is the text as written. Checked
// for correctness only (no timing assertion); the time is printed.
TEST(OddOutput, M3DeepNestingIsBoundedAndFast) {
  const int kDepth = 20000;
  std::string body;
  for (int i = 0; i < kDepth; ++i) body += NS + "<a>";
  body += "x";
  for (int i = 0; i < kDepth; ++i) body += NS + "</a>";
  const std::string text = m3_call("get_weather", NS + "<opts>" + body + NS + "</opts>");
  const auto t0 = std::chrono::steady_clock::now();
  auto d = testing::parse_cut(kM3, text, {}, false);
  const double whole_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(d.tool_calls.size(), 1u) << d.content.substr(0, 200);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{\"opts\": " + nlohmann::json(body).dump() + "}");
  // In token-sized pieces too (the reader resumes where it stopped: tool_blocks.h, ScanCache).
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<size_t> cuts;
  for (size_t c = 5; c < text.size(); c += 5) cuts.push_back(c);
  auto c = testing::parse_cut(kM3, text, cuts, false);
  const double chunked_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  testing::expect_same(d, c, "5-byte pieces");
  std::printf("[ deep M3 nesting ] %d levels, %zu bytes: whole %.1f ms, in %zu pieces %.1f ms\n", kDepth, text.size(),
              whole_ms, cuts.size() + 1, chunked_ms);
  // At the bound: 128 levels are still rebuilt as objects.
  std::string at;
  for (int i = 0; i < 127; ++i) at += NS + "<a>";
  at += "x";
  for (int i = 0; i < 127; ++i) at += NS + "</a>";
  d = parse_full(kM3, m3_call("get_weather", NS + "<opts>" + at + NS + "</opts>"), testing::test_tools(), false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json.substr(0, 20), R"({"opts": {"a": {"a":)");
}

}  // namespace
}  // namespace mmx::chat
