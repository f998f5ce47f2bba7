#include "model/layers/lm_head.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "model/trace.h"

namespace mmx::layers {

namespace {
enum Slot { kNormed = 90, kLastIds, kLastRows, kSomeLogits };
}

void lm_head(const Tensor& x, std::span<const SeqChunk> seqs, bool all_logits, const Tensor& final_norm,
             float eps, const ops::Linear& head, Scratch& s, Tensor& logits) {
  const int64_t n = x.dim(0), d = x.dim(1), V = logits.dim(1);
  const int64_t want = all_logits ? n : std::count_if(seqs.begin(), seqs.end(), [](const SeqChunk& c) { return c.logits; });
  const bool every = all_logits || want == int64_t(seqs.size());
  Tensor rows;  // [want, d_model]: the rows that need logits
  if (all_logits) {
    rows = x;
  } else if (seqs.size() == 1 && seqs[0].begin + seqs[0].n == n && every) {
    rows = x.rows_range(n - 1, n);  // single sequence: a view, no copy
  } else {
    Tensor ids = s.i32(kLastIds, {want});  // [want] I32: the last row of each sequence that wants logits
    int64_t j = 0;
    for (const SeqChunk& c : seqs)
      if (c.logits) ids.ptr<int32_t>()[j++] = int32_t(c.begin + c.n - 1);
    rows = s.f32(kLastRows, {want, d});
    if (want > 0) ops::rows_gather(x, ids, rows);
  }
  Tensor hn = s.f32(kNormed, {want, d});
  if (want > 0) ops::rms_norm(rows, final_norm, eps, hn);
  trace(hn, "final_norm");
  if (every) {
    ops::matmul(hn, head, logits);
  } else {  // some chunks skip the head: their rows are NaN, the others computed compactly
    Tensor some = s.f32(kSomeLogits, {want, V});  // [want, vocab]
    if (want > 0) ops::matmul(hn, head, some);
    int64_t j = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      float* dst = logits.f32() + int64_t(i) * V;
      if (seqs[i].logits) std::memcpy(dst, some.f32() + j++ * V, size_t(V) * sizeof(float));
      else std::fill(dst, dst + V, std::numeric_limits<float>::quiet_NaN());
    }
  }
  trace(logits, "logits");
}

}  // namespace mmx::layers
