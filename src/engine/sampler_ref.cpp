#include "engine/sampler_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mmx {

int32_t sample_reference(const float* logits, int64_t n, const SamplingParams& p, const SamplerState& st,
                         const std::vector<int32_t>& stop_ids, double u) {
  std::vector<double> z(logits, logits + n);
  for (const auto& [id, b] : p.logit_bias)
    if (id < n) z[size_t(id)] += double(b);
  if (st.n_generated() < p.min_tokens)
    for (int32_t id : stop_ids)
      if (id >= 0 && id < n) z[size_t(id)] = -std::numeric_limits<double>::infinity();
  for (int32_t id : st.seen())
    if (id >= 0 && id < n) z[size_t(id)] = z[size_t(id)] > 0 ? z[size_t(id)] / p.repetition_penalty
                                                             : z[size_t(id)] * p.repetition_penalty;
  for (const auto& [id, c] : st.output_counts())
    if (id >= 0 && id < n) z[size_t(id)] -= double(p.frequency_penalty) * c + double(p.presence_penalty);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (z[size_t(i)] > z[size_t(best)]) best = i;
  if (std::isinf(z[size_t(best)]) && z[size_t(best)] < 0) {  // every id masked: the raw argmax
    best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    return int32_t(best);
  }
  if (p.temperature == 0) return int32_t(best);
  // Every id, sorted by adjusted logit descending (ties -> lower id).
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b); });
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = std::exp((z[size_t(i)] - z[size_t(best)]) / p.temperature);
  size_t keep = p.top_k > 0 ? std::min<size_t>(size_t(p.top_k), order.size()) : order.size();
  if (p.top_p < 1) {
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += w[size_t(order[i])];
    double acc = 0;
    for (size_t i = 0; i < keep; ++i) {
      acc += w[size_t(order[i])];
      if (acc >= p.top_p * sum) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<int32_t> kept;
  for (size_t i = 0; i < keep; ++i)
    if (w[size_t(order[i])] >= std::max<double>(p.min_p, kMinWeight)) kept.push_back(order[i]);
  std::sort(kept.begin(), kept.end());
  double total = 0;
  for (int32_t id : kept) total += w[size_t(id)];
  double acc = 0;
  for (int32_t id : kept) {
    acc += w[size_t(id)];
    if (u * total < acc) return id;
  }
  return kept.back();
}

}  // namespace mmx
