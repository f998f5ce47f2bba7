// The loss step of training: between Graph::forward (logits) and Graph::backward (dlogits).
// One loss today, written as the per-token weighted log-likelihood
//   loss = −Σ_t w_t · log p(target_t)      over the rows with target_t >= 0,
// with w_t = 1 the cross-entropy the trainer uses; a policy-gradient loss (CISPO, ...) is the same
// call with its per-token weights (TrainBatch::loss_weights). Not here: the MSA indexer KL of
// MiniMax-M3 (an auxiliary loss inside the graph: Graph::index_kl, TrainBatch::index_loss_weight).
#pragma once

#include <cstdint>

namespace mmx::train {

// logits: [n, vocab]; targets: [n] (-1 = not scored); weights: [n] w_t or null (= 1, cross-entropy).
// Returns Σ_t w_t · (−log softmax(logits[t])[target_t]) over the scored rows (accumulated in
// double, rows in order). dlogits (optional, [n, vocab]) is WRITTEN (not accumulated):
// grad_scale · w_t · (softmax − onehot) for scored rows, 0 for the others; it may be `logits`
// itself (each row is read before it is written). logp (optional, [n]): log p(target_t), 0 where
// not scored — the per-token log-probabilities an RL loss is a function of.
template <class T>
double token_nll(const T* logits, const int32_t* targets, const double* weights, int64_t n, int64_t vocab,
                 double grad_scale, T* dlogits, double* logp = nullptr);

// ---- scored terms: a loss over log-probabilities of (row, target) pairs ----
// A packed prefix tree (rl/tree.h) scores one row for several owners, possibly with different
// targets (a branch point) and weights: a loss L(logp) over terms e = (row_e, target_e),
//   logp_e = log softmax(logits[row_e])[target_e],
//   dL/dlogits[r][v] = Σ_{e: row_e = r} g_e · (δ(v, target_e) − softmax(logits[r])[v]),  g_e = dL/dlogp_e.
struct ScoredTerm {
  int64_t row = 0;
  int32_t target = 0;
};
// logp [n_terms] = the terms' log-probabilities. Throws mmx::Error on a row or target out of range.
template <class T>
void scored_logp(const T* logits, int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms,
                 double* logp);
// dlogits [n_rows, vocab] WRITTEN (0 for rows without a term; may alias logits) from g [n_terms].
// Each row's terms are summed in term order, so the result does not depend on the thread count.
template <class T>
void scored_backward(const T* logits, int64_t n_rows, int64_t vocab, const ScoredTerm* terms, int64_t n_terms,
                     const double* g, T* dlogits);

// Softmax cross-entropy: token_nll with every w_t = 1.
template <class T>
double cross_entropy(const T* logits, const int32_t* targets, int64_t n, int64_t vocab, double grad_scale,
                     T* dlogits) {
  return token_nll<T>(logits, targets, nullptr, n, vocab, grad_scale, dlogits);
}

}  // namespace mmx::train
