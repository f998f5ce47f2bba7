// Well-formed outputs of every MiniMax format (spec §6.2-6.5), each parsed whole, byte by byte
// and in seeded random chunks (parse_all_modes checks that all agree).
#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::parse_all_modes;
constexpr auto kM2 = OutputFormat::kM2;
constexpr auto kM3 = OutputFormat::kM3;
constexpr auto kM1 = OutputFormat::kM1;

std::string m2_call(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& params) {
  std::string s = "<invoke name=\"" + name + "\">\n";
  for (const auto& [k, v] : params) s += "<parameter name=\"" + k + "\">" + v + "</parameter>\n";
  return s + "</invoke>\n";
}

std::string m2_block(const std::string& invokes) {
  return "<minimax:tool_call>\n" + invokes + "</minimax:tool_call>";
}

// ---- M2 ----

TEST(M2, ReasoningOnlyTruncated) {
  auto d = parse_all_modes(kM2, "The user greets me.\nI should answer", true);
  EXPECT_EQ(d.reasoning, "The user greets me.\nI should answer");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty());
}

TEST(M2, ReasoningThenContentStripsSeparator) {
  auto d = parse_all_modes(kM2, "Say hello.\n</think>\n\nHello! How can I help?", true);
  EXPECT_EQ(d.reasoning, "Say hello.");
  EXPECT_EQ(d.content, "Hello! How can I help?");
}

TEST(M2, ReasoningEndsRightBeforeEos) {
  auto d = parse_all_modes(kM2, "thinking\n</think>\n\n", true);
  EXPECT_EQ(d.reasoning, "thinking");
  EXPECT_EQ(d.content, "");
}

TEST(M2, RepeatedThinkStartIsDropped) {
  auto d = parse_all_modes(kM2, "<think>plan</think>\n\nanswer", true);
  EXPECT_EQ(d.reasoning, "plan");
  EXPECT_EQ(d.content, "answer");
}

TEST(M2, ContentOneToolCall) {
  std::string text = "Need weather.\n</think>\n\nLet me check.\n" +
                     m2_block(m2_call("get_weather", {{"city", "Paris"}, {"days", "3"}}));
  auto d = parse_all_modes(kM2, text, true);
  EXPECT_EQ(d.reasoning, "Need weather.");
  EXPECT_EQ(d.content, "Let me check.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(d.tool_calls[0].id.size(), 29u);
}

TEST(M2, SeveralInvokesInOneBlock) {
  std::string text =
      "r</think>\n\n" + m2_block(m2_call("get_weather", {{"city", "Oslo"}}) +
                                 m2_call("run_code", {{"code", "print(1)"}, {"timeout", "2.5"}}) +
                                 m2_call("get_weather", {{"city", "Rome"}}));
  auto d = parse_all_modes(kM2, text, true);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 3u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Oslo"})");
  EXPECT_EQ(d.tool_calls[1].name, "run_code");
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"J({"code": "print(1)", "timeout": 2.5})J");
  EXPECT_EQ(d.tool_calls[2].arguments_json, R"({"city": "Rome"})");
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
}

TEST(M2, SeveralBlocks) {
  std::string text = "r</think>\n\nFirst.\n" + m2_block(m2_call("get_weather", {{"city", "A"}})) +
                     "\n" + m2_block(m2_call("get_weather", {{"city", "B"}})) + "\n";
  auto d = parse_all_modes(kM2, text, true);
  EXPECT_EQ(d.content, "First.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"city": "B"})");
}

TEST(M2, TextAfterBlockIsKept) {
  std::string text =
      "r</think>\n\nA\n" + m2_block(m2_call("get_weather", {{"city", "X"}})) + "\nDone.";
  auto d = parse_all_modes(kM2, text, true);
  EXPECT_EQ(d.content, "A\nDone.");
  EXPECT_EQ(d.tool_calls.size(), 1u);
}

TEST(M2, TypedParameters) {
  std::string text = "r</think>\n\n" +
                     m2_block(m2_call("get_weather", {{"days", " 7 "},
                                                      {"metric", "True"},
                                                      {"ratio", "2.0"},
                                                      {"opts", "{\"lang\": \"en\", \"depth\": 2}"},
                                                      {"tags", "[\"a\", \"b\"]"},
                                                      {"ids", "[1, 2, 3]"},
                                                      {"maybe", "null"},
                                                      {"unit", "c"}}));
  auto d = parse_all_modes(kM2, text, true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json,
            R"({"days": 7, "metric": true, "ratio": 2, "opts": {"lang": "en", "depth": 2}, )"
            R"("tags": ["a", "b"], "ids": [1, 2, 3], "maybe": null, "unit": "c"})");
}

TEST(M2, StringWithAngleBracketsAndNewlines) {
  std::string code = "\nif a < b and c > d:\n    print(\"<tag>\")\n\n";
  std::string text = "r</think>\n\n" + m2_block(m2_call("run_code", {{"code", code}}));
  auto d = parse_all_modes(kM2, text, true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  // vLLM strips the value's surrounding whitespace.
  EXPECT_EQ(d.tool_calls[0].arguments_json,
            R"J({"code": "if a < b and c > d:\n    print(\"<tag>\")"})J");
}

TEST(M2, Unicode) {
  std::string text = "思考中…\n</think>\n\n天気を調べます 🌤️\n" +
                     m2_block(m2_call("get_weather", {{"city", "東京 🌸"}}));
  auto d = parse_all_modes(kM2, text, true);
  EXPECT_EQ(d.reasoning, "思考中…");
  EXPECT_EQ(d.content, "天気を調べます 🌤️");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{\"city\": \"東京 🌸\"}");
}

TEST(M2, SingleQuotedAndUnquotedNames) {
  std::string text =
      "r</think><minimax:tool_call><invoke name='get_weather'><parameter name=city>Lima"
      "</parameter><parameter name='days'>2</parameter></invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, text, true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Lima", "days": 2})");
}

TEST(M2, NotStartingInReasoning) {
  auto d = parse_all_modes(kM2, "Plain answer.", false);
  EXPECT_EQ(d.content, "Plain answer.");
  EXPECT_EQ(d.reasoning, "");
  d = parse_all_modes(kM2, "</think>\n\nAnswer after an empty think.", false);
  EXPECT_EQ(d.content, "Answer after an empty think.");
  d = parse_all_modes(kM2, "<think>r</think>\n\nA", false);
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "A");
}

TEST(M2AppendThink, PrependsThinkAndKeepsReasoningInContent) {
  std::string text =
      "reason\n</think>\n\nHi\n" + m2_block(m2_call("get_weather", {{"city", "Paris"}}));
  auto d = parse_all_modes(OutputFormat::kM2AppendThink, text, true);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "<think>reason\n</think>\n\nHi");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  EXPECT_EQ(parse_all_modes(OutputFormat::kM2AppendThink, "", true).content, "<think>");
}

TEST(M2, IdsAreDeterministicPerSeed) {
  std::string text = m2_block(m2_call("get_weather", {{"city", "A"}}));
  auto a = parse_full(kM2, text, testing::test_tools(), false, 1);
  auto b = parse_full(kM2, text, testing::test_tools(), false, 1);
  auto c = parse_full(kM2, text, testing::test_tools(), false, 2);
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, b.tool_calls[0].id);
  EXPECT_NE(a.tool_calls[0].id, c.tool_calls[0].id);
}

// ---- M3 ----

const std::string NS = "]<]minimax[>[";
std::string tag(const std::string& name, const std::string& inner) {
  return NS + "<" + name + ">" + inner + NS + "</" + name + ">";
}
std::string m3_block(const std::string& invokes) {
  return NS + "<tool_call>\n" + invokes + NS + "</tool_call>";
}
std::string m3_invoke(const std::string& name, const std::string& params) {
  return NS + "<invoke name=\"" + name + "\">" + params + NS + "</invoke>\n";
}

TEST(M3, ReasoningAndContent) {
  auto d = parse_all_modes(kM3, "plan it</mm:think>The answer.", true);
  EXPECT_EQ(d.reasoning, "plan it");
  EXPECT_EQ(d.content, "The answer.");
  d = parse_all_modes(kM3, "<mm:think>plan</mm:think>Answer", false);
  EXPECT_EQ(d.reasoning, "plan");
  EXPECT_EQ(d.content, "Answer");
  d = parse_all_modes(kM3, "</mm:think>Direct answer", false);  // thinking_mode=disabled echo
  EXPECT_EQ(d.content, "Direct answer");
}

TEST(M3, NestedObjectsArraysAndTypes) {
  std::string params =
      tag("city", "Paris") + tag("days", "3") + tag("metric", "false") +
      tag("opts", tag("lang", "fr") + tag("depth", "2")) +
      tag("tags", tag("item", "a<b") + tag("item", "line1\nline2")) +
      tag("ids", tag("item", "1") + tag("item", "2")) +
      tag("rows", tag("item", tag("k", "x") + tag("v", "1.5")) + tag("item", tag("k", "y")));
  std::string text = "r</mm:think>Calling.\n" + m3_block(m3_invoke("get_weather", params));
  auto d = parse_all_modes(kM3, text, true);
  EXPECT_EQ(d.content, "Calling.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(
      d.tool_calls[0].arguments_json,
      R"({"city": "Paris", "days": 3, "metric": false, "opts": {"lang": "fr", "depth": 2}, )"
      R"("tags": ["a<b", "line1\nline2"], "ids": [1, 2], "rows": [{"k": "x", "v": 1.5}, {"k": "y"}]})");
}

TEST(M3, NullOmittedAndSeveralInvokes) {
  std::string text = m3_block(m3_invoke("get_weather", tag("city", " Oslo ")) +
                              m3_invoke("run_code", tag("code", "x = 1\n") + tag("timeout", "10")));
  auto d = parse_all_modes(kM3, text, false);
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": " Oslo "})");  // M3 keeps whitespace
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"code": "x = 1\n", "timeout": 10})");
}

TEST(M3, UnknownToolKeepsStrings) {
  std::string text =
      m3_block(m3_invoke("search", tag("q", "42") + tag("filters", tag("site", "a.b"))));
  ParserOptions keep;  // (by default a call to a tool the request does not list is dropped)
  keep.keep_unknown_tool_calls = true;
  auto d = parse_all_modes(kM3, text, false, testing::test_tools(), keep);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"q": "42", "filters": {"site": "a.b"}})");
}

TEST(M3, UnicodeAndEmptyValues) {
  std::string text = m3_block(
      m3_invoke("get_weather", tag("city", "Zürich 🏔") + tag("tags", "") + tag("opts", "")));
  auto d = parse_all_modes(kM3, text, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json,
            "{\"city\": \"Zürich 🏔\", \"tags\": [], \"opts\": {}}");
}

TEST(M3, RepeatedTagCollapsesAndAdditionalProperties) {
  nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {
        "env": {"type": "object", "additionalProperties": {"type": "integer"}},
        "pick": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}])");
  std::string params = tag("env", tag("A", "1") + tag("B", "x") + tag("A", "2")) +
                       tag("pick", "7") + tag("extra", tag("k", "v"));
  auto d = parse_all_modes(kM3, m3_block(m3_invoke("f", params)), false, tools);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json,
            R"({"env": {"A": [1, 2], "B": "x"}, "pick": 7, "extra": {"k": "v"}})");
}

TEST(M3, RepeatedStartTagAtReasoningStart) {
  auto d = parse_all_modes(kM3, "<mm:think>a</mm:think>\n\nb", true);
  EXPECT_EQ(d.reasoning, "a");
  EXPECT_EQ(d.content, "b");
}

TEST(M2, DuplicateParameterAndUnionTypes) {
  nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {
        "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "s": {"type": ["string", "integer"]}}}}}])");
  std::string text = m2_block(m2_call("f", {{"n", "1"}, {"s", "12"}, {"n", "nil"}, {"x", "[1]"}}));
  auto d = parse_all_modes(kM2, text, false, tools);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  // Priority integer > string; an undeclared parameter is a string. A repeated key is written
  // again where it occurs (each parameter streams as it closes), so a JSON reader sees its first
  // position and its last value, as vLLM's dict does.
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"n": 1, "s": 12, "n": null, "x": "[1]"})");
  EXPECT_EQ(nlohmann::ordered_json::parse(d.tool_calls[0].arguments_json).dump(),
            R"({"n":null,"s":12,"x":"[1]"})");
}

// ---- Text-01 / M1 ----

TEST(M1, ReasoningContentAndJsonLines) {
  std::string text =
      "<think>Two lookups.</think>\n\nChecking both.\n<tool_calls>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "{\"name\": \"run_code\", \"arguments\": {\"code\": \"a<b\\nc\"}}\n</tool_calls>";
  auto d = parse_all_modes(kM1, text, false);
  EXPECT_EQ(d.reasoning, "Two lookups.");
  EXPECT_EQ(d.content, "Checking both.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"code": "a<b\nc"})");
}

TEST(M1, UnterminatedBlockIsStillParsedAtFinish) {
  std::string text =
      "<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Nice\"}}\n";
  auto d = parse_all_modes(kM1, text, false);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Nice"})");
}

TEST(M1, PlainAnswer) {
  auto d = parse_all_modes(kM1, "Just text, 😀 no tools.", false);
  EXPECT_EQ(d.content, "Just text, 😀 no tools.");
}

// The server streams deltas: text must come out as soon as it cannot be part of a tag.
TEST(Streaming, HoldsBackOnlyWhatCouldBeATag) {
  OutputParser p(kM2, testing::test_tools(), true);
  EXPECT_EQ(p.feed("Thinking about it").reasoning, "Thinking about it");
  EXPECT_EQ(p.feed("</thi").reasoning, "");
  auto d = p.feed("nk>\n\nSure");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Sure");
  EXPECT_EQ(p.feed(", checking <").content, ", checking");  // " <" waits
  EXPECT_EQ(p.feed("b>").content, " <b>");
  EXPECT_EQ(p.feed("\n<minimax:tool_call>\n<invoke name=\"get_weather\">").content, "");
  d = p.feed("<parameter name=\"city\">Rome</parameter></invoke>\n</minimax:tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Rome"})");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(p.finish().empty());
}

TEST(OutputFormat, Names) {
  EXPECT_EQ(output_format_from_name("minimax_m2"), OutputFormat::kM2);
  EXPECT_EQ(output_format_from_name("minimax_m2_append_think"), OutputFormat::kM2AppendThink);
  EXPECT_EQ(output_format_from_name("minimax_m3"), OutputFormat::kM3);
  EXPECT_EQ(output_format_from_name("minimax"), OutputFormat::kM1);
  EXPECT_FALSE(output_format_from_name("hermes").has_value());
}

}  // namespace
}  // namespace mmx::chat
