// Structured output for the routes: a request's response_format / grammar / forced tool_choice ->
// the engine's ConstraintFactory (src/grammar does the work; docs/structured-output.md).
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

#include "engine/token_constraint.h"
#include "grammar/token_masker.h"
#include "server/request.h"
#include "chat/served_model.h"

namespace mmx::server {

class Constraints {
 public:
  explicit Constraints(const chat::ServedModel& m) : m_(m) {}
  // An empty factory when the request asks for nothing. starts_in_reasoning: the prompt opened the
  // reasoning block, so the grammar applies after its end tag. max_tokens: the request's budget.
  // Throws ApiError 400 naming the field (a schema keyword outside the subset, a bad grammar, a
  // budget too small for the shortest valid reply). reasoning_budget >= 0 (Anthropic's
  // thinking.budget_tokens): at most that many tokens of reasoning, then the end tag is forced.
  ConstraintFactory make(const GenerationParams& p, const ojson& tools, const std::string& tool_choice,
                         const std::string& forced_tool, bool starts_in_reasoning, int64_t max_tokens,
                         int64_t reasoning_budget = -1);

 private:
  std::shared_ptr<const grammar::VocabTrie> trie(const char* param);
  std::shared_ptr<grammar::TokenMasker> masker(const std::string& gbnf, bool allow_special, const char* param);
  const chat::ServedModel& m_;
  std::mutex mu_;
  std::shared_ptr<const grammar::VocabTrie> trie_;
  std::list<std::pair<std::string, std::shared_ptr<grammar::TokenMasker>>> lru_;
};

}  // namespace mmx::server
