// Streamed tool calls (OpenAI `delta.tool_calls[i]` pieces): *when* each piece comes out. The
// pieces' agreement with the whole calls, in every chunking, is checked for every case of the
// parser suite by parse_helpers.h (expect_pieces_match_calls); here we check the timing: a
// call's id and name as soon as its opening tag parsed, one fragment per parameter as it
// closes, the closing brace at `</invoke>`, indices running across blocks. A call's id and name
// wait for its first element (a closed parameter, a string value's start, `</invoke>`): an invoke
// cut off before it is no call.
#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::feed_parts;
using testing::pieces;

TEST(ToolCallStream, M2ArgumentsStreamPerParameter) {
  auto d = feed_parts(OutputFormat::kM2,
                      {"Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">",
                       "\n<parameter name=\"city\">Pa", "ris</parameter>",
                       "\n<parameter name=\"days\">3</parameter>\n", "</invoke>",
                       "\n</minimax:tool_call>"});
  EXPECT_EQ(d[0].content, "Checking.");
  EXPECT_EQ(pieces(d[0]), "");  // the invoke has no element yet
  EXPECT_EQ(pieces(d[1]), R"([0 get_weather {"city": "Pa])");  // id + name, and a string value as it is written
  ASSERT_EQ(d[1].tool_call_deltas.size(), 1u);
  EXPECT_EQ(d[1].tool_call_deltas[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(pieces(d[2]), R"([0 ris"])");
  EXPECT_EQ(pieces(d[3]), R"([0 , "days": 3])");  // an integer once its parameter closed
  EXPECT_TRUE(d[3].tool_calls.empty());
  EXPECT_EQ(pieces(d[4]), "[0 }]");
  ASSERT_EQ(d[4].tool_calls.size(), 1u);
  EXPECT_EQ(d[4].tool_calls[0].arguments_json, R"({"city": "Paris", "days": 3})");
  EXPECT_TRUE(d[5].empty());
}

// A string value is whitespace-stripped and, where the schema allows null, the literal
// null/none/nil is null (m2_convert): what could still turn out to be one of those is held back,
// and so is trailing whitespace.
TEST(ToolCallStream, M2StringValuesHoldBackWhatIsUndecided) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "run_code",
    "parameters": {"type": "object", "properties": {"code": {"type": ["string", "null"]}}}}}])");
  auto d = feed_parts(OutputFormat::kM2,
                      {"<minimax:tool_call><invoke name=\"run_code\"><parameter name=\"code\">\n  No", "ne",
                       " \n", "</parameter><parameter name=\"code\">Non", "esuch x ", " y\n", "</parameter>",
                       "</invoke></minimax:tool_call>"},
                      tools);
  EXPECT_EQ(pieces(d[0]), "[0 run_code {\"code\": ]");  // "No" may still be None
  EXPECT_EQ(pieces(d[1]), "");                          // "None" may still be "None..."
  EXPECT_EQ(pieces(d[2]), "");                          // trailing whitespace
  EXPECT_EQ(pieces(d[3]), "[0 null, \"code\": ]");
  EXPECT_EQ(pieces(d[4]), "[0 \"Nonesuch x]");           // no longer a literal; its trailing space held
  EXPECT_EQ(pieces(d[5]), "[0   y]");
  EXPECT_EQ(pieces(d[6]), "[0 \"]");
  ASSERT_EQ(d[7].tool_calls.size(), 1u);
  EXPECT_EQ(d[7].tool_calls[0].arguments_json, R"({"code": null, "code": "Nonesuch x  y"})");
}

TEST(ToolCallStream, M2StringValueSplitInsideACharacterAndATag) {
  const std::string s = "<minimax:tool_call><invoke name=\"run_code\"><parameter name=\"code\">a\xE6\x9D";
  auto d = feed_parts(OutputFormat::kM2, {s, "\xB1" "b</para", "meter></invoke></minimax:tool_call>"});
  EXPECT_EQ(pieces(d[0]), "[0 run_code {\"code\": \"a]");  // the incomplete character is held
  EXPECT_EQ(pieces(d[1]), "[0 \xE6\x9D\xB1" "b]");            // "</para" may begin </parameter>
  EXPECT_EQ(pieces(d[2]), "[0 \"}]");
}

TEST(ToolCallStream, M2CallWithoutParameters) {
  auto d = feed_parts(OutputFormat::kM2,
                      {"<minimax:tool_call><invoke name=\"run_code\">", "</invoke></minimax:tool_call>"});
  EXPECT_EQ(pieces(d[0]), "");  // id and name come with </invoke>
  EXPECT_EQ(pieces(d[1]), "[0 run_code {}]");
}

TEST(ToolCallStream, ParallelCallsAcrossBlocksAreIndexedInOrder) {
  const std::string call_a =
      "<invoke name=\"get_weather\"><parameter name=\"city\">A</parameter></invoke>";
  const std::string call_b = "<invoke name=\"run_code\"><parameter name=\"code\">x</parameter></invoke>";
  auto d = feed_parts(OutputFormat::kM2, {"<minimax:tool_call>" + call_a + call_b + "</minimax:tool_call>",
                                          " and <minimax:tool_call>" + call_a + "</minimax:tool_call>"});
  EXPECT_EQ(pieces(d[0]), R"([0 get_weather {"city": "A"}][1 run_code {"code": "x"}])");
  EXPECT_EQ(pieces(d[1]), R"([2 get_weather {"city": "A"}])");
  ASSERT_EQ(d[0].tool_calls.size(), 2u);
  ASSERT_EQ(d[1].tool_calls.size(), 1u);
  EXPECT_NE(d[0].tool_calls[0].id, d[1].tool_calls[0].id);
}

TEST(ToolCallStream, M3ArgumentsStreamPerParameter) {
  const std::string NS = "]<]minimax[>[";
  auto d = feed_parts(OutputFormat::kM3,
                      {NS + "<tool_call>\n" + NS + "<invoke name=\"get_weather\">",
                       NS + "<city>Oslo" + NS + "</city>",
                       NS + "<opts>" + NS + "<lang>nb" + NS + "</lang>",  // nested: still open
                       NS + "</opts>", NS + "</invoke>\n" + NS + "</tool_call>"});
  EXPECT_EQ(pieces(d[0]), "");
  EXPECT_EQ(pieces(d[1]), R"([0 get_weather {"city": "Oslo"])");
  EXPECT_EQ(pieces(d[2]), "");
  EXPECT_EQ(pieces(d[3]), R"([0 , "opts": {"lang": "nb"}])");
  EXPECT_EQ(pieces(d[4]), "[0 }]");
}

TEST(ToolCallStream, M1OnePiecePerLine) {
  auto d = feed_parts(OutputFormat::kM1,
                      {"<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\"}}",
                       "\n{\"name\": \"run_code\", \"arguments\": {}}\n", "</tool_calls>"});
  EXPECT_EQ(pieces(d[0]), "");  // the line is complete only at its newline
  EXPECT_EQ(pieces(d[1]), R"([0 get_weather {"city": "X"}][1 run_code {}])");
  EXPECT_EQ(d[1].tool_calls.size(), 2u);
}

TEST(ToolCallStream, BlockThatFailsAfterACallStartedFinishesIt) {
  auto d = feed_parts(OutputFormat::kM2,
                      {"<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">A</parameter>",
                       "junk", "</minimax:tool_call> then text"});
  EXPECT_EQ(pieces(d[0]), R"([0 get_weather {"city": "A"])");
  EXPECT_EQ(pieces(d[1]), "[0 }]");  // decided as soon as the stray text is seen
  EXPECT_EQ(d[1].content, "junk");
  EXPECT_EQ(d[2].content + d[3].content, " then text");
}

}  // namespace
}  // namespace mmx::chat
