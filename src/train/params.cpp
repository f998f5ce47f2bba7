#include "train/params.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "model/schema.h"
#include "ops/ops.h"
#include "train/families.h"

namespace mmx::train {

std::vector<ParamInfo> param_layout(const ModelConfig& c) {
  if (c.tie_word_embeddings) fail("training: tie_word_embeddings is not supported");
  if (c.fp8.enabled) fail("training: FP8 checkpoints are not trained directly; convert to bf16/f32 first");
  switch (c.family) {
    case Family::kMiniMaxM2:
    case Family::kMiniMaxText01: return param_layout_moe(c);
    case Family::kMiniMaxM3: return param_layout_m3(c);
    default: break;
  }
  fail("training: the {} family is not trainable yet (supported: MiniMax-M2, Text-01 / M1)", c.architecture);
}

std::vector<ParamInfo> schema_params(const ModelConfig& c) {
  std::vector<ParamInfo> out;
  for (const TensorSpec& s : checkpoint_schema(c)) {
    ParamInfo i;
    i.name = s.name;
    i.shape = s.shape;
    i.init = s.init;
    i.decay = s.decay;
    i.trainable = s.trainable;
    i.keep_f32 = s.keep_f32;
    out.push_back(std::move(i));
  }
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

template <class T>
void save_grads(const std::string& path, double loss, const ParamSet<T>& params) {
  SafetensorsWriter w;
  w.add("loss", DType::kF64, {1}, &loss, 8);
  std::vector<double> g;
  for (const ParamInfo& i : params.infos) {
    if (!i.trainable) continue;
    g.assign(params.grad.begin() + i.offset, params.grad.begin() + i.offset + i.numel);
    w.add(i.name, DType::kF64, i.shape, g.data(), g.size() * 8);
  }
  w.write(path);
}
template void save_grads<float>(const std::string&, double, const ParamSet<float>&);
template void save_grads<double>(const std::string&, double, const ParamSet<double>&);

void save_params(const std::string& dir, const ParamSet<float>& params, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) fail("training: checkpoints are saved as f32 or bf16");
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  std::vector<uint16_t> h;
  for (const ParamInfo& i : params.infos) {
    const float* v = params.value.data() + i.offset;
    const bool keep_f32 = dtype == DType::kF32 || i.keep_f32;
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
    if (i.init == Init::kOnes || i.init == Init::kZeros) {
      std::fill(v, v + i.numel, i.init == Init::kOnes ? T(1) : T(0));
      continue;
    }
    double stddev = i.init == Init::kEmbedding ? 1.0 : 1.0 / std::sqrt(double(i.shape.back()));
    if (i.init == Init::kResidual) stddev *= resid_scale;
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
