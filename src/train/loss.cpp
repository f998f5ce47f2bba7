// The weighted log-likelihood loss step (loss.h), float and double. OpenMP over rows; the total
// is summed in row order after the parallel loop, so it does not depend on the thread count.
#include "train/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
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

namespace {

// The terms of each row as CSR: order[first[r] .. first[r+1]) = the term ids of row r, in term order.
void terms_by_row(int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms, std::vector<int64_t>& first,
                  std::vector<int64_t>& order) {
  first.assign(size_t(n_rows + 1), 0);
  for (int64_t e = 0; e < n_terms; ++e) {
    if (terms[e].row < 0 || terms[e].row >= n_rows)
      fail("loss: scored term {} names row {} of a batch of {} rows", e, terms[e].row, n_rows);
    if (terms[e].target < 0 || terms[e].target >= vocab)
      fail("loss: scored term {} has target {} outside the vocabulary [0, {})", e, terms[e].target, vocab);
    ++first[size_t(terms[e].row + 1)];
  }
  for (int64_t r = 0; r < n_rows; ++r) first[size_t(r + 1)] += first[size_t(r)];
  order.resize(size_t(n_terms));
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t e = 0; e < n_terms; ++e) order[size_t(fill[size_t(terms[e].row)]++)] = e;
}

// e [vocab] = exp(l − max l); returns (max, Σ e) — the softmax of one row, as token_nll does it.
template <class T>
std::pair<T, double> row_softmax(const T* l, int64_t vocab, T* e) {
  T mx = l[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, l[i]);
  for (int64_t i = 0; i < vocab; ++i) e[i] = l[i] - mx;
  vexp(e, vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += double(e[i]);
  return {mx, sum};
}

// Calls f(r, l, e, mx, sum, first, last) for every row r [0, n_rows) (OpenMP over rows): l the
// row's logits, e [vocab] exp(l − max), [first, last) its terms' slots in `order` (empty: no term,
// and then e is not computed).
template <class T, class F>
void for_scored_rows(const T* logits, int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms,
                     std::vector<int64_t>& order, F&& f) {
  std::vector<int64_t> first;
  terms_by_row(n_rows, vocab, terms, n_terms, first, order);
#pragma omp parallel
  {
    std::vector<T> e(static_cast<size_t>(vocab));
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = first[size_t(r)], b = first[size_t(r + 1)];
      const T* l = logits + r * vocab;
      if (a == b) {
        f(r, l, e.data(), T(0), 0.0, a, b);
        continue;
      }
      const auto [mx, sum] = row_softmax(l, vocab, e.data());
      f(r, l, e.data(), mx, sum, a, b);
    }
  }
}

}  // namespace

template <class T>
void scored_logp(const T* logits, int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms,
                 double* logp) {
  std::vector<int64_t> order;
  for_scored_rows(logits, n_rows, vocab, terms, n_terms, order,
                  [&](int64_t, const T* l, const T*, T mx, double sum, int64_t a, int64_t b) {
                    const double lse = double(mx) + std::log(sum);
                    for (int64_t k = a; k < b; ++k) logp[order[size_t(k)]] = double(l[terms[order[size_t(k)]].target]) - lse;
                  });
}

template <class T>
void scored_backward(const T* logits, int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms,
                     const double* g, T* dlogits) {
  std::vector<int64_t> order;
  // Each row's softmax is read into e before its dlogits row (which may alias the logits) is written.
  for_scored_rows(logits, n_rows, vocab, terms, n_terms, order,
                  [&](int64_t r, const T*, const T* e, T, double sum, int64_t a, int64_t b) {
                    T* d = dlogits + r * vocab;
                    if (a == b) {
                      std::fill(d, d + vocab, T(0));
                      return;
                    }
                    double gsum = 0;
                    for (int64_t k = a; k < b; ++k) gsum += g[order[size_t(k)]];
                    const T c = T(-gsum / sum);
                    for (int64_t i = 0; i < vocab; ++i) d[i] = e[i] * c;
                    for (int64_t k = a; k < b; ++k) d[terms[order[size_t(k)]].target] += T(g[order[size_t(k)]]);
                  });
}

template void scored_logp<float>(const float*, int64_t, int64_t, const ScoredTerm*, int64_t, double*);
template void scored_logp<double>(const double*, int64_t, int64_t, const ScoredTerm*, int64_t, double*);
template void scored_backward<float>(const float*, int64_t, int64_t, const ScoredTerm*, int64_t, const double*, float*);
template void scored_backward<double>(const double*, int64_t, int64_t, const ScoredTerm*, int64_t, const double*,
                                      double*);

template double token_nll<float>(const float*, const int32_t*, const double*, int64_t, int64_t, double, float*,
                                 double*);
template double token_nll<double>(const double*, const int32_t*, const double*, int64_t, int64_t, double, double*,
                                  double*);

}  // namespace mmx::train
