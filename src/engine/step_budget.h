// StepBudget: how many prefill tokens one step may add without stalling the running decodes
// past a target step time — the inter-token latency every streaming client sees (a 512-token
// prefill chunk on an M2-sized model made decodes wait seconds: the engine-house issue measured
// ITL p99 3.8 s against llama-server's 0.5 s). It learns from the steps the engine runs:
//   D = EWMA of the time of steps that only decode,
//   P = EWMA of the extra seconds per prefill token in steps that also prefill,
// and allows (target - D) / P prefill tokens (at least kMinPrefill, so prefills progress), where
// target = max_step_ms, or in auto mode kAutoFactor × D. Unbounded while nothing decodes (nobody
// waits) and until both D and P have been seen once.
#pragma once

#include <cstdint>

namespace mmx {

class StepBudget {
 public:
  static constexpr double kAutoFactor = 3.0;
  static constexpr int64_t kMinPrefill = 16;
  // max_step_ms < 0: off (only the engine's token budget); 0: auto; > 0: that target.
  explicit StepBudget(double max_step_ms) : max_step_ms_(max_step_ms) {}
  int64_t prefill_tokens(bool decodes_running) const;
  void observe(double seconds, int64_t n_decode, int64_t n_prefill);
  double decode_step_s() const { return d_; }
  double prefill_token_s() const { return p_; }

 private:
  double max_step_ms_;
  double d_ = -1, p_ = -1;  // < 0: not seen yet
};

}  // namespace mmx
