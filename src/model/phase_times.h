// Where a forward's time goes, by phase: `mmx bench model`'s per-op breakdown. Collected only
// into a collector the caller hands the model (Model::set_phase_times); with none, a scope costs
// one branch. Phases do not nest; what no phase covers (embedding, norms, residual adds) is
// "other" = the forward's wall time minus the phases.
#pragma once

#include "base/clock.h"

namespace mmx {

enum class Phase : int {
  kAttention,  // QKV/O projections, norms and RoPE inside the block, cache writes, attention
  kRouter,     // router matmul, top-k selection, grouping tokens by expert
  kExperts,    // routed expert FFNs, the shared expert, dense MLP layers
  kLmHead,     // final norm of the logit rows and the vocabulary projection
  kCount
};
inline constexpr const char* kPhaseNames[] = {"attention", "router", "experts", "lm_head"};

struct PhaseTimes {
  double seconds[int(Phase::kCount)] = {};
  void reset() { *this = PhaseTimes{}; }
};

// Adds the scope's wall time to t->seconds[p] (nothing when t is null).
class PhaseScope {
 public:
  PhaseScope(PhaseTimes* t, Phase p) : t_(t), p_(p), t0_(t ? now_s() : 0.0) {}
  ~PhaseScope() { stop(); }
  // Ends the scope early (the destructor then adds nothing).
  void stop() {
    if (t_ != nullptr) t_->seconds[int(p_)] += now_s() - t0_;
    t_ = nullptr;
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimes* t_;
  Phase p_;
  double t0_;
};

}  // namespace mmx
