#include "train/adamw.h"

#include <algorithm>
#include <cmath>

namespace mmx::train {

void AdamW::step(ParamSet<float>& p, double lr) {
  ++t;
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(t)), bc2 = 1.0 - std::pow(cfg.beta2, double(t));
  const float b1 = float(cfg.beta1), b2 = float(cfg.beta2);
  const float step_size = float(lr / bc1), inv_bc2 = float(1.0 / bc2), eps = float(cfg.eps);
  for (const ParamInfo& info : p.infos) {
    if (!info.trainable) continue;
    const float decay = info.decay ? float(lr * cfg.weight_decay) : 0.0f;
    float* w = p.value.data() + info.offset;
    const float* g = p.grad.data() + info.offset;
    float* mm = m.data() + info.offset;
    float* vv = v.data() + info.offset;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < info.numel; ++i) {
      mm[i] = b1 * mm[i] + (1.0f - b1) * g[i];
      vv[i] = b2 * vv[i] + (1.0f - b2) * g[i] * g[i];
      w[i] -= step_size * mm[i] / (std::sqrt(vv[i] * inv_bc2) + eps) + decay * w[i];
    }
  }
}

double clip_grad_norm(ParamSet<float>& p, double max_norm) {
  // Fixed chunks summed in order: the same bits for any thread count.
  constexpr int64_t kChunk = 1 << 14;
  const int64_t n = p.total(), n_chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(n_chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n_chunks; ++c) {
    double s = 0;
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += double(p.grad[size_t(i)]) * p.grad[size_t(i)];
    part[size_t(c)] = s;
  }
  double ss = 0;
  for (double x : part) ss += x;
  const double norm = std::sqrt(ss);
  if (max_norm > 0 && norm > max_norm) {
    const float s = float(max_norm / norm);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) p.grad[size_t(i)] *= s;
  }
  return norm;
}

double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_ratio) {
  if (warmup > 0 && step < warmup) return lr * double(step + 1) / double(warmup);
  if (total <= warmup) return lr;
  const double progress = std::min(1.0, double(step - warmup) / double(std::max<int64_t>(1, total - warmup)));
  return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace mmx::train
