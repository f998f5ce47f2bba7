// The RL objectives (docs/rl.md "Objectives"): CISPO, PPO-clip, GRPO, DAPO, Dr.GRPO, as pure
// functions of the per-token log-probabilities of a (micro-)batch's scored tokens. One masked
// form for all five:
//
//   loss = −J = Σ_k c_k · ℓ_k(logp_k)  (+ kl_coef · Σ_k c_k · k3_k)   over the scored tokens k,
//   r_k = exp(logp_k − old_logp_k),  lo = 1 − ε_low,  hi = 1 + ε_high,
//   CISPO      ℓ_k = −sg(clip(r_k, lo, hi)) · Â_k · logp_k        (no gradient through the weight)
//   PPO-family ℓ_k = −min(r_k · Â_k, clip(r_k, lo, hi) · Â_k)
//   k3_k = exp(ref_k − logp_k) − (ref_k − logp_k) − 1              (KL to a reference policy)
//
// with c_k the aggregation weight of the objective, from GLOBAL counts of the optimizer batch
// (ObjectiveBatch::sample_len), so the losses and gradients of micro-batches sum to the batch's:
//   CISPO, PPO, DAPO  token-mean            c_k = 1 / Σ_i |o_i|
//   GRPO              seq-mean-token-mean   c_k = 1 / (B · |o_{i(k)}|)
//   Dr.GRPO           constant normaliser   c_k = 1 / (B · L),  L = max_len (1 when max_len = 0)
// (B = sample_len.size()). The gradient the trainer needs is dloss_dlogp: the per-token weight of
// train::token_nll is w_k = −dloss_dlogp[k].
//
// Also here: the per-step diagnostics (clip fractions by side, ratio, KL) and the log-prob mismatch
// between two arrays of the same tokens (trainer vs rollout engine).
// Not here: advantages, rewards, group filtering (rl/advantage.h); the model, the packing of
// samples into rows (rl/tree.h); the optimizer.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mmx::rl {

enum class ObjectiveKind { kCispo, kPpo, kGrpo, kDapo, kDrGrpo };

// "cispo" | "ppo" | "grpo" | "dapo" | "drgrpo"; anything else: mmx::Error naming the choices.
ObjectiveKind parse_objective(const std::string& name);
const char* objective_name(ObjectiveKind kind);

struct ObjectiveOptions {
  ObjectiveKind kind = ObjectiveKind::kCispo;
  // NaN = the objective's published default (default_eps_low / default_eps_high; docs/rl.md):
  //   CISPO ε_low = 1 (no lower bound: r ≥ 0), ε_high = 3 (weight capped at 4);
  //   PPO, GRPO, Dr.GRPO ε = 0.2 both sides; DAPO ε_low = 0.2, ε_high = 0.28.
  double eps_low = NAN, eps_high = NAN;
  double kl_coef = 0;  // k3 KL to a reference policy, aggregated with c_k: needs ref_logp
};

double default_eps_low(ObjectiveKind kind);
double default_eps_high(ObjectiveKind kind);

// The scored tokens of a (micro-)batch, flat: token k belongs to sample `sample[k]`.
struct ObjectiveBatch {
  std::vector<int32_t> sample;    // [n] sample id of each scored token (global ids over the optimizer batch)
  std::vector<double> old_logp;   // [n] log π_old (the rollout's log-prob)
  std::vector<double> advantage;  // [n] Â_t (per token; a sequence advantage repeated)
  std::vector<double> ref_logp;   // [n] or empty (required when kl_coef != 0)
  // Aggregation over the WHOLE optimizer batch (global denominators: splitting a batch into
  // micro-batches and summing their losses and gradients gives the same numbers):
  std::vector<int64_t> sample_len;  // |o_i| per global sample id (all samples of the optimizer batch)
  int64_t max_len = 0;              // Dr.GRPO's constant L (the generation budget); 0: L = 1
};

// Per (micro-)batch; combine() merges micro-batches (token-weighted means, summed losses).
struct ObjectiveDiagnostics {
  double clip_frac_low = 0, clip_frac_high = 0;  // fraction of tokens with r < lo / r > hi
  double ratio_mean = 0;                         // mean r over the tokens
  double kl_mean = 0;                            // mean k3 to the reference (0 without ref_logp)
  int64_t tokens = 0;
  double ratio_min = 0, ratio_max = 0;  // over the tokens (0 when tokens = 0)
  double zero_grad_frac = 0;            // PPO family: tokens whose gradient the min() zeroes (0 for CISPO)
  double old_kl_mean = 0;               // mean k3 of the current policy to π_old: how far the update went
  double policy_loss = 0;               // Σ_k c_k ℓ_k (the objective's part of loss)
  double kl_loss = 0;                   // kl_coef · Σ_k c_k k3_k (0 when kl_coef = 0)
};
ObjectiveDiagnostics combine(const ObjectiveDiagnostics& a, const ObjectiveDiagnostics& b);

struct ObjectiveResult {
  double loss = 0;
  std::vector<double> dloss_dlogp;
  ObjectiveDiagnostics diag;
};

// loss = −J (the value minimised) of this (micro-)batch's tokens; dloss_dlogp [n] = d loss / d logp_k
// with logp the CURRENT policy's log-prob of token k (logp: [n]). Throws mmx::Error on sizes that
// disagree, a sample id outside sample_len, more tokens of a sample than its |o_i|, a non-finite
// log-prob, a negative ε, or kl_coef != 0 without ref_logp.
ObjectiveResult objective_loss(const ObjectiveOptions& o, const ObjectiveBatch& b, const double* logp);

// The mismatch between two log-prob arrays of the same tokens: a = the trainer's, b = the engine's
// that sampled them. Δ_k = a_k − b_k, ρ_k = exp(Δ_k) = π_a / π_b.
struct LogprobMismatch {
  int64_t tokens = 0;
  double mean_abs = 0, max_abs = 0;  // mean |Δ|, max |Δ|
  double mean_delta = 0;             // mean Δ (signed: a systematic bias)
  double mean_ratio_minus_1 = 0;     // mean (ρ − 1): 0 in expectation when a = b in distribution
  double kl_k3 = 0;                  // mean (ρ − 1 − Δ) ≥ 0: k3 estimate of KL(π_b ‖ π_a)
};
LogprobMismatch logprob_mismatch(const double* a, const double* b, int64_t n);
LogprobMismatch logprob_mismatch(const float* a, const float* b, int64_t n);

}  // namespace mmx::rl
