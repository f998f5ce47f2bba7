// The packed forward/backward of packed_step.h.
#include "rl/packed_step.h"

#include "base/error.h"
#include "train/loss.h"

namespace mmx::rl {

PackedBatch::PackedBatch(const Packed& p) : targets(p.tokens.size(), -1) {
  for (const ScoredRow& s : p.scored) terms.push_back({s.row, s.target});
  batch.n_seqs = p.n_seqs;
  batch.seq_len = p.seq_len;
  batch.tokens = p.tokens.data();
  batch.targets = targets.data();
  batch.positions = p.positions.data();
  batch.parents = p.parents.empty() ? nullptr : p.parents.data();
}

template <class T>
std::unique_ptr<train::Graph<T>> make_packed_graph(const ModelConfig& cfg, train::ParamSet<T>& params,
                                                   const Packed& p) {
  return train::make_graph<T>(cfg, params, p.n_seqs, p.seq_len);
}

template <class T>
std::vector<double> packed_logp(train::Graph<T>& g, const Packed& p) {
  const PackedBatch pb(p);
  const T* logits = g.forward(pb.batch);
  std::vector<double> logp(pb.terms.size());
  train::scored_logp<T>(logits, p.n_seqs * p.seq_len, g.vocab(), pb.terms.data(), int64_t(pb.terms.size()),
                        logp.data());
  return logp;
}

template <class T>
double packed_forward_backward(train::Graph<T>& g, const Packed& p, const TermLoss& loss, std::vector<double>* logp_out) {
  const PackedBatch pb(p);
  const int64_t rows = p.n_seqs * p.seq_len, n = int64_t(pb.terms.size());
  const T* logits = g.forward(pb.batch);
  std::vector<double> logp(static_cast<size_t>(n)), dlogp(static_cast<size_t>(n), 0.0);
  train::scored_logp<T>(logits, rows, g.vocab(), pb.terms.data(), n, logp.data());
  const double value = loss(logp, dlogp);
  if (dlogp.size() != size_t(n)) fail("rl: the loss returned {} gradients for {} scored terms", dlogp.size(), n);
  train::scored_backward<T>(logits, rows, g.vocab(), pb.terms.data(), n, dlogp.data(), g.dlogits_buffer());
  g.backward(g.dlogits_buffer());
  if (logp_out) *logp_out = std::move(logp);
  return value;
}

#define MMX_RL_STEP(T)                                                                                        \
  template std::unique_ptr<train::Graph<T>> make_packed_graph<T>(const ModelConfig&, train::ParamSet<T>&,     \
                                                                 const Packed&);                              \
  template std::vector<double> packed_logp<T>(train::Graph<T>&, const Packed&);                               \
  template double packed_forward_backward<T>(train::Graph<T>&, const Packed&, const TermLoss&, std::vector<double>*);
MMX_RL_STEP(float)
MMX_RL_STEP(double)

}  // namespace mmx::rl
