#include "model/layers/lm_head.h"

#include "model/trace.h"

namespace mmx::layers {

namespace {
enum Slot { kNormed = 90 };
}

void lm_head(const Tensor& x, bool all_logits, const Tensor& final_norm, float eps,
             const ops::Linear& head, Scratch& s, Tensor& logits) {
  const int64_t n = x.dim(0);
  const Tensor rows = all_logits ? x : x.rows_range(n - 1, n);  // [n_logit_rows, d_model]
  Tensor hn = s.f32(kNormed, {rows.dim(0), x.dim(1)});
  ops::rms_norm(rows, final_norm, eps, hn);
  trace(hn, "final_norm");
  ops::matmul(hn, head, logits);
  trace(logits, "logits");
}

}  // namespace mmx::layers
