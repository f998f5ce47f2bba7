#include "train/params.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "model/safetensors.h"
#include "ops/ops.h"

namespace mmx::train {

std::vector<ParamInfo> param_layout(const ModelConfig& c) {
  if (c.family != Family::kMiniMaxM2)
    fail("training: only the MiniMax-M2 family is supported so far (this checkpoint is {})", c.architecture);
  if (c.tie_word_embeddings) fail("training: tie_word_embeddings is not supported");
  if (c.fp8.enabled) fail("training: FP8 checkpoints are not trained directly; convert to bf16/f32 first");
  if (c.shared_ffn_dim > 0) fail("training: an M2 shared expert is not supported");
  const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.ffn_dim, E = c.n_experts;
  std::vector<ParamInfo> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool decay, bool trainable = true) {
    out.push_back({std::move(name), std::move(shape), 0, 0, decay, trainable});
  };
  add("model.embed_tokens.weight", {c.vocab_size, d}, true);
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string p = fmt::format("model.layers.{}.", il);
    add(p + "input_layernorm.weight", {d}, false);
    add(p + "post_attention_layernorm.weight", {d}, false);
    add(p + "self_attn.q_proj.weight", {qd, d}, true);
    add(p + "self_attn.k_proj.weight", {kvd, d}, true);
    add(p + "self_attn.v_proj.weight", {kvd, d}, true);
    add(p + "self_attn.o_proj.weight", {d, qd}, true);
    if (c.use_qk_norm) {
      add(p + "self_attn.q_norm.weight", {qd}, false);
      add(p + "self_attn.k_norm.weight", {kvd}, false);
    }
    const std::string mp = p + "block_sparse_moe.";
    add(mp + "gate.weight", {E, d}, true);
    if (c.use_routing_bias) add(mp + "e_score_correction_bias", {E}, false, /*trainable=*/false);
    for (int e = 0; e < E; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", mp, e);
      add(ep + "w1.weight", {f, d}, true);
      add(ep + "w2.weight", {d, f}, true);
      add(ep + "w3.weight", {f, d}, true);
    }
  }
  add("model.norm.weight", {d}, false);
  add("lm_head.weight", {c.vocab_size, d}, true);
  return out;
}

template <class T>
ParamSet<T>::ParamSet(std::vector<ParamInfo> layout) : infos(std::move(layout)) {
  int64_t off = 0;
  for (ParamInfo& i : infos) {
    i.numel = 1;
    for (int64_t s : i.shape) i.numel *= s;
    i.offset = off;
    off += i.numel;
  }
  value.assign(size_t(off), T(0));
  grad.assign(size_t(off), T(0));
}

template <class T>
int64_t ParamSet<T>::n_trainable() const {
  int64_t n = 0;
  for (const ParamInfo& i : infos) n += i.trainable ? i.numel : 0;
  return n;
}

template <class T>
size_t ParamSet<T>::index(const std::string& name) const {
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return i;
  fail("training: no parameter named {}", name);
}

template <class T>
void ParamSet<T>::zero_grad() {
  std::fill(grad.begin(), grad.end(), T(0));
}

template <class T>
void load_params(const std::string& dir, ParamSet<T>& params) {
  const TensorStore st = TensorStore::open(dir);
  std::vector<float> tmp;
  for (const ParamInfo& i : params.infos) {
    if (!st.has(i.name)) fail("{}: missing tensor {} (the training layout needs it)", dir, i.name);
    const Tensor t = st.tensor(i.name);
    std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
    if (shape != i.shape)
      fail("{}: tensor {} has shape [{}], the config implies [{}]", dir, i.name, fmt::join(shape, ", "),
           fmt::join(i.shape, ", "));
    tmp.resize(size_t(i.numel));
    if (t.dtype == DType::kF8E4M3) {
      const std::string sname = i.name + "_scale_inv";
      ops::Linear l{t, st.has(sname) ? st.tensor(sname) : Tensor{}};
      Tensor out(tmp.data(), DType::kF32, {i.shape[0], i.shape[1]});
      ops::linear_dequant_rows(l, 0, out);
    } else {
      Tensor out(tmp.data(), DType::kF32, {i.numel});
      ops::to_f32(t.reshape({i.numel}), out);
    }
    for (int64_t k = 0; k < i.numel; ++k) params.value[size_t(i.offset + k)] = T(tmp[size_t(k)]);
  }
}

void save_params(const std::string& dir, const ParamSet<float>& params, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) fail("training: checkpoints are saved as f32 or bf16");
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  std::vector<uint16_t> h;
  for (const ParamInfo& i : params.infos) {
    const float* v = params.value.data() + i.offset;
    const bool keep_f32 = dtype == DType::kF32 || i.name.find("block_sparse_moe.gate.") != std::string::npos ||
                          i.name.find("e_score_correction_bias") != std::string::npos;
    if (keep_f32) {
      w.add(i.name, DType::kF32, i.shape, v, size_t(i.numel) * 4);
      continue;
    }
    h.resize(size_t(i.numel));
    for (int64_t k = 0; k < i.numel; ++k) h[size_t(k)] = f32_to_bf16(v[k]);
    w.add(i.name, DType::kBF16, i.shape, h.data(), h.size() * 2);
  }
  w.write(dir + "/model.safetensors");
}

template <class T>
void init_params(const ModelConfig& cfg, uint64_t seed, ParamSet<T>& params) {
  std::mt19937_64 rng(seed);
  const double resid_scale = 1.0 / std::sqrt(2.0 * cfg.n_layers);
  for (const ParamInfo& i : params.infos) {
    T* v = params.value.data() + i.offset;
    const auto ends_with = [&](const char* s) {
      const std::string suf(s);
      return i.name.size() >= suf.size() && i.name.compare(i.name.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (i.shape.size() == 1) {  // norm gains 1, routing bias 0
      std::fill(v, v + i.numel, ends_with("e_score_correction_bias") ? T(0) : T(1));
      continue;
    }
    double stddev = 1.0 / std::sqrt(double(i.shape[1]));
    if (i.name == "model.embed_tokens.weight") stddev = 1.0;
    if (ends_with("o_proj.weight") || ends_with("w2.weight")) stddev *= resid_scale;
    std::normal_distribution<double> nd(0.0, stddev);
    for (int64_t k = 0; k < i.numel; ++k) v[k] = T(nd(rng));
  }
}

template struct ParamSet<float>;
template struct ParamSet<double>;
template void load_params<float>(const std::string&, ParamSet<float>&);
template void load_params<double>(const std::string&, ParamSet<double>&);
template void init_params<float>(const ModelConfig&, uint64_t, ParamSet<float>&);
template void init_params<double>(const ModelConfig&, uint64_t, ParamSet<double>&);

}  // namespace mmx::train
