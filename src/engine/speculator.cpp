#include "engine/speculator.h"

#include <algorithm>

namespace mmx {

std::vector<int32_t> PromptLookupDrafter::draft(std::span<const int32_t> tokens, int64_t k) {
  const int64_t n = int64_t(tokens.size());
  if (k <= 0) return {};
  for (int64_t g = std::min<int64_t>(max_ngram_, n - 1); g >= min_ngram_; --g) {
    const auto tail = tokens.subspan(size_t(n - g));
    // The most recent earlier occurrence (ending before the tail itself starts).
    for (int64_t start = n - g - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      const int64_t from = start + g, m = std::min(k, n - from);
      if (m <= 0) continue;
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + m);
    }
  }
  return {};
}

void SpecStats::count(int64_t n_drafted, int64_t n_accepted) {
  if (n_drafted <= 0) return;
  ++drafts;
  draft_tokens += n_drafted;
  accepted += n_accepted;
  if (int64_t(accepted_per_pos.size()) < n_drafted) accepted_per_pos.resize(size_t(n_drafted), 0);
  for (int64_t j = 0; j < n_accepted; ++j) ++accepted_per_pos[size_t(j)];
}

int32_t spec_accept(std::span<const double> p, std::span<const double> q, int32_t d, double u_accept,
                    double u_residual, bool* accepted) {
  const double pd = p[size_t(d)], qd = q[size_t(d)];
  if (qd > 0 && u_accept < std::min(1.0, pd / qd)) {
    *accepted = true;
    return d;
  }
  *accepted = false;
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += std::max(0.0, p[i] - q[i]);
  const double r = u_residual * total;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double w = std::max(0.0, p[i] - q[i]);
    if (w <= 0) continue;
    acc += w;
    last = int32_t(i);
    if (r < acc) return int32_t(i);
  }
  return last >= 0 ? last : d;  // p == q: nothing left to resample (never reached: then d is accepted)
}

}  // namespace mmx
