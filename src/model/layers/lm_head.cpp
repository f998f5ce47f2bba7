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
             float eps, const ops::Linear& head, Scratch& s, Tensor& logits, Tensor* hidden) {
  const int64_t n = x.dim(0), d = x.dim(1), V = logits.dim(1);
  int64_t want = n;  // rows normed and projected
  if (!all_logits) {
    want = 0;
    for (const SeqChunk& c : seqs) want += c.n_logits;
  }
  const bool dense = all_logits || want == logit_rows(seqs);  // no NaN rows to leave
  Tensor rows;  // [want, d_model]: the rows that need logits
  if (all_logits) {
    rows = x;
  } else if (seqs.size() == 1 && seqs[0].begin + seqs[0].n == n && dense) {
    rows = x.rows_range(n - want, n);  // single sequence: a view, no copy
  } else {
    Tensor ids = s.i32(kLastIds, {want});  // [want] I32: the last n_logits rows of each sequence
    int64_t j = 0;
    for (const SeqChunk& c : seqs)
      for (int64_t r = c.begin + c.n - c.n_logits; r < c.begin + c.n; ++r) ids.ptr<int32_t>()[j++] = int32_t(r);
    rows = s.f32(kLastRows, {want, d});
    if (want > 0) ops::rows_gather(x, ids, rows);
  }
  Tensor hn = s.f32(kNormed, {want, d});
  if (want > 0) ops::rms_norm(rows, final_norm, eps, hn);
  trace(hn, "final_norm");
  if (dense) {
    ops::matmul(hn, head, logits);
    if (hidden && want > 0) std::memcpy(hidden->f32(), hn.f32(), size_t(want * d) * sizeof(float));
  } else {  // some chunks skip the head: their one row is NaN, the others computed compactly
    Tensor some = s.f32(kSomeLogits, {want, V});  // [want, vocab]
    if (want > 0) ops::matmul(hn, head, some);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    int64_t src = 0, dst = 0;
    for (const SeqChunk& c : seqs) {
      if (c.n_logits == 0) {
        std::fill(logits.f32() + dst * V, logits.f32() + (dst + 1) * V, nan);
        if (hidden) std::fill(hidden->f32() + dst * d, hidden->f32() + (dst + 1) * d, nan);
        ++dst;
        continue;
      }
      std::memcpy(logits.f32() + dst * V, some.f32() + src * V, size_t(c.n_logits * V) * sizeof(float));
      if (hidden) std::memcpy(hidden->f32() + dst * d, hn.f32() + src * d, size_t(c.n_logits * d) * sizeof(float));
      src += c.n_logits;
      dst += c.n_logits;
    }
  }
  trace(logits, "logits");
}

}  // namespace mmx::layers
