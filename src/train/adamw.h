// AdamW (decoupled weight decay, Loshchilov & Hutter), global-norm gradient clipping, and the
// warm-up + cosine learning-rate schedule — over a ParamSet<float>'s flat buffers.
//
// Update per element (t = step count after increment, bias-corrected moments):
//   m = β1 m + (1−β1) g;  v = β2 v + (1−β2) g²
//   θ −= lr · ( m̂ / (sqrt(v̂) + eps) + wd · θ )     (wd only where ParamInfo::decay)
// Non-trainable tensors (the routing bias) are skipped.
#pragma once

#include <cstdint>
#include <vector>

#include "train/params.h"

namespace mmx::train {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

struct AdamW {
  AdamWConfig cfg;
  int64_t t = 0;         // steps taken
  std::vector<float> m;  // [total] first moments
  std::vector<float> v;  // [total] second moments

  AdamW(AdamWConfig c, int64_t total) : cfg(c), m(size_t(total), 0.0f), v(size_t(total), 0.0f) {}
  void step(ParamSet<float>& p, double lr);
};

// The global L2 norm of the trainable gradients (summed in a fixed order: thread-count invariant);
// when max_norm > 0 and the norm exceeds it, every gradient is scaled by max_norm / norm.
// Returns the norm before clipping.
double clip_grad_norm(ParamSet<float>& p, double max_norm);

// Linear warm-up from lr/warmup to lr over `warmup` steps, then cosine decay to lr·min_ratio at
// `total` steps. step is 0-based.
double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_ratio);

}  // namespace mmx::train
