// StepBudget: how many prefill tokens one step may add without stalling the running decodes
// past a target step time — the inter-token latency every streaming client sees (a 512-token
// prefill chunk on an M2-sized model made decodes wait seconds: the engine-house issue measured
// ITL p99 3.8 s against llama-server's 0.5 s). It learns from the steps the engine runs:
//   D(d) = EWMA of the time of steps that only decode d sequences (one per d: 8 decodes of an MoE
//          read far more experts than 1; an unseen d takes the nearest d seen);
//   F, P = a line fitted (exponentially weighted least squares) to the extra seconds of steps
//          that also prefill n tokens: extra ≈ F + P·n. F is what any prefill costs at all (an
//          MoE chunk of a few tokens already touches most experts); with one n seen, F = 0;
// and allows (target - D(d) - F) / P prefill tokens beside d decodes (at least kMinPrefill, so
// prefills progress), where target = max_step_ms, or in auto mode kAutoFactor × D(d).
// Unbounded while nothing decodes (nobody waits), until D and P have been seen, and (unless
// strict) while fewer sequences decode than wait to start: a stall then delays fewer streams than
// it lets begin (the burst of a wave of requests is prefilled at full speed instead of a few
// tokens a step). Strict bounds those steps too: the first prompts of a burst start sooner, each
// step beside them is long (the TTFT corner of the README's serving table).
#pragma once

#include <cstdint>
#include <vector>

namespace mmx {

class StepBudget {
 public:
  struct PrefillCost {
    double fixed_s = 0;   // F
    double token_s = -1;  // P (< 0: no prefill step seen yet)
  };
  static constexpr double kAutoFactor = 1.5;
  static constexpr int64_t kMinPrefill = 16;
  // max_step_ms < 0: off (only the engine's token budget); 0: auto; > 0: that target.
  explicit StepBudget(double max_step_ms, bool strict = false) : max_step_ms_(max_step_ms), strict_(strict) {}
  // n_decoding: sequences with one pending token; n_starting: prefilling ones plus those that
  // can be admitted now.
  int64_t prefill_tokens(int64_t n_decoding, int64_t n_starting) const;
  void observe(double seconds, int64_t n_decode, int64_t n_prefill);
  double decode_step_s(int64_t n_decoding) const;  // D(d) (< 0: no decode-only step seen yet)
  PrefillCost prefill_cost() const;  // the fitted line extra ≈ F + P·n

 private:
  double max_step_ms_;
  bool strict_;
  std::vector<double> d_;  // D(d) at index d; < 0: not seen
  // Decayed sums over prefill steps (n tokens, e extra seconds): weight, n, n², e, n·e.
  double sw_ = 0, sn_ = 0, snn_ = 0, se_ = 0, sne_ = 0;
};

}  // namespace mmx
