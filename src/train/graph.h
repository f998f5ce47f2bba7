// The training graph of a model family: forward with saved activations, then backward into the
// ParamSet's gradients. One implementation per family (graph_m2.cpp, ...), the same math as the
// inference forward (model/families/*) — tests/train/graph_test.cpp checks the logits agree.
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
  // [n_seqs, seq_len, seq_len]: vis[s][i][j] = 1 when token i of sequence s sees token j (a tree
  // mask of merged rollouts); every token must see itself. null = causal.
  const uint8_t* visibility = nullptr;
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
  // Forward + backward: returns Σ CE over the scored targets (nats) and ADDS grad_scale · dΣCE/dθ
  // to params.grad (pass 1 / (scored targets of the whole optimizer batch): the global token
  // normaliser, so micro-batch splits leave the gradient unchanged).
  virtual double forward_backward(const TrainBatch& b, double grad_scale) = 0;
  // Forward only: Σ CE over the scored targets; logits (optional): [n_seqs * seq_len, vocab].
  virtual double forward(const TrainBatch& b, T* logits) = 0;
  // The MSA indexer KL of the last forward (M3): Σ over the sparse layers of the mean over index
  // heads and counted rows of KL(teacher ‖ student); forward_backward adds index_loss_weight ·
  // d kl/dθ (its own normaliser: the batch's rows, not grad_scale). 0 for other families.
  virtual double index_kl() const { return 0; }
  // Tokens routed to each expert by the forwards since the last call, per MoE layer, then reset:
  // [n_layers][n_experts]. The aux-loss-free bias update reads it.
  virtual std::vector<std::vector<int64_t>> take_expert_loads() = 0;
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

// Checks the shape against the graph's capacity, token and target ids in range, and that every
// token sees itself (any other visibility pattern is allowed). Throws mmx::Error.
void check_batch(const ModelConfig& cfg, const TrainBatch& b, int64_t max_seqs, int64_t seq_len);

}  // namespace mmx::train
