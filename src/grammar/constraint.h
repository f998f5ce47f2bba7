// GrammarConstraint: the engine's TokenConstraint for one sequence, over a shared TokenMasker.
//
// Optionally gated: a reasoning model first thinks freely, and the grammar applies only once the
// gate (e.g. "</think>") was written — as its own token or spelled in bytes. While gated, stop ids
// are refused (the reply must still come), and when only enough budget is left to write the gate
// and the shortest sentence, the gate token is forced. The budget keeps its last token for a stop id:
// a reply that fits ends as "stop", not "length" (what clients that parse structured output check).
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
};

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<TokenMasker> masker, Gate gate = {});
  void restrict(float* logits, int64_t n_vocab, int64_t left, std::span<const int32_t> stop_ids) override;
  void accept(int32_t id) override;
  bool gated() const { return gated_; }
  int32_t state() const { return state_; }

 private:
  std::shared_ptr<TokenMasker> m_;
  Gate gate_;
  bool gated_;
  std::string tail_;  // the last bytes written while gated
  int32_t state_;
  Bits bits_;
};

// Applies `bits` to logits[0, n): ids whose bit is clear get -inf.
void apply_mask(const Bits& bits, float* logits, int64_t n);

}  // namespace mmx::grammar
