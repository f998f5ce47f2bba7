// One training step's forward and backward over a packed batch (rl/tree.h) with a loss that is a
// function of the scored terms' log-probabilities — the policy-gradient objectives (rl/objective.h)
// are such losses. The three steps of train/graph.h: Graph::forward → logits; log p of every
// ScoredRow (train/loss.h scored_logp) → the loss and dloss/dlogp → dlogits (scored_backward) →
// Graph::backward, which ADDS d loss / dθ to the ParamSet's gradients.
// Not here: which samples or objective (rl/objective.h), the optimizer (train/adamw.h).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "rl/tree.h"
#include "train/graph.h"
#include "train/loss.h"

namespace mmx::rl {

// loss(logp [n terms], dloss_dlogp [n terms] to fill) -> loss value. Terms in Packed::scored order.
using TermLoss = std::function<double(const std::vector<double>& logp, std::vector<double>& dloss_dlogp)>;

// The TrainBatch arrays of a packed batch (kept alive for the graph's backward).
struct PackedBatch {
  explicit PackedBatch(const Packed& p);
  train::TrainBatch batch;  // points into the vectors below and into p
  std::vector<int32_t> targets;  // all -1: the scored terms carry the targets
  std::vector<train::ScoredTerm> terms;
};

// A graph sized for p (its n_seqs × seq_len).
template <class T>
std::unique_ptr<train::Graph<T>> make_packed_graph(const ModelConfig& cfg, train::ParamSet<T>& params, const Packed& p);

// Forward + loss + backward; returns the loss. logp (optional): the terms' log-probabilities.
template <class T>
double packed_forward_backward(train::Graph<T>& g, const Packed& p, const TermLoss& loss,
                               std::vector<double>* logp = nullptr);
// Forward only: the terms' log-probabilities (for old/ref policies and diagnostics).
template <class T>
std::vector<double> packed_logp(train::Graph<T>& g, const Packed& p);

}  // namespace mmx::rl
