// Structured output for a chat turn or a completion: response_format / grammar / a forced
// tool_choice -> the engine's ConstraintFactory (src/grammar does the work;
// docs/structured-output.md). Used by the server's routes after prepare_turn (turn.h) and by
// anything else that generates without HTTP (RL rollouts).
//
// Compiled grammars are kept (least recently used, by grammar text), so the automaton states and
// token masks a schema warmed up serve the next request with the same schema. The vocabulary trie
// is built once, on first use.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "chat/conversation.h"
#include "chat/served_model.h"
#include "engine/token_constraint.h"
#include "grammar/token_masker.h"

namespace mmx::chat {

// What every choice must match besides a forced tool call (the server's response_format / grammar).
struct OutputStructure {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kGrammar } kind = Kind::kNone;
  ojson json_schema;    // kJsonSchema: the JSON Schema
  std::string grammar;  // kGrammar: GBNF text
};

class Constraints {
 public:
  explicit Constraints(const ServedModel& m) : m_(m) {}
  // An empty factory when nothing is asked for. tool_choice "required" / "function" (forced_tool)
  // forces a call of `tools`. starts_in_reasoning: the prompt opened the reasoning block, so the
  // grammar applies after its end tag. max_tokens: the request's budget. Throws ChatError
  // (chat_error.h) naming the field: kUnsupportedSchema for a schema keyword outside the subset,
  // kInvalid for a bad grammar or a budget too small for the shortest valid reply.
  // reasoning_budget >= 0 (Anthropic's thinking.budget_tokens): at most that many tokens of
  // reasoning, then the end tag is forced.
  ConstraintFactory make(const OutputStructure& p, const ojson& tools, const std::string& tool_choice,
                         const std::string& forced_tool, bool starts_in_reasoning, int64_t max_tokens,
                         int64_t reasoning_budget = -1);

 private:
  std::shared_ptr<const grammar::VocabTrie> trie(const char* param);
  std::shared_ptr<grammar::TokenMasker> masker(const std::string& gbnf, bool allow_special, const char* param);
  const ServedModel& m_;
  std::mutex mu_;
  std::shared_ptr<const grammar::VocabTrie> trie_;
  std::list<std::pair<std::string, std::shared_ptr<grammar::TokenMasker>>> lru_;
};

}  // namespace mmx::chat
