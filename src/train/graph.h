// The training graph of a model family, in three steps:
//   1. forward(batch)    -> logits [n, vocab] (and, on request, log p(target) per token), with the
//                           activations the backward needs saved;
//   2. the loss step     -> the loss and dlogits (train/loss.h: the per-token weighted
//                           log-likelihood; cross-entropy = weight 1);
//   3. backward(dlogits) -> ADDS dloss/dθ to the ParamSet's gradients.
// One implementation per family (graph_moe.cpp: M2 and Text-01 / M1; graph_m3.cpp: M3) on a
// shared base (graph_base.h: embedding, decoder-layer skeleton, final norm, lm_head, expert
// loads), the same math as the inference forward (model/families/*) —
// tests/train/graph_test.cpp checks the logits agree.
//
// All activation buffers are sized once at construction for (max_seqs × seq_len) rows; a step
// allocates nothing but per-call scratch inside kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "train/params.h"

namespace mmx::train {

// One micro-batch of n_seqs sequences of seq_len tokens each.
struct TrainBatch {
  int64_t n_seqs = 0;
  int64_t seq_len = 0;
  const int32_t* tokens = nullptr;     // [n_seqs, seq_len] input ids
  const int32_t* targets = nullptr;    // [n_seqs, seq_len] next ids; -1 = not scored
  const int32_t* positions = nullptr;  // [n_seqs, seq_len] RoPE positions; null = 0..seq_len-1
  // Who sees whom within each sequence (train/visibility.h), at most one of the two; neither =
  // causal. visibility: the dense form [n_seqs, seq_len, seq_len], vis[s][i][j] = 1 when token i of
  // sequence s sees token j; every token must see itself (tests, hand-made masks).
  const uint8_t* visibility = nullptr;
  // The scalable form [n_seqs, seq_len]: prefix-tree parent links, parents[i] ∈ [-1, i); token i
  // sees j iff j is i or an ancestor of i (merged rollouts). Bitwise the same results as the
  // equivalent dense mask (tree_to_dense).
  const int32_t* parents = nullptr;
  // [n_seqs, seq_len] per-token weights w_t of the loss step (train/loss.h); null = 1 (CE).
  const double* loss_weights = nullptr;
  // MiniMax-M3 only: loss = Σ CE · grad_scale + index_loss_weight · kl, kl = the MSA indexer KL
  // (Graph::index_kl; reference/torch_models.py). 0 = CE only (the indexer gets no gradient).
  double index_loss_weight = 0;
  // [n_seqs, seq_len] rows the indexer KL averages over (torch: rows holding a real input token,
  // not the -1 padding); null = every row.
  const uint8_t* index_rows = nullptr;
};

template <class T>
class Graph {
 public:
  virtual ~Graph() = default;

  // Step 1: runs the model over b and saves what backward needs. Returns the logits
  // [n_seqs * seq_len, vocab] in the graph's own buffer (valid until the next forward; the loss
  // step may overwrite it with dlogits, see dlogits_buffer). target_logp (optional): resized to
  // n_seqs * seq_len and filled with log p(targets[t]) (0 where not scored). b's arrays must stay
  // alive until the matching backward.
  virtual const T* forward(const TrainBatch& b, std::vector<double>* target_logp = nullptr) = 0;
  // The logits buffer, writable: the loss step writes dlogits over the logits in place (no second
  // [n, vocab] array), then backward(dlogits_buffer()).
  virtual T* dlogits_buffer() = 0;
  // Step 3: given dlogits [n_seqs * seq_len, vocab] = dloss/dlogits of the last forward, ADDS
  // dloss/dθ to params.grad, plus (M3) index_loss_weight · d index_kl/dθ of that forward's batch.
  virtual void backward(const T* dlogits) = 0;

  // The MSA indexer KL of the last forward (M3): Σ over the sparse layers of the mean over index
  // heads and counted rows of KL(teacher ‖ student); backward adds index_loss_weight ·
  // d kl/dθ (its own normaliser: the batch's rows, not the loss's grad_scale). 0 for other families.
  virtual double index_kl() const { return 0; }
  // Tokens routed to each expert by the forwards since the last call, per MoE layer, then reset:
  // [n_layers][n_experts]. The aux-loss-free bias update reads it.
  virtual std::vector<std::vector<int64_t>> take_expert_loads() = 0;
  virtual int64_t vocab() const = 0;

  // The three steps with the weighted log-likelihood loss (b.loss_weights; null = cross-entropy):
  // returns Σ_t w_t · (−log p(target_t)) (nats) and ADDS grad_scale · dΣ/dθ to params.grad (pass
  // 1 / (scored targets of the whole optimizer batch): the global token normaliser, so micro-batch
  // splits leave the gradient unchanged).
  double forward_backward(const TrainBatch& b, double grad_scale);
  // Forward and the loss only: Σ_t w_t · (−log p(target_t)); logits (optional): a copy
  // [n_seqs * seq_len, vocab].
  double forward_loss(const TrainBatch& b, T* logits = nullptr);
};

// Choices that change memory, never the result (gradients are bitwise the same either way).
struct GraphOptions {
  // Activation recomputation of the softmax attention probabilities ([n_seqs, n_heads, t, t] per
  // layer): saved for the backward (0), recomputed there from q, k (1), or -1: recomputed when
  // saving them would take more than kRecomputeAboveBytes over all layers. M2 and Text-01 / M1;
  // M3 keeps them (its indexer KL reads them as the teacher).
  int recompute_attention = -1;
};
constexpr int64_t kRecomputeAboveBytes = int64_t(1) << 30;

// Throws mmx::Error for a family the trainer does not support, or an invalid batch shape.
template <class T>
std::unique_ptr<Graph<T>> make_graph(const ModelConfig& cfg, ParamSet<T>& params, int64_t max_seqs, int64_t seq_len,
                                     const GraphOptions& opt = {});

// Checks the shape against the graph's capacity, token and target ids in range, at most one
// visibility form, that every token sees itself (dense: any other pattern is allowed) and that
// tree parents precede their children. Throws mmx::Error.
void check_batch(const ModelConfig& cfg, const TrainBatch& b, int64_t max_seqs, int64_t seq_len);

}  // namespace mmx::train
