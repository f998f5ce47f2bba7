// GrammarConstraint: the engine's TokenConstraint for one sequence, over a shared TokenMasker.
//
// Optionally gated: a reasoning model first thinks freely, and the grammar applies only once the
// gate (e.g. "</think>") was written — as its own token or spelled in bytes. While gated, stop ids
// are refused (the reply must still come), and when only enough budget is left to write the gate
// and the shortest sentence, the gate token is forced. The budget keeps its last token for a stop id:
// a reply that fits ends as "stop", not "length" (what clients that parse structured output check).
// A gate with a budget is also forced once that many tokens came before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/token_constraint.h"
#include "grammar/token_masker.h"

namespace mmx::grammar {

struct Gate {
  int32_t id = -1;    // the token that opens the grammar (-1: no gate)
  std::string bytes;  // its text, also recognized when spelled by other tokens
  int64_t budget = -1;  // at most this many tokens before it (a reasoning budget), then it is forced; -1: none
};

// Watches a sequence for its gate: the gate's id, or its bytes spelled by other tokens.
class GateWatch {
 public:
  explicit GateWatch(Gate g) : gate_(std::move(g)), open_(gate_.id < 0) {}
  bool open() const { return open_; }          // the gate was written (or there is none)
  int64_t before() const { return before_; }   // tokens written before it
  bool over_budget() const { return gate_.budget >= 0 && before_ >= gate_.budget; }
  int32_t id() const { return gate_.id; }
  void accept(int32_t id, const VocabTrie& vocab);

 private:
  Gate gate_;
  bool open_;
  int64_t before_ = 0;
  std::string tail_;  // the last bytes written while closed
};

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<TokenMasker> masker, Gate gate = {});
  void restrict(float* logits, int64_t n_vocab, int64_t left, std::span<const int32_t> stop_ids) override;
  void accept(int32_t id) override;
  bool gated() const { return !gate_.open(); }
  int32_t state() const { return state_; }

 private:
  std::shared_ptr<TokenMasker> m_;
  GateWatch gate_;
  int32_t state_;
  Bits bits_;
};

// A reasoning budget alone (Anthropic's thinking.budget_tokens): the model reasons freely for at
// most gate.budget tokens, then the gate (the reasoning end tag) is forced; after it, anything
// goes. The model may also end (a stop id) while reasoning.
class ReasoningBudget final : public TokenConstraint {
 public:
  ReasoningBudget(std::shared_ptr<const VocabTrie> vocab, Gate gate) : vocab_(std::move(vocab)), gate_(std::move(gate)) {}
  void restrict(float* logits, int64_t n_vocab, int64_t left, std::span<const int32_t> stop_ids) override;
  void accept(int32_t id) override;

 private:
  std::shared_ptr<const VocabTrie> vocab_;
  GateWatch gate_;
};

// Applies `bits` to logits[0, n): ids whose bit is clear get -inf.
void apply_mask(const Bits& bits, float* logits, int64_t n);

}  // namespace mmx::grammar
