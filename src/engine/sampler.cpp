#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "ops/ops.h"  // the vocabulary passes: ops::row_*

namespace mmx {

namespace {

// (z, id) candidates ordered by z descending, ties -> lower id: the reference's total order
// (ops::row_top_k keeps the same one).
bool by_z_desc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The draw when nothing but min-p filters: u · Σ_{w >= w_min} w walked in id order, found
// through per-block sums (one pass to sum, one block to walk).
int32_t draw_all(const float* w, int64_t n, float w_min, double u, std::vector<double>& blocks) {
  constexpr int64_t kBlock = 256;
  blocks.assign(size_t((n + kBlock - 1) / kBlock), 0.0);
  double total = 0;
  int32_t last = -1;
  for (int64_t b = 0; b < int64_t(blocks.size()); ++b) {
    double s = 0;
    for (int64_t i = b * kBlock, e = std::min(n, i + kBlock); i < e; ++i)
      if (w[i] >= w_min) s += w[i], last = int32_t(i);
    blocks[size_t(b)] = s;
    total += s;
  }
  const double r = u * total;
  double acc = 0;
  for (int64_t b = 0; b < int64_t(blocks.size()); ++b) {
    if (r >= acc + blocks[size_t(b)]) {
      acc += blocks[size_t(b)];
      continue;
    }
    for (int64_t i = b * kBlock, e = std::min(n, i + kBlock); i < e; ++i)
      if (w[i] >= w_min && r < (acc += w[i])) return int32_t(i);
  }
  return last;
}

}  // namespace

int32_t argmax(const float* x, int64_t n) { return ops::row_find(x, n, ops::row_max(x, n)); }

RawLogprobs raw_logprobs(const float* lg, int64_t n, int32_t tok, int top) {
  double mx = lg[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(lg[i]));
  double z = 0;
  for (int64_t i = 0; i < n; ++i) z += std::exp(double(lg[i]) - mx);
  const double lz = mx + std::log(z);
  RawLogprobs r;
  r.token = float(lg[tok] - lz);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(i);
    const int64_t k = std::min<int64_t>(top, n);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
    for (int64_t i = 0; i < k; ++i) r.top.emplace_back(ids[size_t(i)], float(lg[ids[size_t(i)]] - lz));
  }
  return r;
}

void validate_sampling(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) fail("temperature must be >= 0, got {}", p.temperature);
  if (p.top_k < 0) fail("top_k must be >= 0 (0 disables it), got {}", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail("top_p must be in (0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) fail("min_p must be in [0, 1], got {}", p.min_p);
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2))
    fail("presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2))
    fail("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    fail("repetition_penalty must be > 0 (1 disables it), got {}", p.repetition_penalty);
  if (p.min_tokens < 0) fail("min_tokens must be >= 0, got {}", p.min_tokens);
  for (const auto& [id, b] : p.logit_bias) {
    if (id < 0) fail("logit_bias: token id {} is negative", id);
    if (!(b >= -100 && b <= 100)) fail("logit_bias: the bias of token {} must be in [-100, 100], got {}", id, b);
  }
}

SamplerState::SamplerState(const SamplingParams& p, std::span<const int32_t> prompt)
    : track_counts_(p.presence_penalty != 0 || p.frequency_penalty != 0), track_seen_(p.repetition_penalty != 1) {
  if (track_seen_) seen_.insert(prompt.begin(), prompt.end());
}

void SamplerState::accept(int32_t tok) {
  ++n_generated_;
  if (track_counts_) ++counts_[tok];
  if (track_seen_) seen_.insert(tok);
}

Sampler::Sampler(const SamplingParams& p, std::span<const int32_t> prompt, std::vector<int32_t> stop_ids)
    : p_(p), stop_ids_(std::move(stop_ids)), state_(p, prompt), rng_(p.seed) {
  validate_sampling(p_);
}

bool Sampler::stops(int32_t tok) const { return std::find(stop_ids_.begin(), stop_ids_.end(), tok) != stop_ids_.end(); }

void Sampler::constrain(std::unique_ptr<TokenConstraint> c, int64_t max_tokens) {
  constraint_ = std::move(c);
  max_tokens_ = max_tokens;
}

const float* Sampler::adjusted(const float* logits, int64_t n) {
  const bool mask = state_.n_generated() < p_.min_tokens && !stop_ids_.empty();
  if (p_.logit_bias.empty() && !mask && state_.output_counts().empty() && state_.seen().empty() && !constraint_)
    return logits;
  work_.assign(logits, logits + n);
  for (const auto& [id, b] : p_.logit_bias)
    if (id < n) work_[size_t(id)] += b;
  if (mask)
    for (int32_t id : stop_ids_)
      if (id >= 0 && id < n) work_[size_t(id)] = -std::numeric_limits<float>::infinity();
  const float r = p_.repetition_penalty;
  for (int32_t id : state_.seen())
    if (id >= 0 && id < n) {
      float& x = work_[size_t(id)];
      x = x > 0 ? x / r : x * r;
    }
  for (const auto& [id, c] : state_.output_counts())
    if (id >= 0 && id < n) work_[size_t(id)] -= p_.frequency_penalty * float(c) + p_.presence_penalty;
  if (constraint_)
    constraint_->restrict(work_.data(), n, std::max<int64_t>(1, max_tokens_ - state_.n_generated()), stop_ids_);
  return work_.data();
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  const double u = p_.temperature == 0.0f ? 0.0 : std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const int32_t tok = pick(logits, n, u);
  state_.accept(tok);
  if (constraint_) constraint_->accept(tok);
  return tok;
}

int32_t Sampler::pick(const float* logits, int64_t n, double u) {
  const float* z = adjusted(logits, n);
  const float mx = ops::row_max(z, n);
  if (!(mx > -std::numeric_limits<float>::infinity())) return argmax(logits, n);  // all masked: raw argmax
  if (p_.temperature == 0.0f) return ops::row_find(z, n, mx);
  const float inv_t = 1.0f / p_.temperature;
  const float w_min = std::max(p_.min_p, kMinWeight);  // min-p, and never a weight below e^-85
  const bool top_k = p_.top_k > 0 && p_.top_k < n;
  double need = 0;  // top-p: the mass the kept prefix must reach
  if (top_k) {  // the k largest in one pass; exp only for them
    ops::row_top_k(z, n, p_.top_k, cand_);
    w_.resize(size_t(n));
    double kept_sum = 0;
    for (const auto& c : cand_) {
      float& w = w_[size_t(c.second)];
      w = (c.first - mx) * inv_t;
      ops::row_exp(&w, 1);  // the same polynomial as row_exp_sum's lanes
      kept_sum += w;
    }
    need = double(p_.top_p) * kept_sum;
  } else {
    w_.resize(size_t(n));
    const double sum = ops::row_exp_sum(z, n, mx, inv_t, w_.data());  // w = exp((z - max) / T), w_max = 1
    if (p_.top_p >= 1.0f) return draw_all(w_.data(), n, w_min, u, blocks_);
    // top-p: gather the ids above a threshold whose mass provably reaches top_p (e^-4, e^-8, ...).
    need = double(p_.top_p) * sum;
    float t = 0;
    for (float d : {4.0f, 8.0f, 16.0f, 32.0f})
      if (ops::row_sum_at_least(w_.data(), n, std::exp(-d)) >= need * (1 + 1e-5) + 1e-30) {  // margin: float lanes
        t = std::exp(-d);
        break;
      }
    cand_.clear();
    for (int64_t i = 0; i < n; ++i)
      if (w_[size_t(i)] >= t) cand_.push_back({z[i], int32_t(i)});
  }
  size_t keep = cand_.size();
  if (p_.top_p < 1.0f) {
    // The smallest descending prefix with mass >= need: select the m largest for a growing m
    // until they hold it, then sort only those.
    for (size_t m = std::min<size_t>(64, cand_.size());; m = std::min(cand_.size(), m * 8)) {
      if (m < cand_.size()) std::nth_element(cand_.begin(), cand_.begin() + ptrdiff_t(m), cand_.end(), by_z_desc);
      double mass = 0;
      for (size_t i = 0; i < m; ++i) mass += w_[size_t(cand_[i].second)];
      if (mass < need && m < cand_.size()) continue;
      std::sort(cand_.begin(), cand_.begin() + ptrdiff_t(m), by_z_desc);
      double acc = 0;
      keep = m;
      for (size_t i = 0; i < m; ++i) {
        acc += w_[size_t(cand_[i].second)];
        if (acc >= need) {
          keep = i + 1;
          break;
        }
      }
      break;
    }
  }
  cand_.resize(keep);
  std::erase_if(cand_, [&](const auto& c) { return w_[size_t(c.second)] < w_min; });
  std::sort(cand_.begin(), cand_.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  double total = 0;
  for (const auto& c : cand_) total += w_[size_t(c.second)];
  const double r = u * total;
  double acc = 0;
  for (const auto& c : cand_) {
    acc += w_[size_t(c.second)];
    if (r < acc) return c.second;
  }
  return cand_.back().second;
}

}  // namespace mmx
