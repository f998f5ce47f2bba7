#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace mmx {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    fail("temperature must be >= 0, got {}", p.temperature);
  if (p.top_k < 0) fail("top_k must be >= 0 (0 disables it), got {}", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail("top_p must be in (0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) fail("min_p must be in [0, 1], got {}", p.min_p);
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  if (p_.temperature == 0.0f) return argmax(logits, n);
  cand_.resize(n);
  for (int64_t i = 0; i < n; ++i) cand_[i] = {logits[i] / p_.temperature, int32_t(i)};
  // Descending by logit, ties -> lower id: a total order, so results are reproducible.
  auto by_prob = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  int64_t m = n;
  if (p_.top_k > 0 && p_.top_k < m) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_prob);
    m = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), by_prob);
  }
  const float mx = cand_[0].first;
  double sum = 0;
  for (int64_t i = 0; i < m; ++i) {
    cand_[i].first = std::exp(cand_[i].first - mx);
    sum += cand_[i].first;
  }
  // top-p over the sorted prefix, then min-p relative to the most likely token.
  int64_t keep = m;
  if (p_.top_p < 1.0f) {
    double acc = 0;
    for (int64_t i = 0; i < m; ++i) {
      acc += cand_[i].first / sum;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0) {
    const double thr = p_.min_p * cand_[0].first;
    int64_t j = 1;
    while (j < keep && cand_[j].first >= thr) ++j;
    keep = j;
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += cand_[i].first;
  const double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += cand_[i].first;
    if (r < acc) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace mmx
