// What the families' training graphs share (private to src/train): the batch checks, positions,
// token embedding, the pre-/post-norm decoder-layer skeleton with its residuals and saved block
// activations, the final norm, lm_head, and the per-layer expert loads. A family (graph_moe.cpp,
// graph_m3.cpp) supplies only its layers: the attention and FFN branches, forward and backward.
//
// Per layer (spec §3.3; pre-norm families: α = β = 1, postnorm = false):
//   h1 = RMSNorm_in(x);   x = α·(postnorm ? h1 : x) + β·attention(h1)
//   h2 = RMSNorm_post(x); x = α·(postnorm ? h2 : x) + β·ffn(h2)    (the branch may add several terms)
//   logits = lm_head(RMSNorm_final(x))
// Backward runs the same list in reverse; a branch reads its output gradient from dbr_ and ADDS
// the gradient of its input (h1 / h2) into dh_.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/schema.h"
#include "train/graph.h"
#include "train/params.h"
#include "train/visibility.h"

namespace mmx::train {

template <class T>
class GraphBase : public Graph<T> {
 public:
  const T* forward(const TrainBatch& b, std::vector<double>* target_logp) final;
  T* dlogits_buffer() final { return logits_.data(); }
  void backward(const T* dlogits) final;
  std::vector<std::vector<int64_t>> take_expert_loads() final;
  int64_t vocab() const final { return c_.vocab_size; }

 protected:
  template <class U>
  using Vec = std::vector<U>;
  // The saved activations of the layer skeleton; n rows: [n,d] [n,d] [n] [n,d] [n,d] [n].
  struct BlockActs {
    Vec<T> x_in, h1, r1, x_mid, h2, r2;
  };

  // eps: the RMSNorm epsilon of the skeleton's norms; postnorm: the residual carries the normed value.
  GraphBase(const ModelConfig& c, ParamSet<T>& P, int64_t max_seqs, int64_t seq_len, double eps, bool postnorm);

  // ---- the family's layers ----
  // After the batch checks and positions, before the embedding.
  virtual void begin_forward() {}
  // blocks_[il].h1 -> the attention branch's output out [n, d].
  virtual void attention_forward(int il, T* out) = 0;
  // blocks_[il].h2 -> x_ through residual(h2, branch, scale) (once per term of the branch).
  virtual void ffn_forward(int il) = 0;
  // dbr_ = d(branch output) -> adds d(h1) / d(h2) into dh_ and the weight gradients.
  virtual void attention_backward(int il) = 0;
  virtual void ffn_backward(int il) = 0;
  virtual ResidualScale attention_scale(int il) const = 0;
  virtual ResidualScale ffn_scale(int il) const = 0;
  // The effective RMSNorm gain of the checkpoint gain `name` for this forward (default: as
  // stored), and the same in the backward.
  virtual const T* gain(const std::string& name) { return P_.p(name); }
  virtual const T* gain_saved(const std::string& name) { return P_.p(name); }

  // ---- helpers for the layers ----
  // The checkpoint name of the tensor of `role` (of layer il, expert e): model/schema.h.
  std::string nm(TensorRole role, int il = -1, int e = -1) const { return tensor_name(c_, role, il, e); }
  int64_t rows() const { return b_.n_seqs * b_.seq_len; }
  // The current batch's sizes (the shape comments' letters) and the attention scale 1/√hd.
  struct Dims {
    int64_t S, t, n, d, qd, kvd;
    int H, KH, hd;
    double scale;
  };
  Dims dims() const {
    return {b_.n_seqs, b_.seq_len,    rows(),       c_.d_model,  c_.q_dim(), c_.kv_dim(),
            c_.n_heads, c_.n_kv_heads, c_.head_dim, 1.0 / std::sqrt(double(c_.head_dim))};
  }
  // Sequence s's visibility in the current batch.
  SeqVis vis_of(int64_t s) const;
  bool has_mask() const { return b_.visibility != nullptr || b_.parents != nullptr; }
  // x_ = α·(postnorm ? h : x_) + β·branch over nd elements.
  void residual(const T* h, const T* branch, ResidualScale r, int64_t nd);

  const ModelConfig& c_;
  ParamSet<T>& P_;
  int64_t max_seqs_, seq_len_;
  double eps_;
  bool postnorm_;
  TrainBatch b_;                                      // the last forward's batch (backward reads it)
  std::vector<BlockActs> blocks_;                     // [n_layers]
  Vec<T> x_, hf_, rf_, logits_;                       // residual stream [n,d]; final norm [n,d] [n]; [n,V]
  Vec<T> dx_, dh_, dbr_;                              // [n,d]: d(x), d(normed input), d(branch output)
  Vec<int32_t> pos_;                                  // [n] RoPE positions
  Vec<int32_t> runs_;                                 // [n] tree batches: visibility.h tree_runs
  std::vector<std::vector<int64_t>> loads_;           // [n_layers][E]

 private:
  // Splits d(out) (in dx_) of out = α·(postnorm ? h : x) + β·branch: dbr_ = β·dx_, dh_ =
  // postnorm ? α·dx_ : 0 (the branch then adds its part), dx_ keeps α·dx_ (pre-norm identity
  // path) or 0 (postnorm: x reaches out only through h).
  void residual_backward(ResidualScale r, int64_t nd);
};

}  // namespace mmx::train
