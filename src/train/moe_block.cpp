#include "train/moe_block.h"

#include <algorithm>
#include <cstring>

#include "train/kernels.h"
#include "train/kernels_lightning.h"
#include "train/kernels_msa.h"

namespace mmx::train {

template <class T>
void MoeScratch<T>::reserve(const MoeSpec& s, int64_t max_rows) {
  const size_t nk = size_t(max_rows * s.k);
  for (std::vector<T>* v : {&dye, &dxe}) v->resize(std::max(v->size(), nk * size_t(s.d)));
  for (std::vector<T>* v : {&da, &dg, &du}) v->resize(std::max(v->size(), nk * size_t(s.f)));
  dlogits.resize(std::max(dlogits.size(), size_t(max_rows * s.n_experts)));
  dw.resize(std::max(dw.size(), nk));
}

template <class T>
MoeBlock<T>::MoeBlock(const MoeSpec& s, int64_t max_rows) : s_(s) {
  const size_t n = size_t(max_rows), E = size_t(s.n_experts), k = size_t(s.k);
  logits_.resize(n * E);
  probs_.resize(n * E);
  w_.resize(n * k);
  ids_.resize(n * k);
  count_.resize(E + 1);
  for (auto* v : {&slot_row_, &slot_j_, &slot_of_}) v->resize(n * k);
  for (auto* v : {&xe_, &ye_}) v->resize(n * k * size_t(s.d));
  for (auto* v : {&g_, &u_, &a_}) v->resize(n * k * size_t(s.f));
}

template <class T>
void MoeBlock<T>::act_fwd(const T* g, const T* u, int64_t m, T* a) const {
  if (s_.act == FfnAct::kSwigluOai) swiglu_oai_fwd<T>(g, u, m, s_.swiglu_alpha, s_.swiglu_limit, a);
  else glu_silu_fwd<T>(g, u, m, a);
}

template <class T>
void MoeBlock<T>::act_bwd(const T* da, const T* g, const T* u, int64_t m, T* dg, T* du) const {
  if (s_.act == FfnAct::kSwigluOai) swiglu_oai_bwd<T>(da, g, u, m, s_.swiglu_alpha, s_.swiglu_limit, dg, du);
  else glu_silu_bwd<T>(da, g, u, m, dg, du);
}

template <class T>
void MoeBlock<T>::forward(ParamSet<T>& P, const MoeTensors& t, const T* x, int64_t n, T* out, int64_t* loads) {
  const int E = s_.n_experts, k = s_.k;
  const int64_t d = s_.d, f = s_.f;
  linear_fwd<T>(x, P.p(t.router), n, d, E, logits_.data());
  if (s_.router == RouterKind::kSoftmax) {
    router_softmax_fwd<T>(logits_.data(), n, E, k, ids_.data(), w_.data(), probs_.data());
  } else {
    const T* bias = s_.routing_bias ? P.p(t.bias) : nullptr;
    router_sigmoid_fwd<T>(logits_.data(), bias, n, E, k, ids_.data(), w_.data(), probs_.data());
  }
  std::fill(count_.begin(), count_.end(), 0);
  for (int64_t i = 0; i < n * k; ++i) ++count_[size_t(ids_[size_t(i)] + 1)];
  for (int e = 0; e < E; ++e) {
    if (loads) loads[e] += count_[size_t(e + 1)];
    count_[size_t(e + 1)] += count_[size_t(e)];
  }
  std::vector<int32_t> fill(count_.begin(), count_.end() - 1);
  for (int64_t r = 0; r < n; ++r)
    for (int j = 0; j < k; ++j) {
      const int e = ids_[size_t(r * k + j)];
      slot_row_[size_t(fill[size_t(e)])] = int32_t(r);
      slot_j_[size_t(fill[size_t(e)])] = j;
      slot_of_[size_t(r * k + j)] = fill[size_t(e)];
      ++fill[size_t(e)];
    }
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n * k; ++s)
    std::memcpy(xe_.data() + s * d, x + int64_t(slot_row_[size_t(s)]) * d, sizeof(T) * size_t(d));
  for (int e = 0; e < E; ++e) {
    const int64_t b0 = count_[size_t(e)], m = count_[size_t(e + 1)] - b0;
    if (m == 0) continue;
    linear_fwd<T>(xe_.data() + b0 * d, P.p(t.w1[size_t(e)]), m, d, f, g_.data() + b0 * f);
    linear_fwd<T>(xe_.data() + b0 * d, P.p(t.w3[size_t(e)]), m, d, f, u_.data() + b0 * f);
    act_fwd(g_.data() + b0 * f, u_.data() + b0 * f, m * f, a_.data() + b0 * f);
    linear_fwd<T>(a_.data() + b0 * f, P.p(t.w2[size_t(e)]), m, f, d, ye_.data() + b0 * d);
  }
  const T rs = T(s_.routed_scaling);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    T* o = out + r * d;
    std::fill(o, o + d, T(0));
    for (int j = 0; j < k; ++j) {
      const T wgt = w_[size_t(r * k + j)] * rs;
      const T* y = ye_.data() + int64_t(slot_of_[size_t(r * k + j)]) * d;
      for (int64_t c = 0; c < d; ++c) o[c] += wgt * y[c];
    }
  }
}

template <class T>
void MoeBlock<T>::backward(ParamSet<T>& P, const MoeTensors& t, const T* x, const T* dout, int64_t n, T* dx,
                           MoeScratch<T>& sc) const {
  const int E = s_.n_experts, k = s_.k;
  const int64_t d = s_.d, f = s_.f;
  const T rs = T(s_.routed_scaling);
  // out_r = Σ_j w_rj · rs · ye_slot:  dye_slot = w·rs·dout_r;  dw_rj = rs · <dout_r, ye_slot>
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n * k; ++s) {
    const int64_t r = slot_row_[size_t(s)], j = slot_j_[size_t(s)];
    const T* g = dout + r * d;
    const T* y = ye_.data() + s * d;
    const T wgt = w_[size_t(r * k + j)] * rs;
    T dot = 0;
    T* dy = sc.dye.data() + s * d;
    for (int64_t c = 0; c < d; ++c) {
      dy[c] = wgt * g[c];
      dot += g[c] * y[c];
    }
    sc.dw[size_t(r * k + j)] = dot * rs;
  }
  std::fill(sc.dxe.begin(), sc.dxe.begin() + n * k * d, T(0));
  for (int e = 0; e < E; ++e) {
    const int64_t b0 = count_[size_t(e)], m = count_[size_t(e + 1)] - b0;
    if (m == 0) continue;
    for (std::vector<T>* v : {&sc.da, &sc.dg, &sc.du}) std::fill(v->begin() + b0 * f, v->begin() + (b0 + m) * f, T(0));
    linear_bwd<T>(sc.dye.data() + b0 * d, a_.data() + b0 * f, P.p(t.w2[size_t(e)]), m, f, d, sc.da.data() + b0 * f,
                  P.g(t.w2[size_t(e)]));
    act_bwd(sc.da.data() + b0 * f, g_.data() + b0 * f, u_.data() + b0 * f, m * f, sc.dg.data() + b0 * f,
            sc.du.data() + b0 * f);
    linear_bwd<T>(sc.dg.data() + b0 * f, xe_.data() + b0 * d, P.p(t.w1[size_t(e)]), m, d, f, sc.dxe.data() + b0 * d,
                  P.g(t.w1[size_t(e)]));
    linear_bwd<T>(sc.du.data() + b0 * f, xe_.data() + b0 * d, P.p(t.w3[size_t(e)]), m, d, f, sc.dxe.data() + b0 * d,
                  P.g(t.w3[size_t(e)]));
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {  // per row in rank order: deterministic
    T* dst = dx + r * d;
    for (int j = 0; j < k; ++j) {
      const T* src = sc.dxe.data() + int64_t(slot_of_[size_t(r * k + j)]) * d;
      for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
    }
  }
  std::fill(sc.dlogits.begin(), sc.dlogits.begin() + n * E, T(0));
  if (s_.router == RouterKind::kSoftmax)
    router_softmax_bwd<T>(sc.dw.data(), ids_.data(), w_.data(), probs_.data(), n, E, k, sc.dlogits.data());
  else
    router_sigmoid_bwd<T>(sc.dw.data(), ids_.data(), w_.data(), probs_.data(), n, E, k, sc.dlogits.data());
  linear_bwd<T>(sc.dlogits.data(), x, P.p(t.router), n, d, E, dx, P.g(t.router));
}

MoeTensors moe_tensors(const ModelConfig& c, int il) {
  MoeTensors t;
  t.router = tensor_name(c, TensorRole::kRouter, il);
  if (c.use_routing_bias) t.bias = tensor_name(c, TensorRole::kRouterBias, il);
  for (int e = 0; e < c.n_experts; ++e) {
    t.w1.push_back(tensor_name(c, TensorRole::kExpertGate, il, e));
    t.w2.push_back(tensor_name(c, TensorRole::kExpertDown, il, e));
    t.w3.push_back(tensor_name(c, TensorRole::kExpertUp, il, e));
  }
  return t;
}

template struct MoeScratch<float>;
template struct MoeScratch<double>;
template class MoeBlock<float>;
template class MoeBlock<double>;

}  // namespace mmx::train
