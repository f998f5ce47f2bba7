// The shared part of the training graphs (graph_base.h): embedding, the layer skeleton, final
// norm and lm_head, forward and backward.
#include "train/graph_base.h"

#include <algorithm>
#include <cstring>

#include "train/kernels.h"
#include "train/loss.h"

namespace mmx::train {

template <class T>
GraphBase<T>::GraphBase(const ModelConfig& c, ParamSet<T>& P, int64_t max_seqs, int64_t seq_len, double eps,
                        bool postnorm)
    : c_(c), P_(P), max_seqs_(max_seqs), seq_len_(seq_len), eps_(eps), postnorm_(postnorm) {
  const int64_t n = max_seqs * seq_len, d = c.d_model;
  blocks_.resize(size_t(c.n_layers));
  for (BlockActs& A : blocks_) {
    for (Vec<T>* v : {&A.x_in, &A.h1, &A.x_mid, &A.h2}) v->resize(size_t(n * d));
    for (Vec<T>* v : {&A.r1, &A.r2}) v->resize(size_t(n));
  }
  for (Vec<T>* v : {&x_, &hf_, &dx_, &dh_, &dbr_}) v->resize(size_t(n * d));
  rf_.resize(size_t(n));
  logits_.resize(size_t(n * c.vocab_size));
  pos_.resize(size_t(n));
  loads_.assign(size_t(c.n_layers), std::vector<int64_t>(size_t(std::max<int64_t>(c.n_experts, 0)), 0));
}

template <class T>
SeqVis GraphBase<T>::vis_of(int64_t s) const {
  const int64_t t = b_.seq_len;
  if (b_.visibility) return SeqVis(b_.visibility + s * t * t);
  if (b_.parents) return SeqVis::tree(b_.parents + s * t, runs_.data() + s * t);
  return SeqVis();
}

template <class T>
void GraphBase<T>::residual(const T* h, const T* branch, ResidualScale r, int64_t nd) {
  const T a = T(r.alpha), b = T(r.beta);
  const T* base = postnorm_ ? h : x_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nd; ++i) x_[size_t(i)] = a * base[i] + b * branch[i];
}

template <class T>
void GraphBase<T>::residual_backward(ResidualScale r, int64_t nd) {
  const T a = T(r.alpha), b = T(r.beta);
  const bool post = postnorm_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nd; ++i) {
    const T g = dx_[size_t(i)];
    dbr_[size_t(i)] = b * g;
    dh_[size_t(i)] = post ? a * g : T(0);
    dx_[size_t(i)] = post ? T(0) : a * g;
  }
}

template <class T>
const T* GraphBase<T>::forward(const TrainBatch& b, std::vector<double>* target_logp) {
  check_batch(c_, b, max_seqs_, seq_len_);
  b_ = b;
  const int64_t t = b.seq_len, n = b.n_seqs * t, d = c_.d_model;
  for (int64_t i = 0; i < n; ++i) pos_[size_t(i)] = b.positions ? b.positions[i] : int32_t(i % t);
  if (b.parents) {
    runs_.resize(size_t(n));
    for (int64_t s = 0; s < b.n_seqs; ++s) tree_runs(b.parents + s * t, t, runs_.data() + s * t);
  }
  begin_forward();
  embedding_fwd<T>(P_.p(nm(TensorRole::kEmbed)), b.tokens, n, d, x_.data());
  for (int il = 0; il < c_.n_layers; ++il) {
    BlockActs& A = blocks_[size_t(il)];
    std::memcpy(A.x_in.data(), x_.data(), sizeof(T) * size_t(n * d));
    rms_norm_fwd<T>(x_.data(), gain(nm(TensorRole::kAttnNorm, il)), n, d, eps_, A.h1.data(), A.r1.data());
    attention_forward(il, dh_.data());
    residual(A.h1.data(), dh_.data(), attention_scale(il), n * d);
    std::memcpy(A.x_mid.data(), x_.data(), sizeof(T) * size_t(n * d));
    rms_norm_fwd<T>(x_.data(), gain(nm(TensorRole::kFfnNorm, il)), n, d, eps_, A.h2.data(), A.r2.data());
    ffn_forward(il);
  }
  rms_norm_fwd<T>(x_.data(), gain(nm(TensorRole::kFinalNorm)), n, d, eps_, hf_.data(), rf_.data());
  linear_fwd<T>(hf_.data(), P_.p(nm(TensorRole::kLmHead)), n, d, c_.vocab_size, logits_.data());
  if (target_logp) {
    target_logp->resize(size_t(n));
    token_nll<T>(logits_.data(), b.targets, nullptr, n, c_.vocab_size, 0.0, nullptr, target_logp->data());
  }
  return logits_.data();
}

template <class T>
void GraphBase<T>::backward(const T* dlogits) {
  const int64_t n = rows(), d = c_.d_model;
  std::fill(dx_.begin(), dx_.begin() + n * d, T(0));
  std::fill(dh_.begin(), dh_.begin() + n * d, T(0));
  linear_bwd<T>(dlogits, hf_.data(), P_.p(nm(TensorRole::kLmHead)), n, d, c_.vocab_size, dh_.data(),
                P_.g(nm(TensorRole::kLmHead)));
  rms_norm_bwd<T>(dh_.data(), x_.data(), gain_saved(nm(TensorRole::kFinalNorm)), rf_.data(), n, d, dx_.data(),
                  P_.g(nm(TensorRole::kFinalNorm)));
  for (int il = c_.n_layers - 1; il >= 0; --il) {
    BlockActs& A = blocks_[size_t(il)];
    residual_backward(ffn_scale(il), n * d);
    ffn_backward(il);
    rms_norm_bwd<T>(dh_.data(), A.x_mid.data(), gain_saved(nm(TensorRole::kFfnNorm, il)), A.r2.data(), n, d,
                    dx_.data(), P_.g(nm(TensorRole::kFfnNorm, il)));
    residual_backward(attention_scale(il), n * d);
    attention_backward(il);
    rms_norm_bwd<T>(dh_.data(), A.x_in.data(), gain_saved(nm(TensorRole::kAttnNorm, il)), A.r1.data(), n, d,
                    dx_.data(), P_.g(nm(TensorRole::kAttnNorm, il)));
  }
  embedding_bwd<T>(dx_.data(), b_.tokens, n, d, P_.g(nm(TensorRole::kEmbed)));
}

template <class T>
std::vector<std::vector<int64_t>> GraphBase<T>::take_expert_loads() {
  auto out = loads_;
  for (auto& l : loads_) std::fill(l.begin(), l.end(), 0);
  return out;
}

template class GraphBase<float>;
template class GraphBase<double>;

}  // namespace mmx::train
