// ParamSet: every tensor of a checkpoint as one flat master-weight buffer, with gradients beside it.
//
// Names and shapes are the checkpoint's own (HF layout, spec §4.3 for M2), from the checkpoint
// schema (model/schema.h) via param_layout(); the training graph takes views by name, the
// optimizer walks the flat buffer, and save_checkpoint() writes them back under the same names, so `mmx generate`, `mmx serve` and
// the numpy references load a trained model unchanged. T = float (training) or double (gradient
// checks).
//
// Not here: the forward/backward (graph_*.cpp), the optimizer (adamw.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/config.h"
#include "model/schema.h"

namespace mmx::train {

// How init_params() fills a tensor when training from scratch: mmx::Init (model/schema.h).

struct ParamInfo {
  std::string name;            // checkpoint (HF) tensor name, TensorSpec::name
  std::vector<int64_t> shape;  // as in the checkpoint
  Init init = Init::kFanIn;
  bool decay = false;          // AdamW weight decay applies (matrices; not norms, not the bias)
  bool trainable = true;       // false: updated outside the gradient (the routing bias, spec §4.4)
  bool keep_f32 = false;       // saved as F32 even in a BF16 checkpoint (router, routing bias)
  int64_t offset = 0;          // into ParamSet::value / grad (set by ParamSet)
  int64_t numel = 0;
};

// The tensors a family's checkpoint holds, in checkpoint order (each family's list lives beside
// its graph: graph_<family>.cpp). Throws mmx::Error for a family or option this trainer does not
// support (named).
std::vector<ParamInfo> param_layout(const ModelConfig& cfg);

template <class T>
struct ParamSet {
  std::vector<ParamInfo> infos;
  std::vector<T> value;  // [total] all tensors back to back
  std::vector<T> grad;   // [total] dLoss/dvalue (0 for non-trainable tensors)

  explicit ParamSet(std::vector<ParamInfo> layout);
  int64_t total() const { return int64_t(value.size()); }
  int64_t n_trainable() const;
  // Index of `name` in infos; throws mmx::Error naming it when absent.
  size_t index(const std::string& name) const;
  T* p(const std::string& name) { return value.data() + infos[index(name)].offset; }
  const T* p(const std::string& name) const { return value.data() + infos[index(name)].offset; }
  T* g(const std::string& name) { return grad.data() + infos[index(name)].offset; }
  void zero_grad();
};

// Fills `params` from DIR's safetensors (any stored dtype: F32/F16/BF16, FP8 dequantized).
// Throws mmx::Error naming the tensor on a missing tensor or a shape that differs from the layout.
template <class T>
void load_params(const std::string& dir, ParamSet<T>& params);

// Writes DIR/model.safetensors with every tensor of `params` under its name, stored as `dtype`
// (kF32 or kBF16; ParamInfo::keep_f32 tensors stay F32, as the router in real M2 checkpoints).
// The rest of the directory (config.json, tokenizer) is the caller's.
void save_params(const std::string& dir, const ParamSet<float>& params, DType dtype);

// The gradient-check file of `mmx grad` and `mmx rl grad` (reference/torch_grad.py writes the
// same): safetensors, F64 "loss" [1] and d loss / dθ of every trainable tensor under its name.
template <class T>
void save_grads(const std::string& path, double loss, const ParamSet<T>& params);

// Seeded initialisation for training from scratch (replaces every value), per ParamInfo::init.
template <class T>
void init_params(const ModelConfig& cfg, uint64_t seed, ParamSet<T>& params);

}  // namespace mmx::train
