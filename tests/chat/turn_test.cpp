// chat::prepare_turn (chat/turn.h) on the committed models/m2-tiny checkpoint, with no server:
// the prompt is build_chat_prompt's, the engine request make_gen_request's, each choice's stream
// follows the one tool-call id rule (tool_call_id_seed + 7919 i), and refusals are ChatErrors
// with the kind and field the HTTP edge needs. chat::Constraints is reachable the same way.
#include <gtest/gtest.h>

#include "chat/chat_error.h"
#include "chat/constraints.h"
#include "chat/prompt.h"
#include "chat/turn.h"
#include "template/chat_template.h"
#include "testing/checkpoint_files.h"
#include "tokenizer/tokenizer.h"

namespace mmx::chat {
namespace {

struct Tiny {
  tok::Tokenizer tok = tok::Tokenizer::from_path(std::string(MMX_SOURCE_DIR) + "/models/m2-tiny");
  ChatTemplate tmpl = testing::chat_template_of(std::string(MMX_SOURCE_DIR) + "/models/m2-tiny");
  ServedModel m;
  Tiny() {
    m.tokenizer = &tok;
    m.chat_template = &tmpl;
    m.format = OutputFormat::kM2;
    m.eos_ids = {tok.token_to_id("[e~[")};
  }
};

Conversation weather() {
  Conversation c;
  c.messages = ojson::parse(R"([{"role": "user", "content": "Weather in Lima?"}])");
  c.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return c;
}

TEST(PrepareTurn, PromptAndRequestAreTheSharedOnes) {
  Tiny t;
  TurnOptions o;
  o.gen.sampling.seed = 42;
  o.gen.max_tokens = 100000;  // clamped to what the context leaves
  o.context_limit = 4096;
  o.stop = {"STOP"};
  const PreparedTurn turn = prepare_turn(t.m, weather(), o);
  const ChatPrompt p = build_chat_prompt(t.m, weather(), 0, 4096);
  EXPECT_EQ(turn.prompt.text, p.text);
  EXPECT_EQ(turn.prompt.ids, p.ids);
  EXPECT_EQ(turn.request.prompt, p.ids);
  EXPECT_EQ(turn.request.max_tokens, 4096 - int64_t(p.ids.size()));
  EXPECT_EQ(turn.request.stop_ids, t.m.eos_ids);
  EXPECT_EQ(turn.request.sampling.seed, 42u);
  EXPECT_FALSE(turn.request.logprobs);
  EXPECT_FALSE(turn.request.constraint);  // structured output is the caller's
  // default_max_tokens when the request gives none
  o.gen.max_tokens.reset();
  o.default_max_tokens = 7;
  EXPECT_EQ(prepare_turn(t.m, weather(), o).request.max_tokens, 7);
}

TEST(PrepareTurn, ToolCallIdsFollowTheOneRule) {
  Tiny t;
  TurnOptions o;
  o.context_limit = 4096;
  o.tool_call_id_seed = 1234;
  const PreparedTurn turn = prepare_turn(t.m, weather(), o);
  const std::string reply =
      "Lima.</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Lima</parameter>\n"
      "</invoke>\n</minimax:tool_call>";
  const std::vector<int32_t> ids = t.tok.encode(reply, false);
  const nlohmann::json tools = nlohmann::json::parse(weather().tools.dump());
  auto call_id = [&](OutputStream s) {
    ParsedDelta all;
    for (int32_t id : ids) all.append(s.push(id));
    all.append(s.finish());
    EXPECT_EQ(all.tool_calls.size(), 1u);
    return all.tool_calls.empty() ? std::string() : all.tool_calls[0].id;
  };
  const std::string id0 = call_id(turn.make_stream(0)), id1 = call_id(turn.make_stream(1));
  EXPECT_NE(id0, id1);
  const bool in_reasoning = turn.prompt.starts_in_reasoning;
  EXPECT_EQ(id0, call_id(OutputStream(t.tok, {}, OutputParser(OutputFormat::kM2, tools, in_reasoning, 1234))));
  EXPECT_EQ(id1, call_id(OutputStream(t.tok, {}, OutputParser(OutputFormat::kM2, tools, in_reasoning, 1234 + 7919))));
}

// TurnOptions::parser reaches each choice's OutputParser (the server sets it from
// `mmx serve --keep-unknown-tool-calls`): a call to a tool the request does not list is dropped by
// default, kept with the option.
TEST(PrepareTurn, ParserOptionsReachTheStreams) {
  Tiny t;
  TurnOptions o;
  o.context_limit = 4096;
  const std::string reply =
      "x</think>\n\n<minimax:tool_call>\n<invoke name=\"rm_rf\">\n<parameter name=\"path\">/</parameter>\n"
      "</invoke>\n</minimax:tool_call>";
  const std::vector<int32_t> ids = t.tok.encode(reply, false);
  auto n_calls = [&](OutputStream s) {
    ParsedDelta all;
    for (int32_t id : ids) all.append(s.push(id));
    all.append(s.finish());
    return all.tool_calls.size();
  };
  EXPECT_EQ(n_calls(prepare_turn(t.m, weather(), o).make_stream(0)), 0u);
  o.parser.keep_unknown_tool_calls = true;
  EXPECT_EQ(n_calls(prepare_turn(t.m, weather(), o).make_stream(0)), 1u);
}

TEST(PrepareTurn, RefusalsAreChatErrors) {
  Tiny t;
  TurnOptions o;
  o.context_limit = 8;  // shorter than any rendered prompt
  try {
    prepare_turn(t.m, weather(), o);
    ADD_FAILURE() << "a prompt longer than the context";
  } catch (const ChatError& e) {
    EXPECT_EQ(e.kind(), ChatError::Kind::kContextExceeded);
    EXPECT_EQ(e.param(), "messages");
  }
  o.context_limit = 4096;
  Conversation c = weather();
  c.reasoning_effort = "low";  // M2's template has no reasoning switch: a stated no-op, the same prompt
  EXPECT_EQ(prepare_turn(t.m, c, o).prompt.text, prepare_turn(t.m, weather(), o).prompt.text);
  o.gen.sampling.logit_bias = {{int32_t(t.tok.vocab_size()), 1.0f}};
  try {
    prepare_turn(t.m, weather(), o);
    ADD_FAILURE() << "logit_bias outside the vocabulary";
  } catch (const ChatError& e) {
    EXPECT_EQ(e.kind(), ChatError::Kind::kInvalid);
    EXPECT_EQ(e.param(), "logit_bias");
  }
}

TEST(Constraints, ReachableWithoutHttp) {
  Tiny t;
  Constraints cs(t.m);
  OutputStructure none;
  EXPECT_FALSE(cs.make(none, nullptr, "auto", "", false, 100));                   // nothing asked
  EXPECT_TRUE(cs.make(none, weather().tools, "required", "", false, 1000));       // a forced tool call
  OutputStructure json_object;
  json_object.kind = OutputStructure::Kind::kJsonObject;
  EXPECT_TRUE(cs.make(json_object, nullptr, "auto", "", false, 100));
  OutputStructure schema;
  schema.kind = OutputStructure::Kind::kJsonSchema;
  schema.json_schema = ojson::parse(R"({"type": "object", "notAKeyword": 1})");
  try {
    cs.make(schema, nullptr, "auto", "", false, 100);
    ADD_FAILURE() << "a keyword outside the subset";
  } catch (const ChatError& e) {
    EXPECT_EQ(e.kind(), ChatError::Kind::kUnsupportedSchema);
    EXPECT_EQ(e.param(), "response_format");
  }
  try {
    cs.make(json_object, nullptr, "auto", "", false, 1);  // no JSON object fits one token
    ADD_FAILURE() << "a budget too small";
  } catch (const ChatError& e) {
    EXPECT_EQ(e.kind(), ChatError::Kind::kInvalid);
    EXPECT_EQ(e.param(), "max_tokens");
  }
}

}  // namespace
}  // namespace mmx::chat
