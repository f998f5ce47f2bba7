#include "engine/step_budget.h"

#include <algorithm>
#include <limits>

namespace mmx {

namespace {
constexpr double kAlpha = 0.2;  // weight of the newest step (EWMA and the decayed sums)
double ewma(double old, double x) { return old < 0 ? x : old + kAlpha * (x - old); }
}  // namespace

// Weighted least squares of e = F + P·n; F = 0 (P = Σe / Σn) when the n seen barely differ;
// F >= 0 and P > 0 are enforced (a negative intercept is noise: refit through the origin).
StepBudget::PrefillCost StepBudget::prefill_cost() const {
  if (sw_ <= 0 || sn_ <= 0) return {};
  const double mean_n = sn_ / sw_, var_n = snn_ / sw_ - mean_n * mean_n;
  if (var_n > 0.01 * mean_n * mean_n) {
    const double slope = (sne_ / sw_ - mean_n * se_ / sw_) / var_n;
    const double icpt = se_ / sw_ - slope * mean_n;
    if (slope > 0 && icpt >= 0) return {icpt, slope};
  }
  return {0, se_ / sn_};
}

double StepBudget::decode_step_s(int64_t n_decoding) const {
  double best = -1;
  int64_t best_dist = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < int64_t(d_.size()); ++i) {
    const int64_t dist = i > n_decoding ? i - n_decoding : n_decoding - i;
    if (d_[size_t(i)] >= 0 && (dist < best_dist || (dist == best_dist && i > n_decoding)))
      best = d_[size_t(i)], best_dist = dist;
  }
  return best;
}

int64_t StepBudget::prefill_tokens(int64_t n_decoding, int64_t n_starting) const {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  const double d = decode_step_s(n_decoding);
  if (max_step_ms_ < 0 || n_decoding == 0 || (!strict_ && n_decoding < n_starting) || d < 0) return kUnbounded;
  const PrefillCost c = prefill_cost();
  if (c.token_s <= 0) return kUnbounded;
  const double target = max_step_ms_ > 0 ? max_step_ms_ / 1000.0 : kAutoFactor * d;
  const double n = (target - d - c.fixed_s) / c.token_s;
  if (!(n < 1e15)) return kUnbounded;
  return std::max(kMinPrefill, int64_t(n));
}

void StepBudget::observe(double seconds, int64_t n_decode, int64_t n_prefill) {
  if (n_prefill == 0) {
    if (n_decode <= 0) return;
    if (int64_t(d_.size()) <= n_decode) d_.resize(size_t(n_decode) + 1, -1.0);
    d_[size_t(n_decode)] = ewma(d_[size_t(n_decode)], seconds);
    return;
  }
  const double d = n_decode > 0 ? decode_step_s(n_decode) : -1;
  const double e = std::max(0.0, seconds - std::max(d, 0.0));  // D(d): what the decodes cost anyway
  const double n = double(n_prefill), keep = 1.0 - kAlpha;
  sw_ = keep * sw_ + 1, sn_ = keep * sn_ + n, snn_ = keep * snn_ + n * n;
  se_ = keep * se_ + e, sne_ = keep * sne_ + n * e;
}

}  // namespace mmx
