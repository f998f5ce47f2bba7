// The objectives of objective.h: one loop over the scored tokens, the aggregation weight c_k from
// the batch's global counts, the per-token surrogate and its derivative in closed form.
#include "rl/objective.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace mmx::rl {

ObjectiveKind parse_objective(const std::string& name) {
  if (name == "cispo") return ObjectiveKind::kCispo;
  if (name == "ppo") return ObjectiveKind::kPpo;
  if (name == "grpo") return ObjectiveKind::kGrpo;
  if (name == "dapo") return ObjectiveKind::kDapo;
  if (name == "drgrpo") return ObjectiveKind::kDrGrpo;
  fail("rl: unknown objective '{}': choose one of cispo, ppo, grpo, dapo, drgrpo", name);
}

const char* objective_name(ObjectiveKind kind) {
  switch (kind) {
    case ObjectiveKind::kCispo:
      return "cispo";
    case ObjectiveKind::kPpo:
      return "ppo";
    case ObjectiveKind::kGrpo:
      return "grpo";
    case ObjectiveKind::kDapo:
      return "dapo";
    case ObjectiveKind::kDrGrpo:
      return "drgrpo";
  }
  return "?";
}

// Sources in docs/rl.md "Objectives".
double default_eps_low(ObjectiveKind kind) { return kind == ObjectiveKind::kCispo ? 1.0 : 0.2; }

double default_eps_high(ObjectiveKind kind) {
  switch (kind) {
    case ObjectiveKind::kCispo:
      return 3.0;
    case ObjectiveKind::kDapo:
      return 0.28;
    default:
      return 0.2;
  }
}

namespace {

void check_batch(const ObjectiveOptions& o, const ObjectiveBatch& b, const double* logp) {
  const size_t n = b.sample.size();
  if (b.old_logp.size() != n || b.advantage.size() != n)
    fail("rl objective: sample ({}), old_logp ({}) and advantage ({}) must have one entry per scored token", n,
         b.old_logp.size(), b.advantage.size());
  if (!b.ref_logp.empty() && b.ref_logp.size() != n)
    fail("rl objective: ref_logp has {} entries for {} scored tokens (give one per token, or none)", b.ref_logp.size(),
         n);
  if (o.kl_coef != 0 && b.ref_logp.empty())
    fail("rl objective: kl_coef = {} needs the reference policy's log-probs (ref_logp); set kl_coef = 0 without one",
         o.kl_coef);
  if (!std::isfinite(o.kl_coef)) fail("rl objective: kl_coef must be finite, got {}", o.kl_coef);
  if (n > 0 && logp == nullptr) fail("rl objective: no current log-probs for {} scored tokens", n);
  if (b.max_len < 0) fail("rl objective: max_len must be >= 0 (0 = no constant), got {}", b.max_len);
  std::vector<int64_t> seen(b.sample_len.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    const int32_t s = b.sample[k];
    if (s < 0 || static_cast<size_t>(s) >= b.sample_len.size())
      fail(
          "rl objective: token {} belongs to sample {}, outside the batch's {} samples (sample_len lists every "
          "sample of the optimizer batch)",
          k, s, b.sample_len.size());
    if (++seen[s] > b.sample_len[s])
      fail("rl objective: sample {} has more scored tokens than its length |o_i| = {} in sample_len", s,
           b.sample_len[s]);
    if (!std::isfinite(logp[k]) || !std::isfinite(b.old_logp[k]) || !std::isfinite(b.advantage[k]) ||
        (!b.ref_logp.empty() && !std::isfinite(b.ref_logp[k])))
      fail("rl objective: token {} has a non-finite log-prob or advantage (logp {}, old {}, advantage {})", k, logp[k],
           b.old_logp[k], b.advantage[k]);
  }
}

// c_k per sample id (token-mean: one value for all).
std::vector<double> sample_weights(ObjectiveKind kind, const ObjectiveBatch& b) {
  const double B = static_cast<double>(b.sample_len.size());
  std::vector<double> c(b.sample_len.size(), 0.0);
  switch (kind) {
    case ObjectiveKind::kCispo:
    case ObjectiveKind::kPpo:
    case ObjectiveKind::kDapo: {
      int64_t total = 0;
      for (int64_t len : b.sample_len) total += len;
      if (total > 0) std::fill(c.begin(), c.end(), 1.0 / static_cast<double>(total));
      break;
    }
    case ObjectiveKind::kGrpo:
      for (size_t i = 0; i < c.size(); ++i)
        if (b.sample_len[i] > 0) c[i] = 1.0 / (B * static_cast<double>(b.sample_len[i]));
      break;
    case ObjectiveKind::kDrGrpo: {
      const double L = b.max_len > 0 ? static_cast<double>(b.max_len) : 1.0;
      std::fill(c.begin(), c.end(), 1.0 / (B * L));
      break;
    }
  }
  return c;
}

}  // namespace

ObjectiveResult objective_loss(const ObjectiveOptions& o, const ObjectiveBatch& b, const double* logp) {
  check_batch(o, b, logp);
  const double eps_low = std::isnan(o.eps_low) ? default_eps_low(o.kind) : o.eps_low;
  const double eps_high = std::isnan(o.eps_high) ? default_eps_high(o.kind) : o.eps_high;
  if (!(eps_low >= 0) || !(eps_high >= 0))
    fail("rl objective: eps_low ({}) and eps_high ({}) must be >= 0", eps_low, eps_high);
  const double lo = 1.0 - eps_low, hi = 1.0 + eps_high;
  const bool cispo = o.kind == ObjectiveKind::kCispo;
  const bool has_ref = !b.ref_logp.empty();
  const std::vector<double> c = sample_weights(o.kind, b);

  const size_t n = b.sample.size();
  ObjectiveResult res;
  res.dloss_dlogp.assign(n, 0.0);
  ObjectiveDiagnostics& d = res.diag;
  d.tokens = static_cast<int64_t>(n);
  d.ratio_min = n ? std::numeric_limits<double>::infinity() : 0.0;
  d.ratio_max = n ? -std::numeric_limits<double>::infinity() : 0.0;
  int64_t n_low = 0, n_high = 0, n_zero = 0;
  double ratio_sum = 0, kl_sum = 0, old_kl_sum = 0, policy = 0, kl = 0;
  for (size_t k = 0; k < n; ++k) {
    const double ck = c[b.sample[k]], A = b.advantage[k];
    const double log_r = logp[k] - b.old_logp[k];
    const double r = std::exp(log_r);
    const double rc = std::clamp(r, lo, hi);
    double loss_k, grad_k;
    if (cispo) {
      // sg(rc) is a constant: d/dlogp of −rc·A·logp is −rc·A.
      loss_k = -rc * A * logp[k];
      grad_k = -rc * A;
    } else {
      // −min(r·A, rc·A); dr/dlogp = r; the clipped branch is constant in logp.
      const double u = r * A, v = rc * A;
      if (u <= v) {
        loss_k = -u;
        grad_k = -u;
      } else {
        loss_k = -v;
        grad_k = 0.0;
        ++n_zero;
      }
    }
    policy += ck * loss_k;
    double g = ck * grad_k;
    if (has_ref) {
      const double dr = b.ref_logp[k] - logp[k], e = std::exp(dr);
      const double k3 = e - dr - 1.0;
      kl_sum += k3;
      if (o.kl_coef != 0) {
        kl += ck * o.kl_coef * k3;
        g += ck * o.kl_coef * (1.0 - e);  // d k3 / d logp = −e + 1
      }
    }
    res.dloss_dlogp[k] = g;
    n_low += r < lo;
    n_high += r > hi;
    ratio_sum += r;
    d.ratio_min = std::min(d.ratio_min, r);
    d.ratio_max = std::max(d.ratio_max, r);
    old_kl_sum += std::exp(-log_r) + log_r - 1.0;  // k3 with π_old in place of π_ref
  }
  if (n) {
    const double inv = 1.0 / static_cast<double>(n);
    d.clip_frac_low = n_low * inv;
    d.clip_frac_high = n_high * inv;
    d.zero_grad_frac = n_zero * inv;
    d.ratio_mean = ratio_sum * inv;
    d.kl_mean = kl_sum * inv;
    d.old_kl_mean = old_kl_sum * inv;
  }
  d.policy_loss = policy;
  d.kl_loss = kl;
  res.loss = policy + kl;
  return res;
}

ObjectiveDiagnostics combine(const ObjectiveDiagnostics& a, const ObjectiveDiagnostics& b) {
  if (a.tokens == 0) {
    ObjectiveDiagnostics r = b;
    r.policy_loss += a.policy_loss;
    r.kl_loss += a.kl_loss;
    return r;
  }
  if (b.tokens == 0) return combine(b, a);
  ObjectiveDiagnostics r;
  r.tokens = a.tokens + b.tokens;
  const double wa = static_cast<double>(a.tokens) / r.tokens, wb = static_cast<double>(b.tokens) / r.tokens;
  r.clip_frac_low = wa * a.clip_frac_low + wb * b.clip_frac_low;
  r.clip_frac_high = wa * a.clip_frac_high + wb * b.clip_frac_high;
  r.ratio_mean = wa * a.ratio_mean + wb * b.ratio_mean;
  r.kl_mean = wa * a.kl_mean + wb * b.kl_mean;
  r.zero_grad_frac = wa * a.zero_grad_frac + wb * b.zero_grad_frac;
  r.old_kl_mean = wa * a.old_kl_mean + wb * b.old_kl_mean;
  r.ratio_min = std::min(a.ratio_min, b.ratio_min);
  r.ratio_max = std::max(a.ratio_max, b.ratio_max);
  r.policy_loss = a.policy_loss + b.policy_loss;
  r.kl_loss = a.kl_loss + b.kl_loss;
  return r;
}

namespace {

template <class T>
LogprobMismatch mismatch(const T* a, const T* b, int64_t n) {
  LogprobMismatch m;
  m.tokens = n;
  if (n <= 0) return m;
  double abs_sum = 0, delta_sum = 0, ratio_sum = 0, k3_sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double delta = static_cast<double>(a[k]) - static_cast<double>(b[k]);
    if (!std::isfinite(delta))
      fail("rl mismatch: token {} has a non-finite log-prob (trainer {}, engine {})", k, static_cast<double>(a[k]),
           static_cast<double>(b[k]));
    const double rho_m1 = std::expm1(delta);
    abs_sum += std::fabs(delta);
    m.max_abs = std::max(m.max_abs, std::fabs(delta));
    delta_sum += delta;
    ratio_sum += rho_m1;
    k3_sum += rho_m1 - delta;
  }
  const double inv = 1.0 / static_cast<double>(n);
  m.mean_abs = abs_sum * inv;
  m.mean_delta = delta_sum * inv;
  m.mean_ratio_minus_1 = ratio_sum * inv;
  m.kl_k3 = k3_sum * inv;
  return m;
}

}  // namespace

LogprobMismatch logprob_mismatch(const double* a, const double* b, int64_t n) { return mismatch(a, b, n); }
LogprobMismatch logprob_mismatch(const float* a, const float* b, int64_t n) { return mismatch(a, b, n); }

}  // namespace mmx::rl
