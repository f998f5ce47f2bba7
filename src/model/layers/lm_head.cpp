#include "model/layers/lm_head.h"

#include "model/trace.h"

namespace mmx::layers {

namespace {
enum Slot { kNormed = 90, kLastIds, kLastRows };
}

void lm_head(const Tensor& x, std::span<const SeqChunk> seqs, bool all_logits, const Tensor& final_norm,
             float eps, const ops::Linear& head, Scratch& s, Tensor& logits) {
  const int64_t n = x.dim(0), d = x.dim(1), m = all_logits ? n : int64_t(seqs.size());
  Tensor rows;  // [m, d_model]: the rows that need logits
  if (all_logits) {
    rows = x;
  } else if (seqs.size() == 1 && seqs[0].begin + seqs[0].n == n) {
    rows = x.rows_range(n - 1, n);  // single sequence: a view, no copy
  } else {
    Tensor ids = s.i32(kLastIds, {m});  // [m] I32: the last row of each sequence
    for (int64_t i = 0; i < m; ++i) ids.ptr<int32_t>()[i] = int32_t(seqs[size_t(i)].begin + seqs[size_t(i)].n - 1);
    rows = s.f32(kLastRows, {m, d});
    ops::rows_gather(x, ids, rows);
  }
  Tensor hn = s.f32(kNormed, {m, d});
  ops::rms_norm(rows, final_norm, eps, hn);
  trace(hn, "final_norm");
  ops::matmul(hn, head, logits);
  trace(logits, "logits");
}

}  // namespace mmx::layers
