// Training graph of MiniMax-M3 (spec §5.4-5.7; inference twin: model/families/minimax_m3.cpp +
// layers/attention_msa.cpp; PyTorch oracle: reference/torch_models.py M3Model):
//   x  = embed(tokens)
//   per layer: h1 = GRMS_in(x)  (Gemma gains 1 + w everywhere)
//              q,k,v = h1·Wq,k,vᵀ;  per-head QK-norm (one [head_dim] gain for all heads), RoPE
//              sparse layers: iq = h1·Wiqᵀ [G, di], ik = h1·Wikᵀ [di], per-head norm, RoPE;
//                z = iq·ik; per group top-k blocks (kernels_msa.h msa_select; not
//                differentiated); attention over the selected blocks only
//              dense layers: causal (or the batch's visibility) GQA
//              x += Wo · att
//              h2 = GRMS_post(x);  x += dense SwiGLU-OAI MLP (dense layers) or
//                   routed_scaling_factor · Σ_top-k w_e · expert_e(h2) + shared_expert(h2)  (MoE)
//   logits = lm_head(GRMS_final(x));  loss = Σ CE + the indexer KL (TrainBatch::index_loss_weight)
// The indexer KL (torch_models.py module doc): teacher = the group-mean of the sparse attention
// probabilities (detached), student = softmax over the same keys of iq·ik/√di; the indexer's input
// h1 is detached, so the KL trains only the index projections / norms and the CE everything else.
// Blocks are blocks of the packed row index within a sequence (as torch); RoPE uses the positions.
// The embedding, the norms and residuals of the layer skeleton (pre-norm, α = β = 1), lm_head and
// the loads are graph_base.h's; this file has the attention + indexer and FFN / MoE branches.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "base/error.h"
#include "train/families.h"
#include "train/graph_base.h"
#include "train/kernels.h"
#include "train/kernels_msa.h"
#include "train/moe_block.h"

namespace mmx::train {

namespace {

template <class T>
using Vec = std::vector<T>;

// The decimal a float config field was parsed from (its shortest round-trip form) as a double:
// ModelConfig keeps swiglu_alpha 1.702 and the eps as float, and 1.702f is 1.3e-8 off 1.702 — a
// 1e-8 gradient difference against the float64 torch reference.
double exact(float v) { return std::stod(fmt::format("{}", v)); }

// A SwiGLU-OAI FFN's saved activations over m rows of width f: g, u, a [m, f].
template <class T>
struct FfnActs {
  Vec<T> g, u, a;
  void resize(int64_t m, int64_t f) {
    for (Vec<T>* v : {&g, &u, &a}) v->resize(size_t(m * f));
  }
};

template <class T>
struct LayerActs {
  bool sparse = false, moe = false;
  Vec<T> q_raw, k_raw, rq, rk;     // [n,qd] [n,kvd] [n,H] [n,KH]
  Vec<T> q, k, v;                  // after QK-norm + RoPE
  Vec<T> iq_raw, ik_raw, riq, rik;  // [n,G·di] [n,di] [n,G] [n] (sparse)
  Vec<T> iq, ik;                   // after index norm + RoPE
  Vec<T> z;                        // [S, G, t, t] index scores (sparse)
  Vec<int32_t> sel;                // [S, G, t, K] selected blocks (sparse)
  Vec<T> p;                        // [S, H, t, t] attention probabilities
  Vec<T> att;                      // [n, qd]
  FfnActs<T> mlp;                  // dense layers: [n, dense_ffn]
  // MoE layers: the routed experts are moe_[il] (train/moe_block.h)
  FfnActs<T> sh;                   // shared expert [n, fs]
  Vec<T> ysh;                      // [n, d] shared expert output (scratch)
};

// The gate / up / down tensors of a dense MLP or of the shared expert.
struct FfnRoles {
  TensorRole gate, up, down;
};
constexpr FfnRoles kMlp{TensorRole::kMlpGate, TensorRole::kMlpUp, TensorRole::kMlpDown};
constexpr FfnRoles kShared{TensorRole::kSharedGate, TensorRole::kSharedUp, TensorRole::kSharedDown};

template <class T>
class M3Graph final : public GraphBase<T> {
  using Base = GraphBase<T>;
  using Base::b_, Base::blocks_, Base::c_, Base::dbr_, Base::dh_, Base::loads_, Base::nm, Base::P_, Base::pos_,
      Base::vis_of, Base::residual, Base::eps_;

 public:
  M3Graph(const ModelConfig& c, ParamSet<T>& P, int64_t max_seqs, int64_t seq_len)
      : Base(c, P, max_seqs, seq_len, exact(c.norm_eps), false),
        alpha_(exact(c.swiglu_alpha)),
        limit_(exact(c.swiglu_limit)),
        rs_(exact(c.routed_scaling_factor)) {
    const int64_t n = max_seqs * seq_len, t = seq_len, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
    const int64_t f = c.ffn_dim, G = c.msa.index_heads, di = c.msa.index_dim;
    acts_.resize(size_t(c.n_layers));
    moe_.resize(size_t(c.n_layers));
    int64_t fmax = std::max<int64_t>(c.dense_ffn_dim, c.shared_ffn_dim);
    for (int il = 0; il < c.n_layers; ++il) {
      LayerActs<T>& L = acts_[size_t(il)];
      L.sparse = c.layer_kinds[size_t(il)] == LayerKind::kSparse;
      L.moe = c.is_moe_layer(il);
      L.rq.resize(size_t(n * c.n_heads));
      L.rk.resize(size_t(n * c.n_kv_heads));
      for (Vec<T>* v : {&L.q_raw, &L.q, &L.att}) v->resize(size_t(n * qd));
      for (Vec<T>* v : {&L.k_raw, &L.k, &L.v}) v->resize(size_t(n * kvd));
      L.p.resize(size_t(max_seqs * c.n_heads * t * t));
      if (L.sparse) {
        L.iq_raw.resize(size_t(n * G * di));
        L.iq.resize(size_t(n * G * di));
        L.ik_raw.resize(size_t(n * di));
        L.ik.resize(size_t(n * di));
        L.riq.resize(size_t(n * G));
        L.rik.resize(size_t(n));
        L.z.resize(size_t(max_seqs * G * t * t));
        L.sel.resize(size_t(max_seqs * G * t * c.msa.topk));
      }
      if (!L.moe) {
        L.mlp.resize(n, c.dense_ffn_dim);
        continue;
      }
      const MoeSpec ms{c.n_experts, c.n_experts_active, d, f, c.router, c.use_routing_bias, rs_, c.ffn_act,
                       alpha_, limit_};
      moe_[size_t(il)] = std::make_unique<MoeBlock<T>>(ms, n);
      moe_scratch_.reserve(ms, n);
      if (c.shared_ffn_dim > 0) {
        L.sh.resize(n, c.shared_ffn_dim);
        L.ysh.resize(size_t(n * d));
      }
    }
    fmax = std::max(fmax, f);
    for (Vec<T>* v : {&dq_, &dq_raw_, &datt_}) v->resize(size_t(n * qd));
    for (Vec<T>* v : {&dk_, &dv_, &dk_raw_}) v->resize(size_t(n * kvd));
    diq_.resize(size_t(n * std::max<int64_t>(G, 1) * std::max<int64_t>(di, 1)));
    diq_raw_.resize(diq_.size());
    dik_.resize(size_t(n * std::max<int64_t>(di, 1)));
    dik_raw_.resize(dik_.size());
    dz_.resize(size_t(std::max<int64_t>(G, 1) * t * t));
    for (Vec<T>* v : {&da_, &dg_, &du_}) v->resize(size_t(n * fmax));  // dense MLP / shared expert
  }

  double index_kl() const override { return kl_; }

 private:
  // Pre-norm, plain residuals (x += branch): α = β = 1.
  ResidualScale attention_scale(int) const override { return {}; }
  ResidualScale ffn_scale(int) const override { return {}; }

  // The effective norm gain of a checkpoint gain w: 1 + w (Gemma) or w; refreshed every forward.
  const T* gain(const std::string& name) override {
    Vec<T>& g = gains_[name];
    const ParamInfo& info = P_.infos[P_.index(name)];
    const T* w = P_.value.data() + info.offset;
    g.resize(size_t(info.numel));
    const T off = c_.gemma_norm ? T(1) : T(0);
    for (int64_t i = 0; i < info.numel; ++i) g[size_t(i)] = off + w[i];
    return g.data();
  }
  const T* gain_saved(const std::string& name) override { return gains_.at(name).data(); }

  // KL normaliser: n_index_heads · counted rows (torch: rows with a real input token).
  void begin_forward() override {
    const int64_t n = this->rows();
    int64_t rows = n;
    if (b_.index_rows) {
      rows = 0;
      for (int64_t i = 0; i < n; ++i) rows += b_.index_rows[i] != 0;
    }
    kl_norm_ = double(std::max<int64_t>(c_.msa.index_heads, 1)) * double(std::max<int64_t>(rows, 1));
    kl_ = 0;
  }

  // Attention (+ the indexer and its KL on sparse layers) over h1 -> out [n, d].
  void attention_forward(int il, T* out) override {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    const int G = c_.msa.index_heads, di = c_.msa.index_dim;
    const int B = c_.msa.block, K = c_.msa.topk;
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kQ, il)), n, d, qd, L.q_raw.data());
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kK, il)), n, d, kvd, L.k_raw.data());
    linear_fwd<T>(h1, P_.p(nm(TensorRole::kV, il)), n, d, kvd, L.v.data());
    rms_norm_heads_fwd<T>(L.q_raw.data(), gain(nm(TensorRole::kQNorm, il)), n, H, hd, eps_, L.q.data(), L.rq.data());
    rms_norm_heads_fwd<T>(L.k_raw.data(), gain(nm(TensorRole::kKNorm, il)), n, KH, hd, eps_, L.k.data(), L.rk.data());
    rope<T>(L.q.data(), pos_.data(), n, H, hd, c_.rotary_dim, c_.rope_theta, false);
    rope<T>(L.k.data(), pos_.data(), n, KH, hd, c_.rotary_dim, c_.rope_theta, false);
    if (L.sparse) {
      linear_fwd<T>(h1, P_.p(nm(TensorRole::kIndexQ, il)), n, d, int64_t(G) * di, L.iq_raw.data());
      linear_fwd<T>(h1, P_.p(nm(TensorRole::kIndexK, il)), n, d, di, L.ik_raw.data());
      rms_norm_heads_fwd<T>(L.iq_raw.data(), gain(nm(TensorRole::kIndexQNorm, il)), n, G, di, eps_, L.iq.data(),
                            L.riq.data());
      rms_norm_heads_fwd<T>(L.ik_raw.data(), gain(nm(TensorRole::kIndexKNorm, il)), n, 1, di, eps_, L.ik.data(),
                            L.rik.data());
      rope<T>(L.iq.data(), pos_.data(), n, G, di, c_.rotary_dim, c_.rope_theta, false);
      rope<T>(L.ik.data(), pos_.data(), n, 1, di, c_.rotary_dim, c_.rope_theta, false);
      for (int64_t s = 0; s < S; ++s) {
        T* z = L.z.data() + s * G * t * t;
        int32_t* sel = L.sel.data() + s * G * t * K;
        msa_index_scores<T>(L.iq.data() + s * t * G * di, L.ik.data() + s * t * di, t, G, di, z);
        msa_select<T>(z, vis_of(s), pos_.data() + s * t, t, G, B, K, sel);
        msa_attention_fwd<T>(L.q.data() + s * t * qd, L.k.data() + s * t * kvd, L.v.data() + s * t * kvd, vis_of(s), pos_.data() + s * t,
                             sel, t, H, KH, hd, B, K, scale, L.att.data() + s * t * qd, L.p.data() + s * H * t * t);
        kl_ += msa_index_kl<T>(z, L.p.data() + s * H * t * t, vis_of(s), pos_.data() + s * t, sel,
                               b_.index_rows ? b_.index_rows + s * t : nullptr, t, H, G, B, K,
                               1.0 / std::sqrt(double(di)), 0.0, nullptr) /
               kl_norm_;
      }
    } else {
      for (int64_t s = 0; s < S; ++s)
        attention_fwd<T>(L.q.data() + s * t * qd, L.k.data() + s * t * kvd, L.v.data() + s * t * kvd, vis_of(s), t,
                         H, KH, hd, scale, L.att.data() + s * t * qd, L.p.data() + s * H * t * t);
    }
    linear_fwd<T>(L.att.data(), P_.p(nm(TensorRole::kO, il)), n, qd, d, out);
  }

  // y [m, d] = down · act(gate · x, up · x) with the gate / up / down tensors `r` of layer il.
  void ffn_fwd(const FfnRoles& r, int il, const T* x, int64_t m, int64_t f, FfnActs<T>& A, T* y) {
    const int64_t d = c_.d_model;
    linear_fwd<T>(x, P_.p(nm(r.gate, il)), m, d, f, A.g.data());
    linear_fwd<T>(x, P_.p(nm(r.up, il)), m, d, f, A.u.data());
    swiglu_oai_fwd<T>(A.g.data(), A.u.data(), m * f, alpha_, limit_, A.a.data());
    linear_fwd<T>(A.a.data(), P_.p(nm(r.down, il)), m, f, d, y);
  }
  // dx += d(x) of ffn_fwd given dy; parameter gradients accumulate.
  void ffn_bwd(const FfnRoles& r, int il, const T* dy, const T* x, int64_t m, int64_t f, const FfnActs<T>& A, T* dx) {
    const int64_t d = c_.d_model;
    std::fill(da_.begin(), da_.begin() + m * f, T(0));
    std::fill(dg_.begin(), dg_.begin() + m * f, T(0));
    std::fill(du_.begin(), du_.begin() + m * f, T(0));
    linear_bwd<T>(dy, A.a.data(), P_.p(nm(r.down, il)), m, f, d, da_.data(), P_.g(nm(r.down, il)));
    swiglu_oai_bwd<T>(da_.data(), A.g.data(), A.u.data(), m * f, alpha_, limit_, dg_.data(), du_.data());
    linear_bwd<T>(dg_.data(), x, P_.p(nm(r.gate, il)), m, d, f, dx, P_.g(nm(r.gate, il)));
    linear_bwd<T>(du_.data(), x, P_.p(nm(r.up, il)), m, d, f, dx, P_.g(nm(r.up, il)));
  }

  // Dense layers: x += mlp(h2). MoE layers: x += rs · Σ_j w_rj · expert(h2_r), then x += shared(h2).
  void ffn_forward(int il) override {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h2 = blocks_[size_t(il)].h2.data();
    const int64_t n = this->rows(), nd = n * c_.d_model;
    if (!L.moe) {
      ffn_fwd(kMlp, il, h2, n, c_.dense_ffn_dim, L.mlp, dh_.data());
      residual(h2, dh_.data(), {}, nd);
      return;
    }
    moe_[size_t(il)]->forward(P_, moe_tensors(c_, il), h2, n, dh_.data(), loads_[size_t(il)].data());
    residual(h2, dh_.data(), {}, nd);
    if (c_.shared_ffn_dim > 0) {
      ffn_fwd(kShared, il, h2, n, c_.shared_ffn_dim, L.sh, L.ysh.data());
      residual(h2, L.ysh.data(), {}, nd);
    }
  }

  // dbr_ = d(x_out) -> adds d(h2) into dh_.
  void ffn_backward(int il) override {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h2 = blocks_[size_t(il)].h2.data();
    const int64_t n = this->rows();
    if (!L.moe) {
      ffn_bwd(kMlp, il, dbr_.data(), h2, n, c_.dense_ffn_dim, L.mlp, dh_.data());
      return;
    }
    moe_[size_t(il)]->backward(P_, moe_tensors(c_, il), h2, dbr_.data(), n, dh_.data(), moe_scratch_);
    if (c_.shared_ffn_dim > 0)
      ffn_bwd(kShared, il, dbr_.data(), h2, n, c_.shared_ffn_dim, L.sh, dh_.data());
  }

  // dbr_ = d(Wo · att) -> adds d(h1) into dh_; the indexer gets the KL's gradient only (its input
  // h1 is detached).
  void attention_backward(int il) override {
    LayerActs<T>& L = acts_[size_t(il)];
    const T* h1 = blocks_[size_t(il)].h1.data();
    const auto [S, t, n, d, qd, kvd, H, KH, hd, scale] = this->dims();
    const int G = c_.msa.index_heads, di = c_.msa.index_dim;
    const int B = c_.msa.block, K = c_.msa.topk;
    const double wkl = b_.index_loss_weight;
    std::fill(datt_.begin(), datt_.begin() + n * qd, T(0));
    linear_bwd<T>(dbr_.data(), L.att.data(), P_.p(nm(TensorRole::kO, il)), n, qd, d, datt_.data(),
                  P_.g(nm(TensorRole::kO, il)));
    std::fill(dq_.begin(), dq_.begin() + n * qd, T(0));
    std::fill(dk_.begin(), dk_.begin() + n * kvd, T(0));
    std::fill(dv_.begin(), dv_.begin() + n * kvd, T(0));
    for (int64_t s = 0; s < S; ++s)
      msa_attention_bwd<T>(datt_.data() + s * t * qd, L.q.data() + s * t * qd, L.k.data() + s * t * kvd,
                           L.v.data() + s * t * kvd, L.p.data() + s * H * t * t, t, H, KH, hd, scale,
                           dq_.data() + s * t * qd, dk_.data() + s * t * kvd, dv_.data() + s * t * kvd);
    rope<T>(dq_.data(), pos_.data(), n, H, hd, c_.rotary_dim, c_.rope_theta, true);
    rope<T>(dk_.data(), pos_.data(), n, KH, hd, c_.rotary_dim, c_.rope_theta, true);
    std::fill(dq_raw_.begin(), dq_raw_.begin() + n * qd, T(0));
    std::fill(dk_raw_.begin(), dk_raw_.begin() + n * kvd, T(0));
    rms_norm_heads_bwd<T>(dq_.data(), L.q_raw.data(), gain_saved(nm(TensorRole::kQNorm, il)), L.rq.data(), n, H, hd,
                          dq_raw_.data(), P_.g(nm(TensorRole::kQNorm, il)));
    rms_norm_heads_bwd<T>(dk_.data(), L.k_raw.data(), gain_saved(nm(TensorRole::kKNorm, il)), L.rk.data(), n, KH,
                          hd, dk_raw_.data(), P_.g(nm(TensorRole::kKNorm, il)));
    linear_bwd<T>(dq_raw_.data(), h1, P_.p(nm(TensorRole::kQ, il)), n, d, qd, dh_.data(),
                  P_.g(nm(TensorRole::kQ, il)));
    linear_bwd<T>(dk_raw_.data(), h1, P_.p(nm(TensorRole::kK, il)), n, d, kvd, dh_.data(),
                  P_.g(nm(TensorRole::kK, il)));
    linear_bwd<T>(dv_.data(), h1, P_.p(nm(TensorRole::kV, il)), n, d, kvd, dh_.data(), P_.g(nm(TensorRole::kV, il)));
    if (!L.sparse || wkl == 0.0) return;
    // ---- indexer: the KL only; its input h1 is detached (no dh) ----
    const int64_t iqd = int64_t(G) * di;
    std::fill(diq_.begin(), diq_.begin() + n * iqd, T(0));
    std::fill(dik_.begin(), dik_.begin() + n * di, T(0));
    for (int64_t s = 0; s < S; ++s) {
      const T* z = L.z.data() + s * G * t * t;
      const int32_t* sel = L.sel.data() + s * G * t * K;
      std::fill(dz_.begin(), dz_.begin() + G * t * t, T(0));
      msa_index_kl<T>(z, L.p.data() + s * H * t * t, vis_of(s), pos_.data() + s * t, sel, b_.index_rows ? b_.index_rows + s * t : nullptr, t,
                      H, G, B, K, 1.0 / std::sqrt(double(di)), wkl / kl_norm_, dz_.data());
      msa_index_scores_bwd<T>(dz_.data(), L.iq.data() + s * t * iqd, L.ik.data() + s * t * di, t, G, di,
                              diq_.data() + s * t * iqd, dik_.data() + s * t * di);
    }
    rope<T>(diq_.data(), pos_.data(), n, G, di, c_.rotary_dim, c_.rope_theta, true);
    rope<T>(dik_.data(), pos_.data(), n, 1, di, c_.rotary_dim, c_.rope_theta, true);
    std::fill(diq_raw_.begin(), diq_raw_.begin() + n * iqd, T(0));
    std::fill(dik_raw_.begin(), dik_raw_.begin() + n * di, T(0));
    rms_norm_heads_bwd<T>(diq_.data(), L.iq_raw.data(), gain_saved(nm(TensorRole::kIndexQNorm, il)), L.riq.data(), n,
                          G, di, diq_raw_.data(), P_.g(nm(TensorRole::kIndexQNorm, il)));
    rms_norm_heads_bwd<T>(dik_.data(), L.ik_raw.data(), gain_saved(nm(TensorRole::kIndexKNorm, il)), L.rik.data(), n,
                          1, di, dik_raw_.data(), P_.g(nm(TensorRole::kIndexKNorm, il)));
    linear_bwd<T>(diq_raw_.data(), h1, P_.p(nm(TensorRole::kIndexQ, il)), n, d, iqd, nullptr,
                  P_.g(nm(TensorRole::kIndexQ, il)));
    linear_bwd<T>(dik_raw_.data(), h1, P_.p(nm(TensorRole::kIndexK, il)), n, d, di, nullptr,
                  P_.g(nm(TensorRole::kIndexK, il)));
  }

  double alpha_, limit_, rs_;                         // the config's decimals (exact())
  std::vector<LayerActs<T>> acts_;
  std::map<std::string, Vec<T>> gains_;               // effective norm gains of the last forward
  Vec<T> dq_, dk_, dv_, dq_raw_, dk_raw_, datt_, diq_, dik_, diq_raw_, dik_raw_, dz_;
  Vec<T> da_, dg_, du_;                               // dense MLP / shared expert scratch
  std::vector<std::unique_ptr<MoeBlock<T>>> moe_;     // [n_layers] routed experts (null: dense layer)
  MoeScratch<T> moe_scratch_;
  double kl_ = 0, kl_norm_ = 1;
};

}  // namespace

std::vector<ParamInfo> param_layout_m3(const ModelConfig& c) {
  if (!c.use_qk_norm || !c.qk_norm_per_head) fail("training: MiniMax-M3 needs per-head QK-norm (qk_norm_type per_head)");
  if (c.ffn_act != FfnAct::kSwigluOai) fail("training: MiniMax-M3 needs the swigluoai activation");
  if (c.count_layers(LayerKind::kSparse) > 0 && c.msa.index_heads != c.n_kv_heads)
    fail("training: MSA needs sparse_num_index_heads == num_key_value_heads");
  return schema_params(c);
}

template <class T>
std::unique_ptr<Graph<T>> make_graph_m3(const ModelConfig& cfg, ParamSet<T>& params, int64_t max_seqs,
                                        int64_t seq_len) {
  return std::make_unique<M3Graph<T>>(cfg, params, max_seqs, seq_len);
}

template std::unique_ptr<Graph<float>> make_graph_m3<float>(const ModelConfig&, ParamSet<float>&, int64_t, int64_t);
template std::unique_ptr<Graph<double>> make_graph_m3<double>(const ModelConfig&, ParamSet<double>&, int64_t,
                                                              int64_t);

}  // namespace mmx::train
