// Round trip through each MiniMax family's own chat template and back through the output parser:
// an assistant message (reasoning, content, tool calls) is rendered after a user turn by the
// template the family ships (data/chat_templates/minimax_{m1,m2,m3}.jinja); the text after the
// generation prompt (what the model would have written, without the end-of-turn marker) is parsed
// with chat::OutputParser in that family's format, fed whole and in seeded random chunks. The
// reply must come back as it went in: same reasoning, same content, same tool calls (names, and
// arguments equal as JSON). M1's template renders no tool_calls field, so M1 messages go through
// chat::to_m1_messages first, as the server does.
//
// The oracle is the template itself (rendered by our engine, which tests/template/parity.js holds
// byte-identical to @huggingface/jinja on these templates) and the message we started from.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/m1_messages.h"
#include "chat/output_parser.h"
#include "template/chat_template.h"

namespace mmx::chat {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ChatTemplate family_template(const std::string& file) {
  return ChatTemplate({{"default", read_file(std::string(MMX_SOURCE_DIR) + "/data/chat_templates/" + file)}},
                      nullptr);
}

const json& tools() {
  static const json t = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "ratio": {"type": "number"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "plan_trip", "description": "Plan a trip.",
      "parameters": {"type": "object", "properties": {
        "route": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"},
                                                   "stops": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "legs": {"type": "array", "items": {"type": "object", "properties": {
          "city": {"type": "string"}, "nights": {"type": "integer"}}}},
        "note": {"type": "string"}}}}}
  ])");
  return t;
}

struct Call {
  std::string name;
  json arguments;
};
struct Reply {
  std::string reasoning, content;
  std::vector<Call> calls;
};

// The replies every family must round-trip (no values a format cannot carry: no nulls, no
// surrounding whitespace in strings, no integral floats).
std::vector<Reply> replies() {
  return {
      {"The user greets me; answer briefly.", "Hello! How can I help?", {}},
      {"", "A plain answer without reasoning.\nIt has two lines.", {}},
      {"Need the weather first.", "", {{"get_weather", json{{"city", "Paris"}, {"days", 3}}}}},
      {"Two lookups, then plan.",
       "Let me check both.",
       {{"get_weather", json{{"city", "東京"}, {"metric", true}, {"ratio", 0.25}}},
        {"plan_trip", json{{"route", {{"from", "Oslo"}, {"to", "Rome"}, {"stops", 2}}},
                           {"tags", {"rail", "cheap"}},
                           {"legs", {{{"city", "Berlin"}, {"nights", 1}}, {{"city", "Wien"}, {"nights", 2}}}},
                           {"note", "a < b & c > d"}}}}},
      {"", "", {{"get_weather", json{{"city", "Nice"}}}}},
      {"Unicode: ПриветМир, 日本語, 👩‍💻.", "Ответ: 42 ✓", {}},
  };
}

ojson assistant_message(const Reply& r) {
  ojson m = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.calls.empty()) {
    m["tool_calls"] = ojson::array();
    for (size_t i = 0; i < r.calls.size(); ++i)
      m["tool_calls"].push_back({{"id", "call_" + std::to_string(i)},
                                 {"type", "function"},
                                 {"function", {{"name", r.calls[i].name},
                                               {"arguments", ojson::parse(r.calls[i].arguments.dump())}}}});
  }
  return m;
}

// Parses `text` whole and in seeded random chunks; both must agree (the parser's contract).
ParsedDelta parse_both_ways(OutputFormat f, const std::string& text, bool starts_in_reasoning, uint32_t seed) {
  const ParsedDelta whole = parse_full(f, text, tools(), starts_in_reasoning, 1);
  OutputParser p(f, tools(), starts_in_reasoning, 1);
  ParsedDelta chunked;
  std::mt19937 rng(seed);
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min(text.size() - at, size_t(rng() % 7 + 1));
    // cut only at UTF-8 boundaries (the detokenizer's guarantee)
    size_t end = at + n;
    while (end < text.size() && (uint8_t(text[end]) & 0xC0) == 0x80) ++end;
    chunked.append(p.feed(std::string_view(text).substr(at, end - at)));
    at = end;
  }
  chunked.append(p.finish());
  EXPECT_EQ(whole.content, chunked.content);
  EXPECT_EQ(whole.reasoning, chunked.reasoning);
  EXPECT_EQ(whole.tool_calls.size(), chunked.tool_calls.size());
  return whole;
}

struct Family {
  const char* name;
  const char* file;
  OutputFormat format;
  const char* reasoning_open;  // the reasoning start tag a generation prompt may end with
  const char* end_of_turn;     // what the template writes after the assistant's text
};

// Renders [user, reply] and [user] + generation prompt, cuts the reply's text out and parses it.
void check_family(const Family& fam, const std::vector<Reply>& rs) {
  const ChatTemplate tmpl = family_template(fam.file);
  for (size_t i = 0; i < rs.size(); ++i) {
    const Reply& r = rs[i];
    SCOPED_TRACE(std::string(fam.name) + " reply " + std::to_string(i));
    ojson convo = ojson::array({{{"role", "user"}, {"content", "Plan my week."}}});
    ojson prompt_only = convo;
    convo.push_back(assistant_message(r));
    ojson kwargs = nullptr;
    if (fam.format == OutputFormat::kM3)  // enabled opens <mm:think>; disabled prefills </mm:think>
      kwargs = {{"thinking_mode", r.reasoning.empty() ? "disabled" : "enabled"}};
    if (fam.format == OutputFormat::kM1) {
      convo = to_m1_messages(convo);
      prompt_only = to_m1_messages(prompt_only);
    }
    const std::string full = tmpl.render(convo, tools(), false, kwargs);
    std::string prompt = tmpl.render(prompt_only, tools(), true, kwargs);
    bool starts_in_reasoning = false;
    const std::string open = fam.reasoning_open;
    auto ends_with = [](const std::string& s, const std::string& t) {
      return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
    };
    std::string trimmed = prompt;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
    if (ends_with(trimmed, open)) {
      if (full.compare(0, prompt.size(), prompt) == 0) {
        starts_in_reasoning = true;
      } else {
        // M2 without reasoning: the history turn has no <think> block, the prompt opens one.
        prompt = trimmed.substr(0, trimmed.size() - open.size());
      }
    }
    ASSERT_EQ(full.compare(0, prompt.size(), prompt), 0)
        << "the rendered turn does not start with the generation prompt\nprompt: " << prompt << "\nfull:   " << full;
    std::string out = full.substr(prompt.size());
    ASSERT_TRUE(ends_with(out, fam.end_of_turn)) << out;
    out.resize(out.size() - std::string(fam.end_of_turn).size());

    const ParsedDelta d = parse_both_ways(fam.format, out, starts_in_reasoning, 100 + uint32_t(i));
    SCOPED_TRACE("model text: " + out);
    EXPECT_EQ(d.reasoning, r.reasoning);
    EXPECT_EQ(d.content, r.content);
    ASSERT_EQ(d.tool_calls.size(), r.calls.size());
    for (size_t k = 0; k < r.calls.size(); ++k) {
      EXPECT_EQ(d.tool_calls[k].name, r.calls[k].name);
      EXPECT_EQ(json::parse(d.tool_calls[k].arguments_json), r.calls[k].arguments)
          << d.tool_calls[k].arguments_json;
    }
  }
}

TEST(TemplateRoundTrip, M2XmlToolCalls) {
  check_family({"M2", "minimax_m2.jinja", OutputFormat::kM2, "<think>", "[e~[\n"}, replies());
}

TEST(TemplateRoundTrip, M3NamespacedToolCallsAndThinkingMode) {
  check_family({"M3", "minimax_m3.jinja", OutputFormat::kM3, "<mm:think>", "[e~[\n"}, replies());
}

TEST(TemplateRoundTrip, M1JsonLineToolCalls) {
  check_family({"M1", "minimax_m1.jinja", OutputFormat::kM1, "<think>", "<end_of_sentence>\n"}, replies());
}

// The comparison is not vacuous: the same rendered M2 turn read with another family's parser
// loses the tool call (it stays text), so a template/parser pairing that drifted apart would fail.
TEST(TemplateRoundTrip, AMismatchedParserLosesTheToolCall) {
  const ChatTemplate tmpl = family_template("minimax_m2.jinja");
  const Reply r{"Need the weather first.", "", {{"get_weather", json{{"city", "Paris"}}}}};
  const ojson convo = ojson::array({{{"role", "user"}, {"content", "x"}}, assistant_message(r)});
  const std::string full = tmpl.render(convo, tools(), false);
  const size_t at = full.rfind("]~b]ai\n<think>\n");
  ASSERT_NE(at, std::string::npos);
  const std::string out = full.substr(at + 15, full.size() - (at + 15) - 5);  // minus "[e~[\n"
  EXPECT_EQ(parse_full(OutputFormat::kM2, out, tools(), true).tool_calls.size(), 1u);
  const ParsedDelta wrong = parse_full(OutputFormat::kM1, out, tools(), true);
  EXPECT_TRUE(wrong.tool_calls.empty());
  EXPECT_NE(wrong.content.find("<minimax:tool_call>"), std::string::npos) << wrong.content;
}

// Which templates get M1-shaped messages: the M1 one, not M2's or M3's.
TEST(M1Messages, OnlyTheM1TemplateReadsThem) {
  const auto src = [](const char* f) { return read_file(std::string(MMX_SOURCE_DIR) + "/data/chat_templates/" + f); };
  EXPECT_TRUE(template_reads_m1_messages(src("minimax_m1.jinja")));
  EXPECT_FALSE(template_reads_m1_messages(src("minimax_m2.jinja")));
  EXPECT_FALSE(template_reads_m1_messages(src("minimax_m3.jinja")));
}

// to_m1_messages: the shape the M1 template reads.
TEST(M1Messages, ReshapesOpenAIMessages) {
  const ojson in = ojson::parse(R"([
    {"role": "system", "content": "S"},
    {"role": "user", "content": [{"type": "text", "text": "U"}]},
    {"role": "assistant", "content": null, "reasoning_content": "R",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok"}
  ])");
  const ojson out = to_m1_messages(in);
  EXPECT_EQ(out[0]["content"], ojson::parse(R"([{"type": "text", "text": "S"}])"));
  EXPECT_EQ(out[1]["content"], in[1]["content"]);
  EXPECT_EQ(out[2]["content"][0]["text"], "<think>R</think>\n");
  EXPECT_EQ(out[2]["content"][1]["text"], "<tool_calls>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_calls>");
  EXPECT_EQ(out[3]["content"], ojson::parse(R"([{"type": "text", "name": "f", "text": "ok"}])"));
}

}  // namespace
}  // namespace mmx::chat
