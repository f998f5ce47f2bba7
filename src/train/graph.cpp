// What every family's training graph shares at the interface: the batch checks, the dispatch to
// the family, and the three-step conveniences (forward_backward, forward_loss).
#include <cstring>

#include "base/error.h"
#include "train/families.h"
#include "train/graph.h"
#include "train/loss.h"
#include "train/visibility.h"

namespace mmx::train {

void check_batch(const ModelConfig& c, const TrainBatch& b, int64_t max_seqs, int64_t seq_len) {
  if (b.n_seqs < 1 || b.n_seqs > max_seqs || b.seq_len != seq_len)
    fail("training batch: {} x {} tokens does not fit the graph's {} x {}", b.n_seqs, b.seq_len, max_seqs, seq_len);
  const int64_t n = b.n_seqs * b.seq_len;
  for (int64_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= c.vocab_size)
      fail("training batch: token id {} at row {} is outside the vocabulary [0, {})", b.tokens[i], i, c.vocab_size);
    if (b.targets[i] < -1 || b.targets[i] >= c.vocab_size)
      fail("training batch: target id {} at row {} is outside [-1, {})", b.targets[i], i, c.vocab_size);
    if (b.positions && b.positions[i] < 0) fail("training batch: negative position at row {}", i);
  }
  if (b.visibility && b.parents) fail("training batch: give the dense visibility mask or the tree parents, not both");
  if (b.parents) check_tree(b.parents, b.n_seqs, b.seq_len);
  if (b.visibility)
    for (int64_t s = 0; s < b.n_seqs; ++s)
      for (int64_t i = 0; i < b.seq_len; ++i)
        if (!b.visibility[(s * b.seq_len + i) * b.seq_len + i])
          fail("training batch: token {} of sequence {} does not see itself in the visibility mask", i, s);
}

template <class T>
double Graph<T>::forward_backward(const TrainBatch& b, double grad_scale) {
  const T* logits = forward(b);
  T* dlogits = dlogits_buffer();  // the logits, overwritten by their gradient
  const double loss =
      token_nll<T>(logits, b.targets, b.loss_weights, b.n_seqs * b.seq_len, vocab(), grad_scale, dlogits);
  backward(dlogits);
  return loss;
}

template <class T>
double Graph<T>::forward_loss(const TrainBatch& b, T* logits) {
  const T* l = forward(b);
  const int64_t n = b.n_seqs * b.seq_len;
  const double loss = token_nll<T>(l, b.targets, b.loss_weights, n, vocab(), 0.0, nullptr);
  if (logits) std::memcpy(logits, l, sizeof(T) * size_t(n * vocab()));
  return loss;
}

template class Graph<float>;
template class Graph<double>;

template <class T>
std::unique_ptr<Graph<T>> make_graph(const ModelConfig& cfg, ParamSet<T>& params, int64_t max_seqs, int64_t seq_len,
                                     const GraphOptions& opt) {
  if (max_seqs < 1 || seq_len < 1) fail("training: batch and sequence length must be >= 1");
  param_layout(cfg);  // refuses unsupported families / options
  switch (cfg.family) {
    case Family::kMiniMaxM2:
    case Family::kMiniMaxText01: return make_graph_moe<T>(cfg, params, max_seqs, seq_len, opt);
    case Family::kMiniMaxM3: return make_graph_m3<T>(cfg, params, max_seqs, seq_len);
    default: break;
  }
  fail("training: the {} family has no training graph yet", cfg.architecture);
}

template std::unique_ptr<Graph<float>> make_graph<float>(const ModelConfig&, ParamSet<float>&, int64_t, int64_t,
                                                         const GraphOptions&);
template std::unique_ptr<Graph<double>> make_graph<double>(const ModelConfig&, ParamSet<double>&, int64_t, int64_t,
                                                           const GraphOptions&);

}  // namespace mmx::train
