// The weighted log-likelihood loss step (loss.h), float and double. OpenMP over rows; the total
// is summed in row order after the parallel loop, so it does not depend on the thread count.
#include "train/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "train/kernels.h"

namespace mmx::train {

template <class T>
double token_nll(const T* logits, const int32_t* targets, const double* weights, int64_t n, int64_t vocab,
                 double grad_scale, T* dlogits, double* logp) {
  std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
#pragma omp parallel
  {
    std::vector<T> tmp(dlogits ? 0 : static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      const T* l = logits + t * vocab;
      T* e = dlogits ? dlogits + t * vocab : tmp.data();  // may alias l: read l[target] first
      if (targets[t] < 0) {
        if (dlogits) std::fill(e, e + vocab, T(0));
        if (logp) logp[t] = 0;
        continue;
      }
      const T lt = l[targets[t]];
      T mx = l[0];
      for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, l[i]);
      for (int64_t i = 0; i < vocab; ++i) e[i] = l[i] - mx;
      vexp(e, vocab);
      double sum = 0;
      for (int64_t i = 0; i < vocab; ++i) sum += double(e[i]);
      const double nll = double(mx) + std::log(sum) - double(lt);  // −log p(target)
      if (logp) logp[t] = -nll;
      row_loss[size_t(t)] = weights ? weights[t] * nll : nll;
      if (dlogits) {
        const double gs = weights ? grad_scale * weights[t] : grad_scale;
        const T k = T(gs / sum);
        for (int64_t i = 0; i < vocab; ++i) e[i] *= k;
        e[targets[t]] -= T(gs);
      }
    }
  }
  double total = 0;
  for (double x : row_loss) total += x;
  return total;
}

template double token_nll<float>(const float*, const int32_t*, const double*, int64_t, int64_t, double, float*,
                                 double*);
template double token_nll<double>(const double*, const int32_t*, const double*, int64_t, int64_t, double, double*,
                                  double*);

}  // namespace mmx::train
