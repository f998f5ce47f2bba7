// Malformed and truncated model outputs: nothing throws, nothing is lost. A tool-call block that
// goes wrong before its first call opened comes back verbatim as content; one that goes wrong
// after a call was streamed keeps the calls (the open one closed) and the unparsable rest of the
// block is content (docs/output-parsing.md, "Streaming tool calls"). Every case runs whole, byte
// by byte and in random chunks.
#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::parse_all_modes;
constexpr auto kM2 = OutputFormat::kM2;
constexpr auto kM3 = OutputFormat::kM3;
constexpr auto kM1 = OutputFormat::kM1;

TEST(Malformed, EmptyOutput) {
  for (auto f : {OutputFormat::kM2, OutputFormat::kM3, OutputFormat::kM1}) {
    for (bool sir : {true, false}) {
      auto d = parse_all_modes(f, "", sir);
      EXPECT_TRUE(d.empty()) << testing::describe(d);
    }
  }
}

TEST(Malformed, OnlyTheEndTag) {
  auto d = parse_all_modes(kM2, "</think>", true);
  EXPECT_TRUE(d.empty()) << testing::describe(d);
  d = parse_all_modes(kM2, "</think>", false);
  EXPECT_TRUE(d.empty()) << testing::describe(d);
}

// M2: every later </think> is dropped from the content (vLLM's minimax_m2 reasoning parser,
// DOUBLE_END_TOKEN); it used to leak into the content.
TEST(Malformed, StrayThinkEndTwice) {
  auto d = parse_all_modes(kM2, "r</think>\n\nanswer</think>more", true);
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "answermore");
  d = parse_all_modes(kM2, "</think>a</think>b", false);
  EXPECT_EQ(d.content, "ab");
  d = parse_all_modes(kM3, "</mm:think>a</mm:think>b", false);  // M3: a later end tag is content (vLLM)
  EXPECT_EQ(d.content, "a</mm:think>b");
}

TEST(Malformed, SecondThinkStartIsContent) {
  auto d = parse_all_modes(kM2, "r</think>\n\nx<think>y</think>z", true);
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "x<think>yz");  // (the </think> is dropped: StrayThinkEndTwice)
}

TEST(Malformed, PartialTagsAtTheEndAreText) {
  EXPECT_EQ(parse_all_modes(kM2, "r</think>\n\nhello <minimax:tool", true).content,
            "hello <minimax:tool");
  EXPECT_EQ(parse_all_modes(kM2, "abc</thi", true).reasoning, "abc</thi");
  EXPECT_EQ(parse_all_modes(kM2, "</thi", false).content, "</thi");
  EXPECT_EQ(parse_all_modes(kM3, "x ]<]minimax[>[<tool", false).content, "x ]<]minimax[>[<tool");
  EXPECT_EQ(parse_all_modes(kM1, "a <tool_c", false).content, "a <tool_c");
  EXPECT_EQ(parse_all_modes(kM2, "a <", false).content, "a <");
}

TEST(Malformed, MissingInvokeEnd) {
  std::string block =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
      "name=\"city\">Paris</parameter>\n"
      "</minimax:tool_call>";
  // The call was streamed when its parameter closed; the block end closes it.
  auto d = parse_all_modes(kM2, "r</think>\n\nok\n" + block, true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  EXPECT_EQ(d.content, "ok");
}

TEST(Malformed, OneGoodOneBrokenInvokeKeepsBothCalls) {
  std::string block =
      "<minimax:tool_call>\n<invoke name=\"get_weather\"><parameter "
      "name=\"city\">A</parameter></invoke>\n"
      "<invoke name=\"get_weather\"><parameter name=\"city\">B</parameter>\n</minimax:tool_call>";
  auto d = parse_all_modes(kM2, block, false);
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "A"})");
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"city": "B"})");
  EXPECT_EQ(d.content, "");
}

TEST(Malformed, StrayTextAfterAStreamedCallIsContent) {
  std::string block =
      "<minimax:tool_call>\n<invoke name=\"get_weather\"><parameter name=\"city\">A</parameter>"
      "oops</invoke>\n<invoke name=\"run_code\"></invoke>\n</minimax:tool_call>\n\nafter";
  auto d = parse_all_modes(kM2, "before " + block, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);  // nothing after the stray text is read as a call
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "A"})");
  // Whitespace right before the block and right before its end tag is dropped, as around a
  // block that parsed.
  EXPECT_EQ(d.content, "beforeoops</invoke>\n<invoke name=\"run_code\"></invoke>\n\nafter");
}

TEST(Malformed, BrokenBlockDoesNotPoisonTheNextOne) {
  std::string bad = "<minimax:tool_call>\nhello</minimax:tool_call>";
  std::string good =
      "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">2</parameter>"
      "</invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, bad + " mid " + good + " end", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"days": 2})");
  EXPECT_EQ(d.content, bad + " mid end");
}

TEST(Malformed, MissingBlockEndKeepsTheFinishedCall) {
  std::string text =
      "Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
      "name=\"city\">Paris"
      "</parameter>\n</invoke>\n";
  auto d = parse_all_modes(kM2, "r</think>\n\n" + text, true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  EXPECT_EQ(d.content, "Checking.");
  // Cut inside the second parameter: the call is closed with what had closed, the rest is text.
  std::string cut =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris"
      "</parameter>\n<parameter name=\"days\">3";
  d = parse_all_modes(kM2, cut, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  EXPECT_EQ(d.content, "<parameter name=\"days\">3");
  // Cut inside a string parameter: the value written so far is the value.
  d = parse_all_modes(kM2, "<minimax:tool_call><invoke name=\"run_code\"><parameter name=\"code\">print(", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"J({"code": "print("})J");
  EXPECT_EQ(d.content, "");
  // Cut inside the invoke tag: no call had started, so the whole block is text.
  std::string early = "x <minimax:tool_call>\n<invoke name=\"get_wea";
  d = parse_all_modes(kM2, early, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, early);
}

TEST(Malformed, MissingParameterEnd) {
  std::string block =
      "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">Paris</invoke>"
      "</minimax:tool_call>";
  // city is a string parameter: its value streams as written, and </invoke> ends it.
  auto d = parse_all_modes(kM2, block, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  EXPECT_EQ(d.content, "");
  // days is an integer: typed only once </parameter> closes it, which never comes.
  std::string typed =
      "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">3</invoke>"
      "</minimax:tool_call>";
  // The invoke never got an element: it is not a call, and the block is content as written.
  d = parse_all_modes(kM2, typed, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, typed);
}

TEST(Malformed, ParameterWithoutEndSwallowsTheNextOneLikeVllm) {
  std::string block =
      "<minimax:tool_call><invoke name=\"run_code\"><parameter name=\"code\">a\n<parameter "
      "name=\"timeout\">"
      "5</parameter></invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, block, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"code": "a\n<parameter name=\"timeout\">5"})");
}

TEST(Malformed, EmptyBlockIsContent) {
  std::string block = "<minimax:tool_call>\n</minimax:tool_call>";
  auto d = parse_all_modes(kM2, block, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, block);
}

TEST(Malformed, UnknownToolIsBestEffortStrings) {
  std::string block =
      "<minimax:tool_call><invoke name=\"no_such_tool\"><parameter name=\"n\">5</parameter>"
      "<parameter name=\"obj\">{\"a\": 1}</parameter></invoke></minimax:tool_call>";
  ParserOptions keep;  // (by default the call is dropped: odd_output_test.cpp)
  keep.keep_unknown_tool_calls = true;
  auto d = parse_all_modes(kM2, block, false, testing::test_tools(), keep);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "no_such_tool");
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"n": "5", "obj": "{\"a\": 1}"})");
  // No tools at all: the same.
  d = testing::parse_all_modes(kM2, block, false, nlohmann::json());
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"n": "5", "obj": "{\"a\": 1}"})");
}

TEST(Malformed, BadJsonInTypedParametersFallsBackToString) {
  std::string block =
      "<minimax:tool_call><invoke name=\"get_weather\">"
      "<parameter name=\"days\">three</parameter><parameter name=\"ratio\">1/2</parameter>"
      "<parameter name=\"metric\">maybe</parameter><parameter name=\"opts\">{lang: en</parameter>"
      "<parameter name=\"tags\">[\"a\",</parameter><parameter name=\"city\">None</parameter>"
      "</invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, block, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  // The word None is the string for a string parameter that allows no null (m2_null_literals;
  // vLLM makes it null).
  EXPECT_EQ(
      d.tool_calls[0].arguments_json,
      R"({"days": "three", "ratio": "1/2", "metric": "maybe", "opts": "{lang: en", "tags": "[\"a\",", )"
      R"("city": "None"})");
}

TEST(Malformed, ToolBlockInsideReasoningStaysReasoning) {
  std::string block =
      "<minimax:tool_call><invoke name=\"get_weather\"></invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, "maybe " + block + " later", true);
  EXPECT_EQ(d.reasoning, "maybe " + block + " later");
  EXPECT_TRUE(d.tool_calls.empty());
}

TEST(Malformed, InvalidUtf8DoesNotThrow) {
  std::string bad = "\xff\xfe";
  std::string block = "<minimax:tool_call><invoke name=\"run_code\"><parameter name=\"code\">" +
                      bad + "</parameter></invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, "r" + bad + "</think>c" + bad + block, true);
  EXPECT_EQ(d.reasoning, "r" + bad);
  EXPECT_EQ(d.content, "c" + bad);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{\"code\": \"\xEF\xBF\xBD\xEF\xBF\xBD\"}");
}

TEST(Malformed, M3Truncated) {
  std::string text =
      "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<city>Pa";
  // city is a string parameter: its value streams as written, and the end of output ends it.
  auto d = parse_all_modes(kM3, text, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"city": "Pa"})");
  EXPECT_EQ(d.content, "");
  // days is an integer: typed only once its closing tag comes, which never does; so the invoke
  // got no element, is no call, and the block is content as written (vLLM alike).
  text = "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<days>3";
  d = parse_all_modes(kM3, text, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, text);
}

TEST(Malformed, M3StrayTextBetweenParameters) {
  std::string text =
      "]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"get_weather\">junk]<]minimax[>[<city>A"
      "]<]minimax[>[</city>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>";
  auto d = parse_all_modes(kM3, text, false);  // the invoke got no element: the block is content
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, text);
  // Stray text before the first invoke: the whole block is content.
  std::string early = "]<]minimax[>[<tool_call> junk ]<]minimax[>[</tool_call>";
  d = parse_all_modes(kM3, early, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, early);
}

TEST(Malformed, M3MismatchedNestedTagsAreBestEffort) {
  // An unmatched close tag pops up to its opener (vLLM's stack rule); nothing is dropped.
  std::string NS = "]<]minimax[>[";
  std::string text = NS + "<tool_call>" + NS + "<invoke name=\"get_weather\">" + NS + "<opts>" +
                     NS + "<lang>en" + NS + "<depth>2" + NS + "</lang>" + NS + "</opts>" + NS +
                     "</invoke>" + NS + "</tool_call>";
  auto d = parse_all_modes(kM3, text, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"opts": {"lang": {"depth": "2", "$text": "en"}}})");
}

TEST(Malformed, M1BadLineAfterAGoodOneIsContent) {
  std::string text =
      "<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {}}\nnot json\n</tool_calls>";
  auto d = parse_all_modes(kM1, text, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{}");
  EXPECT_EQ(d.content, "not json");
  // A bad first line: each line is independent (vLLM), the call after it stands.
  std::string first = "<tool_calls>\nnot json\n{\"name\": \"run_code\", \"arguments\": {}}\n</tool_calls>";
  d = parse_all_modes(kM1, first, false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.content, "not json");
  // No line is a call: the block is content as written.
  std::string none = "<tool_calls>\nnot json\n{\"x\": 1}\n</tool_calls>";
  d = parse_all_modes(kM1, none, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, none);
}

TEST(Malformed, FeedAfterFinishIsIgnored) {
  OutputParser p(kM2, testing::test_tools(), true);
  auto d = p.feed("a</think>b");
  d.append(p.finish());
  EXPECT_TRUE(p.feed("more").empty());
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(d.reasoning, "a");
  EXPECT_EQ(d.content, "b");
}

TEST(Malformed, MalformedToolsArrayIsIgnored) {
  nlohmann::json tools =
      nlohmann::json::parse(R"([1, "x", {"function": 3}, {"function": {"name": 5}},
      {"function": {"name": "get_weather", "parameters": "not a schema"}}])");
  std::string block =
      "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">3</parameter>"
      "</invoke></minimax:tool_call>";
  auto d = parse_all_modes(kM2, block, false, tools);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"days": "3"})");
}

}  // namespace
}  // namespace mmx::chat
