// Seeded random fuzz: random mixtures of tag fragments, partial tags, whitespace, unicode and
// unique marker words. Asserts: no throw, whole == byte-by-byte == random chunks, and no text
// loss: every marker word of the input appears in the content, the reasoning, or a tool call
// (name or arguments).
//
// Marker words only ever sit in text positions (never inside a tag name), because a tag name is
// syntax: e.g. an M3 close tag with no opener is consumed as structure.
#include <random>

#include "parse_helpers.h"

namespace mmx::chat {
namespace {

std::vector<std::string> fragments_for(OutputFormat f) {
  std::vector<std::string> common = {" ",    "\n",   "\n\n", "  \t", "<",   ">", "/",
                                     "\"",   "é",    "漢字", "🌸",    "{",   "}", "[1, 2]",
                                     "null", "true", "3",    "2.5",  "None"};
  std::vector<std::string> extra;
  switch (f) {
    case OutputFormat::kM3: {
      const std::string NS = "]<]minimax[>[";
      extra = {"<mm:think>",
               "</mm:think>",
               "<mm:th",
               "</mm:",
               NS + "<tool_call>",
               NS + "</tool_call>",
               NS + "<tool_c",
               "]<]mini",
               NS + "<invoke name=\"get_weather\">",
               NS + "<invoke name=\"zz\">",
               NS + "</invoke>",
               NS + "<city>",
               NS + "</city>",
               NS + "<opts>",
               NS + "</opts>",
               NS + "<lang>",
               NS + "</lang>",
               NS + "<tags>",
               NS + "</tags>",
               NS + "<item>",
               NS + "</item>",
               NS + "<days>",
               NS + "</days>"};
      break;
    }
    case OutputFormat::kM1:
      extra = {"<think>",      "</think>",
               "<thi",         "</th",
               "<tool_calls>", "</tool_calls>",
               "<tool_c",      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"",
               "\"}}",         "{\"name\": \"run_code\", \"arguments\": \"",
               "\"}"};
      break;
    default:
      extra = {"<think>",
               "</think>",
               "<thi",
               "</thin",
               "<minimax:tool_call>",
               "</minimax:tool_call>",
               "<minimax:to",
               "</minimax:",
               "<invoke name=\"get_weather\">",
               "<invoke name=",
               "<invoke name='run_code'>",
               "</invoke>",
               "</inv",
               "<parameter name=\"city\">",
               "<parameter name=\"days\">",
               "<parameter name=\"opts\">",
               "<parameter name=",
               "</parameter>",
               "</param"};
  }
  extra.insert(extra.end(), common.begin(), common.end());
  return extra;
}

// Well-formed call snippets with a marker word inside, so that parsed calls show up too.
std::string good_call(OutputFormat f, const std::string& word) {
  switch (f) {
    case OutputFormat::kM3: {
      const std::string NS = "]<]minimax[>[";
      return NS + "<tool_call>\n" + NS + "<invoke name=\"get_weather\">" + NS + "<city>" + word +
             NS + "</city>" + NS + "</invoke>\n" + NS + "</tool_call>";
    }
    case OutputFormat::kM1:
      return "<tool_calls>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"" + word +
             "\"}}\n</tool_calls>";
    default:
      return "<minimax:tool_call>\n<invoke name=\"run_code\">\n<parameter name=\"code\">" + word +
             "</parameter>\n</invoke>\n</minimax:tool_call>";
  }
}

struct Sample {
  std::string text;
  std::vector<std::string> words;
};

Sample random_sample(OutputFormat f, std::mt19937& rng) {
  const auto frags = fragments_for(f);
  std::uniform_int_distribution<int> n_parts(0, 40);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<size_t> pick(0, frags.size() - 1);
  Sample s;
  int n = n_parts(rng);
  for (int i = 0; i < n; ++i) {
    int k = kind(rng);
    if (k <= 2) {
      std::string w = " w" + std::to_string(s.words.size()) + "x ";
      s.words.push_back(w.substr(1, w.size() - 2));
      s.text += w;
    } else if (k == 3) {
      std::string w = "w" + std::to_string(s.words.size()) + "x";
      s.words.push_back(w);
      s.text += good_call(f, w);
    } else {
      s.text += frags[pick(rng)];
    }
  }
  return s;
}

std::string everything(const ParsedDelta& d) {
  std::string all = d.content + "\x01" + d.reasoning;
  for (const auto& c : d.tool_calls) all += "\x01" + c.name + "\x01" + c.arguments_json;
  return all;
}

void fuzz_format(OutputFormat f, int n_samples) {
  int n_with_calls = 0, n_with_reasoning = 0, n_with_content = 0;
  for (int seed = 0; seed < n_samples; ++seed) {
    std::mt19937 rng(1000 + seed);
    Sample s = random_sample(f, rng);
    bool sir = (seed % 2) == 0;
    SCOPED_TRACE("seed " + std::to_string(seed) + " text: " + s.text);
    ParsedDelta d;
    // The random names include unknown ones: kept here, or their calls (and the words inside)
    // would be dropped by design (ParserOptions); the default is checked for stream == whole.
    ParserOptions keep;
    keep.keep_unknown_tool_calls = true;
    ASSERT_NO_THROW(testing::parse_all_modes(f, s.text, sir));
    ASSERT_NO_THROW(d = testing::parse_all_modes(f, s.text, sir, testing::test_tools(), keep));
    // Markers are separated by spaces from their neighbours, so a word can only vanish if the
    // parser dropped text.
    n_with_calls += !d.tool_calls.empty();
    n_with_reasoning += !d.reasoning.empty();
    n_with_content += !d.content.empty();
    std::string all = everything(d);
    for (const auto& w : s.words) {
      if (all.find(w) == std::string::npos) {
        ADD_FAILURE() << "lost '" << w << "': " << testing::describe(d);
        break;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
  // The mixtures must exercise every path, not only "everything is content".
  EXPECT_GT(n_with_calls, n_samples / 10);
  EXPECT_GT(n_with_content, n_samples / 4);
  if (f != OutputFormat::kM2AppendThink) {
    EXPECT_GT(n_with_reasoning, n_samples / 4);
  }
}

TEST(Fuzz, M2) { fuzz_format(OutputFormat::kM2, 400); }
TEST(Fuzz, M2AppendThink) { fuzz_format(OutputFormat::kM2AppendThink, 200); }
TEST(Fuzz, M3) { fuzz_format(OutputFormat::kM3, 400); }
TEST(Fuzz, M1) { fuzz_format(OutputFormat::kM1, 400); }

}  // namespace
}  // namespace mmx::chat
