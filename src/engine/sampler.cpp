#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "ops/cpu/simd.h"  // exp_ps, hmax, hsum: the vocabulary passes are the ops' kind of loop

namespace mmx {

// Vector passes over a vocabulary row (AVX2; the CPU floor). Each has a scalar tail that computes
// what a lane would, so a value never depends on where it fell.
namespace {

using ops::cpu::exp_ps;
using ops::cpu::exp_scalar;

float max_of(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  float r = ops::cpu::hmax(m);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

int32_t first_equal(const float* x, int64_t n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ)))
      return int32_t(i + __builtin_ctz(unsigned(m)));
  for (; i < n; ++i)
    if (x[i] == v) return int32_t(i);
  return 0;
}

// w[i] = exp((z[i] - mx) · inv_t); returns Σ w in double (per 8-lane block).
double exp_weights(const float* z, int64_t n, float mx, float inv_t, float* w) {
  const __m256 m = _mm256_set1_ps(mx), it = _mm256_set1_ps(inv_t);
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), m), it));
    _mm256_storeu_ps(w + i, e);
    acc = _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)),
                                           _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, acc);
  double s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += (w[i] = exp_scalar((z[i] - mx) * inv_t));
  return s;
}

// Σ_{w >= t} w in float lanes (a sufficiency test, not a result).
double mass_above(const float* w, int64_t n, float t) {
  const __m256 tt = _mm256_set1_ps(t);
  __m256 mass = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(w + i);
    mass = _mm256_add_ps(mass, _mm256_and_ps(_mm256_cmp_ps(x, tt, _CMP_GE_OQ), x));
  }
  double s = ops::cpu::hsum(mass);
  for (; i < n; ++i)
    if (w[i] >= t) s += w[i];
  return s;
}

// (z, id) candidates ordered by z descending, ties -> lower id: the reference's total order.
bool by_z_desc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The k largest (z, id) of z[0..n), ties -> lower id, in one pass: a min-heap of k, and 8 ids at a
// time rejected with one compare against its smallest (ids come in ascending order, so an equal
// z later never displaces an earlier one).
void top_k_of(const float* z, int64_t n, int k, std::vector<std::pair<float, int32_t>>& out) {
  const auto worse = by_z_desc;  // as the heap's "less": its top is the worst kept
  out.clear();
  int64_t i = 0;
  for (; i < n && int64_t(out.size()) < k; ++i) out.push_back({z[i], int32_t(i)});
  std::make_heap(out.begin(), out.end(), worse);
  auto offer = [&](int64_t j) {
    if (z[j] > out.front().first) {
      std::pop_heap(out.begin(), out.end(), worse);
      out.back() = {z[j], int32_t(j)};
      std::push_heap(out.begin(), out.end(), worse);
    }
  };
  for (; i < n && (i & 7); ++i) offer(i);
  for (; i + 8 <= n; i += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(z + i), _mm256_set1_ps(out.front().first), _CMP_GT_OQ));
    if (m)
      for (int j = 0; j < 8; ++j)
        if (m >> j & 1) offer(i + j);
  }
  for (; i < n; ++i) offer(i);
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

int32_t argmax(const float* x, int64_t n) { return first_equal(x, n, max_of(x, n)); }

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
  const float mx = max_of(z, n);
  if (!(mx > -std::numeric_limits<float>::infinity())) return argmax(logits, n);  // all masked: raw argmax
  if (p_.temperature == 0.0f) return first_equal(z, n, mx);
  const float inv_t = 1.0f / p_.temperature;
  const float w_min = std::max(p_.min_p, kMinWeight);  // min-p, and never a weight below e^-85
  const bool top_k = p_.top_k > 0 && p_.top_k < n;
  double need = 0;  // top-p: the mass the kept prefix must reach
  if (top_k) {  // the k largest in one pass; exp only for them
    top_k_of(z, n, p_.top_k, cand_);
    w_.resize(size_t(n));
    double kept_sum = 0;
    for (const auto& c : cand_) kept_sum += (w_[size_t(c.second)] = exp_scalar((c.first - mx) * inv_t));
    need = double(p_.top_p) * kept_sum;
  } else {
    w_.resize(size_t(n));
    const double sum = exp_weights(z, n, mx, inv_t, w_.data());  // w = exp((z - max) / T), w_max = 1
    if (p_.top_p >= 1.0f) return draw_all(w_.data(), n, w_min, u, blocks_);
    // top-p: gather the ids above a threshold whose mass provably reaches top_p (e^-4, e^-8, ...).
    need = double(p_.top_p) * sum;
    float t = 0;
    for (float d : {4.0f, 8.0f, 16.0f, 32.0f})
      if (mass_above(w_.data(), n, std::exp(-d)) >= need * (1 + 1e-5) + 1e-30) {  // margin: float lanes
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
