// Reference causal GQA softmax attention: the fp64 oracle's attention (f64.h; every score, the
// softmax and the weighted sum of V in double, straight from the definition) on F32 tensors.
// Not here: blocking, threads, or any trick (no online softmax).
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"
#include "ops/ref/f64.h"
#include "ops/ref/widen.h"

namespace mmx::ops::ref {

// q, out: [n_q, n_heads, head_dim]; k, v: [n_kv, n_kv_heads, head_dim]; keys 0..pos0+i visible.
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out) {
  check::attention_softmax(q, k, v, pos0, out);
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2), n_kv_heads = k.dim(1);
  const int64_t n_k = pos0 + n_q, kv = n_k * n_kv_heads * d;
  std::vector<double> o(static_cast<size_t>(n_q * n_heads * d));
  f64::attention(widen(q.f32(), n_q * n_heads * d).data(), widen(k.f32(), kv).data(), widen(v.f32(), kv).data(),
                 nullptr, n_q, n_k, int(n_heads), int(n_kv_heads), int(d), double(scale), o.data(), nullptr);
  narrow(o, out.f32());
}

}  // namespace mmx::ops::ref
