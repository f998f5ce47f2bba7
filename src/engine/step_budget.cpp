#include "engine/step_budget.h"

#include <algorithm>
#include <limits>

namespace mmx {

namespace {
constexpr double kAlpha = 0.2;  // EWMA weight of the newest step
double ewma(double old, double x) { return old < 0 ? x : old + kAlpha * (x - old); }
}  // namespace

int64_t StepBudget::prefill_tokens(bool decodes_running) const {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  if (max_step_ms_ < 0 || !decodes_running || d_ < 0 || p_ <= 0) return kUnbounded;
  const double target = max_step_ms_ > 0 ? max_step_ms_ / 1000.0 : kAutoFactor * d_;
  const double n = (target - d_) / p_;
  if (!(n < 1e15)) return kUnbounded;
  return std::max(kMinPrefill, int64_t(n));
}

void StepBudget::observe(double seconds, int64_t n_decode, int64_t n_prefill) {
  if (n_prefill == 0) {
    if (n_decode > 0) d_ = ewma(d_, seconds);
    return;
  }
  const double extra = std::max(0.0, seconds - (d_ > 0 ? d_ : 0.0));  // D: the weights read once per step
  p_ = ewma(p_, extra / double(n_prefill));
}

}  // namespace mmx
