// M3 string parameters streamed as the model writes them (output_parser.cpp, read_m3_string):
// `{"k": "` once the value's first bytes show it is flat text, then the escaped text piece by
// piece (never an escape or a UTF-8 character cut in two, nothing that may begin a closing tag),
// then `"` at the close. Typed values (integer, object, ...) still come whole at their close.
// Every text here also goes through parse_all_modes: whole == per byte == random chunks, and the
// pieces of each call join to its arguments. The oracle for a value is the text the model wrote
// (json::parse of the arguments gives it back), not a stored string.
#include <random>

#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::feed_parts;
using testing::parse_all_modes;
using testing::pieces;

const std::string NS = "]<]minimax[>[";

std::string block(const std::string& invokes) { return NS + "<tool_call>\n" + invokes + NS + "</tool_call>"; }
std::string invoke(const std::string& name, const std::string& params) {
  return NS + "<invoke name=\"" + name + "\">" + params + NS + "</invoke>\n";
}
std::string param(const std::string& key, const std::string& value) {
  return NS + "<" + key + ">" + value + NS + "</" + key + ">";
}

// Whether `s` is valid UTF-8 (no character cut at either end).
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Whether a piece of JSON text ends inside an escape (`\`, or `\u` with fewer than 4 digits).
bool ends_mid_escape(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') continue;
    const size_t len = i + 1 < s.size() && s[i + 1] == 'u' ? 6 : 2;  // \uXXXX or \n, \", ...
    if (i + len > s.size()) return true;
    i += len - 1;
  }
  return false;
}

// Feeds `text` byte by byte; expects every piece whole (valid UTF-8, no cut escape); returns the
// pieces of call 0 after its first one (the value's pieces, the key's piece first).
std::vector<std::string> byte_pieces(const std::string& text, const nlohmann::json& tools = testing::test_tools()) {
  std::vector<std::string> parts;
  for (char c : text) parts.emplace_back(1, c);
  std::vector<std::string> out;
  for (const ParsedDelta& d : feed_parts(OutputFormat::kM3, parts, tools))
    for (const ToolCallDelta& p : d.tool_call_deltas) {
      EXPECT_TRUE(valid_utf8(p.arguments)) << "piece cuts a character: [" << p.arguments << "]";
      EXPECT_FALSE(ends_mid_escape(p.arguments)) << "piece cuts an escape: [" << p.arguments << "]";
      if (!p.arguments.empty()) out.push_back(p.arguments);
    }
  return out;
}

// The one call of `text` (all chunkings agree), its arguments parsed.
nlohmann::json only_call_args(const std::string& text, const nlohmann::json& tools = testing::test_tools()) {
  const ParsedDelta d = parse_all_modes(OutputFormat::kM3, text, false, tools);
  EXPECT_EQ(d.tool_calls.size(), 1u) << testing::describe(d);
  if (d.tool_calls.size() != 1) return nullptr;
  return nlohmann::json::parse(d.tool_calls[0].arguments_json, nullptr, false);
}

TEST(M3StringStream, PiecesAsWritten) {
  auto d = feed_parts(OutputFormat::kM3,
                      {NS + "<tool_call>\n" + NS + "<invoke name=\"run_code\">" + NS + "<code>", "pri", "nt(1)",
                       "\n]<]mini", "max[>[</co", "de>" + NS + "<timeout>", "2.5" + NS + "</timeout>",
                       NS + "</invoke>\n" + NS + "</tool_call>"});
  EXPECT_EQ(pieces(d[0]), "");                      // nothing of the value yet: it may be nested
  EXPECT_EQ(pieces(d[1]), R"([0 run_code {"code": "pri])");  // flat text: the call, the key and the text so far
  EXPECT_EQ(pieces(d[2]), "[0 nt(1)]");
  EXPECT_EQ(pieces(d[3]), "[0 \\n]");               // "]<]mini" may begin the closing tag
  EXPECT_EQ(pieces(d[4]), "");
  EXPECT_EQ(pieces(d[5]), "[0 \"]");                // closed; the number waits for its close
  EXPECT_EQ(pieces(d[6]), R"([0 , "timeout": 2.5])");
  EXPECT_EQ(pieces(d[7]), "[0 }]");
  ASSERT_EQ(d[7].tool_calls.size(), 1u);
  EXPECT_EQ(d[7].tool_calls[0].arguments_json, R"({"code": "print(1)\n", "timeout": 2.5})");
}

TEST(M3StringStream, HeldTagPrefixThatIsTextAfterAll) {
  auto d = feed_parts(OutputFormat::kM3, {NS + "<tool_call>" + NS +
                                              "<invoke name=\"run_code\">" + NS + "<code>a]<]mini",
                                          "x" + NS + "<b>" + NS + "</co", "dex>" + NS + "</code>",
                                          NS + "</invoke>" + NS + "</tool_call>"});
  EXPECT_EQ(pieces(d[0]), R"([0 run_code {"code": "a])");
  // "]<]mini" + "x" is text; the namespace token is never part of a value: NS<b> ends it (and is
  // read as the next parameter, whose stray NS</codex> makes the block go wrong: content).
  EXPECT_EQ(pieces(d[1]), "[0 ]<]minix\"]");
  EXPECT_EQ(pieces(d[2]), "");
  EXPECT_EQ(d[3].content, NS + "<b>" + NS + "</codex>" + NS + "</code>" + NS + "</invoke>");
  EXPECT_EQ(only_call_args(block(invoke("run_code", param("code", "a]<]minix" + NS + "<b>" + NS + "</codex>")))),
            nlohmann::json({{"code", "a]<]minix"}}));
}

TEST(M3StringStream, LongStringsEscapesAndMultibyteText) {
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"a", "Z", " ", "\n", "\t", "\"", "\\", "/", "\x01", "\x1f", "<", ">",
                                             "]", "[", "é", "東", "京", "😀", "\xE2\x80\xA8", "{", "}", ":"};
  std::string value;
  while (value.size() < 3000) value += alphabet[rng() % alphabet.size()];
  const std::string text = block(invoke("run_code", param("code", value)));
  EXPECT_EQ(only_call_args(text), nlohmann::json({{"code", value}}));
  const std::vector<std::string> ps = byte_pieces(text);
  ASSERT_GT(ps.size(), 100u) << "the value did not stream";
  EXPECT_EQ(ps.front().rfind(R"({"code": ")", 0), 0u) << ps.front();
}

TEST(M3StringStream, ValueStartsLikeATagButIsText) {
  // "]<]mini" then other text: flat (streams); NS< at the very start: nested, read whole.
  EXPECT_EQ(only_call_args(block(invoke("run_code", param("code", "]<]minimax[>x")))),
            nlohmann::json({{"code", "]<]minimax[>x"}}));
  EXPECT_EQ(only_call_args(block(invoke("run_code", param("code", NS + "<a>1" + NS + "</a>")))),
            nlohmann::json({{"code", {{"a", "1"}}}}));
  EXPECT_EQ(only_call_args(block(invoke("run_code", param("code", "")))), nlohmann::json({{"code", ""}}));
  auto d = feed_parts(OutputFormat::kM3, {NS + "<tool_call>" + NS + "<invoke name=\"run_code\">" + NS + "<code>" + NS,
                                          "<a>1" + NS + "</a>", NS + "</code>" + NS + "</invoke>" + NS + "</tool_call>"});
  EXPECT_EQ(pieces(d[0]), "");
  EXPECT_EQ(pieces(d[1]), "");  // nested: whole at its close
  EXPECT_EQ(pieces(d[2]), R"([0 run_code {"code": {"a": "1"}}])");
}

TEST(M3StringStream, WhichParametersStream) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "n": {"type": "integer"}, "sn": {"type": ["string", "null"]},
      "e": {"enum": ["a", "b"]}, "any": {}}}}}])");
  // One piece for the key, one per value byte, one for the quote: it streamed.
  auto streamed = [&](const std::string& key, const std::string& value) {
    const std::vector<std::string> ps = byte_pieces(block(invoke("f", param(key, value))), tools);
    return ps.size() >= value.size() + 1;
  };
  EXPECT_TRUE(streamed("s", "hello"));
  EXPECT_TRUE(streamed("e", "abcde"));         // enum of strings: string only
  EXPECT_TRUE(streamed("any", "hello"));       // no type: string (M3Type)
  EXPECT_TRUE(streamed("unknown", "hello"));   // not in the schema
  EXPECT_FALSE(streamed("n", "12345"));        // typed: whole at its close
  EXPECT_FALSE(streamed("sn", "hello"));       // may be null ("null" -> null): whole
  EXPECT_EQ(only_call_args(block(invoke("f", param("sn", "null"))), tools), nlohmann::json({{"sn", nullptr}}));
  // An unknown tool (a request without tools: its calls are kept): every parameter is a string.
  EXPECT_TRUE(byte_pieces(block(invoke("nope", param("x", "12345"))), nlohmann::json()).size() >= 6);
  EXPECT_EQ(only_call_args(block(invoke("nope", param("x", "12345"))), nlohmann::json()), nlohmann::json({{"x", "12345"}}));
}

// The rule for a string whose closing tag never comes (docs/output-parsing.md): what was written
// is the value, and the tag that cut it closes the invoke / block as usual; the end of output
// closes the call. Either way the call already started ends as valid JSON; nothing is lost.
TEST(M3StringStream, MalformedAfterAPartiallyStreamedString) {
  const std::string head = NS + "<tool_call>" + NS + "<invoke name=\"run_code\">" + NS + "<code>print(\"hi";
  // The invoke closes inside the value.
  ParsedDelta d = parse_all_modes(OutputFormat::kM3, head + NS + "</invoke>" + NS + "</tool_call> after", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"code": "print(\"hi"})");
  EXPECT_EQ(d.content, " after");
  // The block ends inside the value: the block end closes the invoke too.
  d = parse_all_modes(OutputFormat::kM3, head + " " + NS + "</tool_call>tail", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"code": "print(\"hi "})");
  EXPECT_EQ(d.content, "tail");
  // The output ends inside the value.
  d = parse_all_modes(OutputFormat::kM3, head + "\n", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{\"code\": \"print(\\\"hi\\n\"}");
  // ... or inside a held tag prefix: the namespace token ends the value; the cut tag is content.
  d = parse_all_modes(OutputFormat::kM3, head + "]<]minimax[>[</co", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments_json)["code"], "print(\"hi");
  EXPECT_EQ(d.content, "]<]minimax[>[</co");
  // ... and a partial namespace token is text.
  d = parse_all_modes(OutputFormat::kM3, head + "]<]mini", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments_json)["code"], "print(\"hi]<]mini");
  // Junk after a streamed string: the call ends with what had closed; the junk is content.
  d = parse_all_modes(OutputFormat::kM3, head + NS + "</code>junk" + NS + "</tool_call>", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"code": "print(\"hi"})");
  EXPECT_EQ(d.content, "junk");
  // A parameter named "invoke" (never closable): its value ends at NS</invoke>, closing the call.
  d = parse_all_modes(OutputFormat::kM3, block(NS + "<invoke name=\"run_code\">" + NS + "<invoke>v" + NS + "</invoke>"),
                      false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_json, R"({"invoke": "v"})");
  // The next block is read afresh.
  d = parse_all_modes(OutputFormat::kM3, head + NS + "</tool_call> and " + block(invoke("run_code", param("code", "x")))
                      , false);
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[1].arguments_json, R"({"code": "x"})");
  for (const ToolCall& c : d.tool_calls) EXPECT_FALSE(nlohmann::json::parse(c.arguments_json, nullptr, false).is_discarded());
}

}  // namespace
}  // namespace mmx::chat
