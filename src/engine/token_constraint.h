// TokenConstraint: a per-sequence rule for which ids may come next (structured output, forced
// tool calls, GBNF). The engine sees ids only: the server builds one from text (src/grammar/) and
// hands the engine a factory; the sampler asks it before every draw and tells it every token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace mmx {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets logits[id] = -inf for every id of [0, n_vocab) that may not come next. `left`: tokens the
  // sequence may still generate, this one included (>= 1), so the constraint can steer a reply to
  // finish within max_tokens. `stop_ids` end the sequence: allowed only where the output may end.
  // Leaves at least one id allowed. May throw mmx::Error when it cannot go on (a grammar that grew
  // past its limits): the engine then ends the sequence with that error.
  virtual void restrict(float* logits, int64_t n_vocab, int64_t left, std::span<const int32_t> stop_ids) = 0;
  // The id that was drawn.
  virtual void accept(int32_t id) = 0;
};

// Makes a fresh constraint for one sequence (n choices of a request each get their own).
using ConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace mmx
