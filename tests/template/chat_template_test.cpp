// Tests of mmx::ChatTemplate (loading from a checkpoint directory through the formats gateway,
// template selection, special tokens) and of the MiniMax-M2 template's interleaved-thinking
// behaviour as rendered by us.
#include "template/chat_template.h"

#include "testing/checkpoint_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mmx_tpl_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

mmx::ChatTemplate m2() {
  return mmx::ChatTemplate({{"default", slurp(fs::path(MMX_SOURCE_DIR) / "data/chat_templates/minimax_m2.jinja")}},
                           nullptr);
}
}  // namespace

TEST(ChatTemplate, LoadsFromTokenizerConfig) {
  fs::path d = temp_dir("cfg");
  json cfg = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<B>"}}},
              {"eos_token", "<E>"},
              {"chat_template",
               "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}"
               "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}{{ tools is none }}"}};
  write(d / "tokenizer_config.json", cfg.dump());
  auto t = mmx::testing::chat_template_of(d.string());
  EXPECT_EQ(t.bos_token(), "<B>");
  json msgs = json::parse(R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(t.render(msgs, nullptr, true), "<B>user:hi><E>true");
  // chat_template.jinja wins over tokenizer_config.json
  write(d / "chat_template.jinja", "J{{ messages | length }}{{ extra }}");
  EXPECT_EQ(mmx::testing::chat_template_of(d.string()).render(msgs, nullptr, false, {{"extra", "!"}}), "J1!");
  // --chat-template FILE wins over both; the special tokens still come from the directory.
  const fs::path file = temp_dir("override") / "mine.jinja";
  write(file, "{{ bos_token }}O{{ messages | length }}");
  EXPECT_EQ(mmx::testing::chat_template_of(d.string(), file.string()).render(msgs), "<B>O1");
  EXPECT_THROW(mmx::testing::chat_template_of(d.string(), (d / "missing.jinja").string()), mmx::Error);
  fs::remove_all(file.parent_path());
  fs::remove_all(d);
}

TEST(ChatTemplate, NamedTemplatesPickToolUse) {
  fs::path d = temp_dir("named");
  json cfg = {
      {"chat_template", json::array({{{"name", "default"}, {"template", "D"}},
                                     {{"name", "tool_use"}, {"template", "T{{ tools | length if tools else 0 }}"}}})}};
  write(d / "tokenizer_config.json", cfg.dump());
  auto t = mmx::testing::chat_template_of(d.string());
  EXPECT_EQ(t.render(json::array(), nullptr), "D");
  EXPECT_EQ(t.render(json::array(), json::array({1, 2})), "T2");
  EXPECT_EQ(t.render(json::array(), nullptr, false, nullptr, "tool_use"), "T0");
  EXPECT_THROW(t.render(json::array(), nullptr, false, nullptr, "nope"), mmx::Error);
  fs::remove_all(d);
  EXPECT_THROW(mmx::testing::chat_template_of(temp_dir("empty").string()), mmx::Error);
}

// Interleaved thinking (spec 6.3): reasoning is re-rendered only for assistant turns after the
// last user message, whether it came as reasoning_content or as <think> inside content.
// The render work budget (template/interpreter.h) leaves room for real conversations: 2,000
// turns with reasoning and tool calls, 3 MB of text (past a 196K-token context), render whole;
// it takes 31 M of the 268 M units.
TEST(ChatTemplate, WorkBudgetFitsAFullContextConversation) {
  auto t = m2();
  json msgs = json::array();
  const std::string text(1000, 'w');
  for (int i = 0; i < 1000; ++i) {
    msgs.push_back({{"role", "user"}, {"content", text}});
    msgs.push_back({{"role", "assistant"}, {"reasoning_content", text}, {"content", text},
                    {"tool_calls", json::parse(R"([{"type": "function", "function": {"name": "f",
                                                   "arguments": {"x": 1}}}])")}});
  }
  const std::string out = t.render(msgs, nullptr, true);
  EXPECT_GT(out.size(), size_t(2000000));
}

TEST(ChatTemplate, MiniMaxM2InterleavedThinking) {
  auto t = m2();
  json history = json::parse(R"([
    {"role": "user", "content": "q1"},
    {"role": "assistant", "reasoning_content": "old thoughts", "content": "a1"},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "<think>\nnew thoughts\n</think>\n\ncalling",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1, "s": "v"}}}]},
    {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}])");
  std::string out = t.render(history, nullptr, true);
  EXPECT_EQ(out.find("old thoughts"), std::string::npos) << out;
  EXPECT_NE(out.find("]~b]ai\n<think>\nnew thoughts\n</think>\n\ncalling\n<minimax:tool_call>\n"
                     "<invoke name=\"f\">\n<parameter name=\"x\">1</parameter>\n<parameter name=\"s\">v</parameter>\n"
                     "</invoke>\n</minimax:tool_call>[e~[\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("]~b]tool\n<response>r1</response>\n<response>r2</response>[e~[\n]~b]ai\n<think>\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.rfind("]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nq1[e~[\n]~b]ai\na1[e~[\n", 0), 0u)
      << out;
}

TEST(ChatTemplate, OurM2TemplateMatchesTheShippedOneOnPlainChats) {
  auto ours = mmx::ChatTemplate(
      {{"default", slurp(fs::path(MMX_SOURCE_DIR) / "tests/data/minimax_m2_chat_template.jinja")}}, nullptr);
  auto real = m2();
  json kw = {
      {"model_identity", "You are MiniMax-M2, a helpful AI assistant built by MiniMax. Knowledge cutoff: 2025-06."}};
  json msgs = json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"u"},
    {"role":"assistant","reasoning_content":"r","content":"a","tool_calls":[{"function":{"name":"f","arguments":{"k":[1]}}}]},
    {"role":"tool","content":"x"}])");
  json tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  EXPECT_EQ(ours.render(msgs, tools, true, kw), real.render(msgs, tools, true, kw));
  json plain = json::parse(R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(ours.render(plain, nullptr, true, kw), real.render(plain, nullptr, true, kw));
}

TEST(ChatTemplate, ParseToolCallArguments) {
  json msgs = json::parse(R"([{"role":"assistant","tool_calls":[
    {"function":{"name":"f","arguments":"{\"b\": 1, \"a\": [2]}"}},
    {"function":{"name":"g","arguments":"not json"}},
    {"function":{"name":"h","arguments":{"k":"v"}}}]}])");
  json out = mmx::parse_tool_call_arguments(msgs);
  EXPECT_EQ(out[0]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":[2]})");
  EXPECT_EQ(out[0]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(out[0]["tool_calls"][2]["function"]["arguments"].dump(), R"({"k":"v"})");
  // The shipped M2 template needs objects: it raises on strings and renders after parsing.
  EXPECT_THROW(m2().render(json::parse(R"([{"role":"user","content":"u"},{"role":"assistant","content":"",
    "tool_calls":[{"function":{"name":"f","arguments":"{\"x\": 1}"}}]}])")),
               mmx::Error);
  std::string r = m2().render(mmx::parse_tool_call_arguments(json::parse(R"([{"role":"user","content":"u"},
    {"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{\"x\": 1}"}}]}])")));
  EXPECT_NE(r.find("<parameter name=\"x\">1</parameter>"), std::string::npos) << r;
}
