// Training graph of the MoE decoder families (inference twins: model/families/minimax_m2.cpp and
// minimax_text01.cpp): MiniMax-M2 (spec §4.4) and MiniMax-Text-01 / M1 (spec §3). Per layer:
//   h1 = RMSNorm_in(x)
//   a  = softmax layer: q,k,v = h1·Wq,k,vᵀ; [M2: QK-norm over the whole projection]; partial
//        NeoX RoPE; Wo · attention(q, k, v; visibility)
//        lightning layer (Text-01): qkv = SiLU(h1·Wqkvᵀ); o = lightning(q, k, v; slopes);
//        Wout · (RMSNorm_all_heads(o) ⊙ σ(h1·Wgateᵀ))
//   x  = α·(postnorm ? h1 : x) + β·a          (M2: α = β = 1, pre-norm)
//   h2 = RMSNorm_post(x);  x = α·(postnorm ? h2 : x) + β·Σ_top-k w_e·expert_e(h2)
//        (router: M2 sigmoid + selection-only bias; Text-01 softmax over all experts)
//   logits = lm_head(RMSNorm_final(x));  loss = Σ CE(logits, targets)
// Architecture differences come from ModelConfig (layer_kinds, postnorm, res_*, router,
// use_qk_norm), resolved at load; backward runs the same list in reverse, one kernel a step.
// The embedding, the norms and residuals of the layer skeleton, lm_head and the loads are
// graph_base.h's; this file has the attention and MoE branches.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/layers/attention_lightning.h"
#include "train/families.h"
#include "train/graph_base.h"
#include "train/kernels.h"
#include "train/kernels_lightning.h"
#include "train/moe_block.h"

namespace mmx::train {

namespace {

template <class T>
using Vec = std::vector<T>;

// Saved activations of one layer's branches (the skeleton's x_in, h1, ... are GraphBase's);
// n = rows, E experts, k active.
template <class T>
struct LayerActs {
  Vec<T> q_raw, k_raw, rq, rk;    // [n,qd] [n,kvd] [n] [n]: projections before QK-norm
  Vec<T> q, k, v;                 // [n,qd] [n,kvd] [n,kvd]: after QK-norm + RoPE
  Vec<T> p;                       // [n_seqs, n_heads, t, t] attention probabilities (causal batches)
  Vec<T> lse;                     // [n_seqs, n_heads, t] row log-sum-exp (masked batches: attention_iv)
  Vec<T> att;                     // [n, qd] attention heads output
  // lightning layers (Text-01) instead of q..att:
  Vec<T> qkv_raw, qkv;            // [n, 3qd] the fused projection before / after SiLU
  Vec<T> la;                      // [n_seqs, n_heads, t, t] decayed scores (one-block form; masked batches)
  Vec<T> ls;                      // [n_seqs, n_heads, n_blocks, hd, hd] block states (blockwise form)
  Vec<T> lo, lr, ln, lg, lag;     // [n,qd] output, [n] inner-norm rstd, [n,qd] normed, gate logits, gated
};

template <class T>
class MoeGraph final : public GraphBase<T> {
  using Base = GraphBase<T>;
  using Base::b_, Base::blocks_, Base::c_, Base::dbr_, Base::dh_, Base::loads_, Base::nm, Base::max_seqs_,
      Base::P_, Base::pos_, Base::seq_len_, Base::vis_of;

 public:
  MoeGraph(const ModelConfig& c, ParamSet<T>& P, int64_t max_seqs, int64_t seq_len, const GraphOptions& opt)
      : Base(c, P, max_seqs, seq_len, c.norm_eps, c.postnorm) {
    const int64_t n = max_seqs * seq_len, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
    int64_t softmax_layers = 0;
    for (int il = 0; il < c.n_layers; ++il) softmax_layers += !lightning(il);
    const int64_t p_bytes = softmax_layers * max_seqs * c.n_heads * seq_len * seq_len * int64_t(sizeof(T));
    recompute_ = opt.recompute_attention == 1 || (opt.recompute_attention < 0 && p_bytes > kRecomputeAboveBytes);
    const int64_t f = c.ffn_dim;
    acts_.resize(size_t(c.n_layers));
    for (int il = 0; il < c.n_layers; ++il) {
      LayerActs<T>& L = acts_[size_t(il)];
      if (lightning(il)) {
        for (Vec<T>* v : {&L.qkv_raw, &L.qkv}) v->resize(size_t(n * 3 * qd));
        for (Vec<T>* v : {&L.lo, &L.ln, &L.lg, &L.lag}) v->resize(size_t(n * qd));
        L.lr.resize(size_t(n));
        // la is sized by the first masked batch: causal batches never need the [t, t] scores.
        L.ls.resize(size_t(max_seqs * c.n_heads * lightning_n_blocks(seq_len, lblock_) * c.head_dim * c.head_dim));
        slopes_.emplace_back();
        for (int h = 0; h < c.n_heads; ++h) slopes_.back().push_back(layers::lightning_slope(c.n_heads, h, il, c.n_layers));
      } else {
        for (Vec<T>* v : {&L.rq, &L.rk}) v->resize(size_t(n));
        for (Vec<T>* v : {&L.q_raw, &L.q, &L.att}) v->resize(size_t(n * qd));
        for (Vec<T>* v : {&L.k_raw, &L.k, &L.v}) v->resize(size_t(n * kvd));
        if (!recompute_) L.p.resize(size_t(max_seqs * c.n_heads * seq_len * seq_len));
        slopes_.emplace_back();
      }
    }
    const MoeSpec ms{c.n_experts, c.n_experts_active, d, f, c.router, c.use_routing_bias,
                     double(c.routed_scaling_factor), c.ffn_act, c.swiglu_alpha, c.swiglu_limit};
    for (int il = 0; il < c.n_layers; ++il) moe_.emplace_back(ms, n);
    moe_scratch_.reserve(ms, n);
    dq_.resize(size_t(n * 3 * qd));  // also the lightning dqkv
    dk_.resize(size_t(n * kvd));
    dv_.resize(size_t(n * kvd));
    dq_raw_.resize(size_t(n * 3 * qd));
    dk_raw_.resize(size_t(n * kvd));
    datt_.resize(size_t(n * qd));
    for (Vec<T>* v : {&dg2_, &dl3_, &dl4_}) v->resize(size_t(n * qd));
  }

 private:
  bool lightning(int il) const { return c_.layer_kinds[size_t(il)] == LayerKind::kLightning; }
  ResidualScale attention_scale(int il) const override { return lightning(il) ? c_.res_lightning : c_.res_softmax; }
  ResidualScale ffn_scale(int) const override { return c_.res_mlp; }

  // Lightning blockwise through the state (O(t)) unless a mask or jumping positions need the
  // one-block form; the backward uses what the forward chose.
  void begin_forward() override {
    const int64_t t = b_.seq_len, n = this->rows();
    blockwise_ = !this->has_mask();
    for (int64_t i = 0; i < n && blockwise_; ++i) blockwise_ = i % t == 0 || pos_[size_t(i)] == pos_[size_t(i - 1)] + 1;
  }

  void attention_forward(int il, T* out) override {
    if (lightning(il)) lightning_forward(il, out);
    else softmax_forward(il, out);
  }
  void attention_backward(int il) override {
    if (lightning(il)) lightning_backward(il);
    else softmax_backward(il);
  }

  void ffn_forward(int il) override {
    const T* h2 = blocks_[size_t(il)].h2.data();
    moe_[size_t(il)].forward(P_, moe_tensors(c_, il), h2, this->rows(), dh_.data(), loads_[size_t(il)].data());
    this->residual(h2, dh_.data(), c_.res_mlp, this->rows() * c_.d_model);
  }
  void ffn_backward(int il) override {
    moe_[size_t(il)].backward(P_, moe_tensors(c_, il), blocks_[size_t(il)].h2.data(), dbr_.data(),
                              this->rows(), dh_.data(), moe_scratch_);
  }

  // Softmax GQA attention of layer il over h1: writes the branch output out [n, d].
  void softmax_forward(int il, T* out) {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kQ, il)), n, d, qd, L.q_raw.data());
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kK, il)), n, d, kvd, L.k_raw.data());
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kV, il)), n, d, kvd, L.v.data());
    if (c_.use_qk_norm) {
      rms_norm_fwd<T>(L.q_raw.data(), P_.p(nm(TensorRole::kQNorm, il)), n, qd, c_.norm_eps, L.q.data(), L.rq.data());
      rms_norm_fwd<T>(L.k_raw.data(), P_.p(nm(TensorRole::kKNorm, il)), n, kvd, c_.norm_eps, L.k.data(), L.rk.data());
    } else {
      L.q = L.q_raw;
      L.k = L.k_raw;
    }
    rope<T>(L.q.data(), pos_.data(), n, H, hd, c_.rotary_dim, c_.rope_theta, false);
    rope<T>(L.k.data(), pos_.data(), n, KH, hd, c_.rotary_dim, c_.rope_theta, false);
    if (this->has_mask() && L.lse.size() < size_t(n * H)) L.lse.resize(size_t(max_seqs_ * seq_len_ * H));
    for (int64_t s = 0; s < S; ++s) {
      const T *q = L.q.data() + s * t * qd, *k = L.k.data() + s * t * kvd, *v = L.v.data() + s * t * kvd;
      if (this->has_mask())  // over the visible intervals only: nothing [t, t] (kernels.h)
        attention_iv_fwd<T>(q, k, v, vis_of(s), t, H, KH, hd, scale, L.att.data() + s * t * qd, L.lse.data() + s * H * t);
      else
        attention_fwd<T>(q, k, v, SeqVis(), t, H, KH, hd, scale, L.att.data() + s * t * qd,
                         recompute_ ? nullptr : L.p.data() + s * H * t * t);
    }
    linear_fwd<T>(L.att.data(), P_.p(nm(TensorRole::kO, il)), n, qd, d, out);
  }

  // Lightning attention of layer il over h1 (spec §3.5): writes the branch output out [n, d].
  void lightning_forward(int il, T* out) {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kLinQkv, il)), n, d, 3 * qd, L.qkv_raw.data());
    silu_fwd<T>(L.qkv_raw.data(), n * 3 * qd, L.qkv.data());
    const int64_t hs = H * lightning_n_blocks(t, lblock_) * hd * hd;  // one sequence's states
    if (!blockwise_ && L.la.size() < size_t(max_seqs_ * H * seq_len_ * seq_len_))
      L.la.resize(size_t(max_seqs_ * H * seq_len_ * seq_len_));
    for (int64_t s = 0; s < S; ++s) {
      const T* qkv = L.qkv.data() + s * t * 3 * qd;
      if (blockwise_)
        lightning_block_fwd<T>(qkv, slopes_[size_t(il)].data(), t, H, hd, lblock_, L.lo.data() + s * t * qd,
                               L.ls.data() + s * hs);
      else
        lightning_fwd<T>(qkv, slopes_[size_t(il)].data(), pos_.data() + s * t, vis_of(s), t, H, hd,
                         L.lo.data() + s * t * qd, L.la.data() + s * H * t * t);
    }
    rms_norm_fwd<T>(L.lo.data(), P_.p(nm(TensorRole::kLinNorm, il)), n, qd, c_.lightning_norm_eps, L.ln.data(), L.lr.data());
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kLinGate, il)), n, d, qd, L.lg.data());
    mul_sigmoid_fwd<T>(L.ln.data(), L.lg.data(), n * qd, L.lag.data());
    linear_fwd<T>(L.lag.data(), P_.p(nm(TensorRole::kLinOut, il)), n, qd, d, out);
  }

  // d(branch) in dbr_ -> adds d(h1) into dh_ and the layer's weight gradients.
  void softmax_backward(int il) {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    std::fill(datt_.begin(), datt_.begin() + n * qd, T(0));
    linear_bwd<T>(dbr_.data(), L.att.data(), P_.p(nm(TensorRole::kO, il)), n, qd, d, datt_.data(),
                  P_.g(nm(TensorRole::kO, il)));
    std::fill(dq_.begin(), dq_.begin() + n * qd, T(0));
    std::fill(dk_.begin(), dk_.begin() + n * kvd, T(0));
    std::fill(dv_.begin(), dv_.begin() + n * kvd, T(0));
    for (int64_t s = 0; s < S; ++s) {
      const T *q = L.q.data() + s * t * qd, *k = L.k.data() + s * t * kvd, *v = L.v.data() + s * t * kvd;
      T *dq = dq_.data() + s * t * qd, *dk = dk_.data() + s * t * kvd, *dv = dv_.data() + s * t * kvd;
      if (this->has_mask())
        attention_iv_bwd<T>(datt_.data() + s * t * qd, q, k, v, vis_of(s), L.lse.data() + s * H * t, t, H, KH, hd, scale,
                            dq, dk, dv);
      else if (recompute_)
        attention_bwd_recompute<T>(datt_.data() + s * t * qd, q, k, v, SeqVis(), t, H, KH, hd, scale, dq, dk, dv);
      else
        attention_bwd<T>(datt_.data() + s * t * qd, q, k, v, L.p.data() + s * H * t * t, t, H, KH, hd, scale, dq, dk, dv);
    }
    rope<T>(dq_.data(), pos_.data(), n, H, hd, c_.rotary_dim, c_.rope_theta, true);
    rope<T>(dk_.data(), pos_.data(), n, KH, hd, c_.rotary_dim, c_.rope_theta, true);
    const T *gq = dq_.data(), *gk = dk_.data();
    if (c_.use_qk_norm) {
      std::fill(dq_raw_.begin(), dq_raw_.begin() + n * qd, T(0));
      std::fill(dk_raw_.begin(), dk_raw_.begin() + n * kvd, T(0));
      rms_norm_bwd<T>(dq_.data(), L.q_raw.data(), P_.p(nm(TensorRole::kQNorm, il)), L.rq.data(), n, qd,
                      dq_raw_.data(), P_.g(nm(TensorRole::kQNorm, il)));
      rms_norm_bwd<T>(dk_.data(), L.k_raw.data(), P_.p(nm(TensorRole::kKNorm, il)), L.rk.data(), n, kvd,
                      dk_raw_.data(), P_.g(nm(TensorRole::kKNorm, il)));
      gq = dq_raw_.data();
      gk = dk_raw_.data();
    }
    linear_bwd<T>(gq, h1, P_.p(nm(TensorRole::kQ, il)), n, d, qd, dh_.data(), P_.g(nm(TensorRole::kQ, il)));
    linear_bwd<T>(gk, h1, P_.p(nm(TensorRole::kK, il)), n, d, kvd, dh_.data(), P_.g(nm(TensorRole::kK, il)));
    linear_bwd<T>(dv_.data(), h1, P_.p(nm(TensorRole::kV, il)), n, d, kvd, dh_.data(),
                  P_.g(nm(TensorRole::kV, il)));
  }

  // d(branch) in dbr_ -> adds d(h1) into dh_ (lightning_forward in reverse).
  void lightning_backward(int il) {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    T *dlag = datt_.data(), *dln = dg2_.data(), *dlg = dl3_.data(), *dlo = dl4_.data();
    for (T* v : {dlag, dln, dlg, dlo}) std::fill(v, v + n * qd, T(0));
    linear_bwd<T>(dbr_.data(), L.lag.data(), P_.p(nm(TensorRole::kLinOut, il)), n, qd, d, dlag, P_.g(nm(TensorRole::kLinOut, il)));
    mul_sigmoid_bwd<T>(dlag, L.ln.data(), L.lg.data(), n * qd, dln, dlg);
    linear_bwd<T>(dlg, h1, P_.p(nm(TensorRole::kLinGate, il)), n, d, qd, dh_.data(), P_.g(nm(TensorRole::kLinGate, il)));
    rms_norm_bwd<T>(dln, L.lo.data(), P_.p(nm(TensorRole::kLinNorm, il)), L.lr.data(), n, qd, dlo, P_.g(nm(TensorRole::kLinNorm, il)));
    std::fill(dq_.begin(), dq_.begin() + n * 3 * qd, T(0));
    const int64_t hs = H * lightning_n_blocks(t, lblock_) * hd * hd;
    for (int64_t s = 0; s < S; ++s) {
      const T* qkv = L.qkv.data() + s * t * 3 * qd;
      if (blockwise_)
        lightning_block_bwd<T>(dlo + s * t * qd, qkv, slopes_[size_t(il)].data(), L.ls.data() + s * hs, t, H, hd,
                               lblock_, dq_.data() + s * t * 3 * qd);
      else
        lightning_bwd<T>(dlo + s * t * qd, qkv, slopes_[size_t(il)].data(), pos_.data() + s * t, vis_of(s),
                         L.la.data() + s * H * t * t, t, H, hd, dq_.data() + s * t * 3 * qd);
    }
    std::fill(dq_raw_.begin(), dq_raw_.begin() + n * 3 * qd, T(0));
    silu_bwd<T>(dq_.data(), L.qkv_raw.data(), n * 3 * qd, dq_raw_.data());
    linear_bwd<T>(dq_raw_.data(), h1, P_.p(nm(TensorRole::kLinQkv, il)), n, d, 3 * qd, dh_.data(), P_.g(nm(TensorRole::kLinQkv, il)));
  }

  // Lightning block length: the inference prefill's rule (model/families/registry.cpp), min(block, 64).
  int lblock_ = std::min(c_.lightning_block, 64);
  std::vector<LayerActs<T>> acts_;
  std::vector<MoeBlock<T>> moe_;                      // [n_layers] routed experts + their saved activations
  MoeScratch<T> moe_scratch_;
  Vec<T> dq_, dk_, dv_, dq_raw_, dk_raw_, datt_;
  Vec<T> dg2_, dl3_, dl4_;                            // [n, qd] lightning scratch
  std::vector<std::vector<double>> slopes_;           // [n_layers][n_heads] (empty: softmax layer)
  bool blockwise_ = true;                             // the last forward's lightning form
  bool recompute_ = false;                            // softmax probabilities recomputed in the backward
};

}  // namespace

// The M2 and Text-01 / M1 checkpoint tensors (spec §4.3, §3.2): the checkpoint schema's, in its order.
std::vector<ParamInfo> param_layout_moe(const ModelConfig& c) {
  if (c.shared_ffn_dim > 0) fail("training: a shared expert is not supported for {}", c.architecture);
  return schema_params(c);
}

template <class T>
std::unique_ptr<Graph<T>> make_graph_moe(const ModelConfig& cfg, ParamSet<T>& params, int64_t max_seqs,
                                        int64_t seq_len, const GraphOptions& opt) {
  return std::make_unique<MoeGraph<T>>(cfg, params, max_seqs, seq_len, opt);
}

template std::unique_ptr<Graph<float>> make_graph_moe<float>(const ModelConfig&, ParamSet<float>&, int64_t, int64_t,
                                                             const GraphOptions&);
template std::unique_ptr<Graph<double>> make_graph_moe<double>(const ModelConfig&, ParamSet<double>&, int64_t, int64_t,
                                                               const GraphOptions&);


}  // namespace mmx::train
