// reasoning_effort -> each template's own reasoning switch (chat/thinking.h): M3's
// thinking_mode, a template reading enable_thinking, and M2's templates that have none (a stated
// no-op). Two switches at once are a 400 (through the server's mapping of chat::ChatError).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/thinking.h"
#include "server/api_error.h"

namespace mmx::server {
namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ChatTemplate from_file(const std::string& name) {
  return ChatTemplate({{"default", read(std::string(MMX_SOURCE_DIR) + "/data/chat_templates/" + name)}}, nullptr);
}

std::string effort_to(const ChatTemplate& t, const std::string& effort, const char* key) {
  chat::ServedModel m;
  m.chat_template = &t;
  chat::Conversation r;
  r.reasoning_effort = effort;
  chat::apply_reasoning_effort(r, m);
  return r.template_kwargs.at(key).dump();
}

TEST(Thinking, ReasoningEffortMapsOntoM3ThinkingMode) {
  const ChatTemplate m3 = from_file("minimax_m3.jinja");
  EXPECT_EQ(effort_to(m3, "none", "thinking_mode"), "\"disabled\"");
  EXPECT_EQ(effort_to(m3, "minimal", "thinking_mode"), "\"disabled\"");
  EXPECT_EQ(effort_to(m3, "low", "thinking_mode"), "\"adaptive\"");
  EXPECT_EQ(effort_to(m3, "medium", "thinking_mode"), "\"enabled\"");
  EXPECT_EQ(effort_to(m3, "high", "thinking_mode"), "\"enabled\"");
  // The switch reaches the prompt: disabled and enabled render differently.
  const chat::ojson msgs = chat::ojson::parse(R"([{"role": "user", "content": "hi"}])");
  const std::string off = m3.render(msgs, nullptr, true, {{"thinking_mode", "disabled"}});
  const std::string on = m3.render(msgs, nullptr, true, {{"thinking_mode", "enabled"}});
  EXPECT_NE(off, on);
}

TEST(Thinking, EnableThinkingTemplatesGetABool) {
  const ChatTemplate t({{"default", "{% if enable_thinking %}<think>{% endif %}{{ messages[0].content }}"}}, nullptr);
  EXPECT_EQ(effort_to(t, "none", "enable_thinking"), "false");
  EXPECT_EQ(effort_to(t, "high", "enable_thinking"), "true");
}

// M2's templates have no switch: reasoning_effort is a stated no-op (the kwargs stay as they were);
// a switch set twice (reasoning_effort and chat_template_kwargs) is a 400 naming reasoning_effort.
TEST(Thinking, NoSwitchIsANoOpTwoSwitchesIs400) {
  const ChatTemplate m2 = from_file("minimax_m2.jinja");
  chat::ServedModel m;
  m.chat_template = &m2;
  chat::Conversation r;
  for (const char* effort : {"none", "low", "high"}) {
    r.reasoning_effort = effort;
    EXPECT_NO_THROW(chat::apply_reasoning_effort(r, m)) << effort;
    EXPECT_TRUE(r.template_kwargs.is_null()) << effort << ": " << r.template_kwargs.dump();
  }
  const ChatTemplate m3 = from_file("minimax_m3.jinja");
  m.chat_template = &m3;
  r.template_kwargs = {{"thinking_mode", "enabled"}};
  try {
    chat::apply_reasoning_effort(r, m);
    ADD_FAILURE() << "two reasoning switches";
  } catch (const chat::ChatError& ce) {
    const ApiError e = to_api_error(ce);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "reasoning_effort");
  }
}

}  // namespace
}  // namespace mmx::server
