// A weight push into a loaded model (Model::update_weights, model/model.h): checkpoint tensors by
// name -> the model's own storage, without reloading. Used between RL steps (rl/rollout.h), where
// the trainer's new policy goes into the live engine.
//
// Where a tensor lives is the loader's choice (model/weights.cpp), mirrored here by role: norm
// gains, the router and the routing bias are F32 copies (written in place, Gemma offset folded);
// embedding and linear weights are views in their storage dtype — into the checkpoint's bytes at
// first (read-only), so the first push of a tensor moves it into a copy the weights own (and gives
// the old bytes back when they are in huge pages), and later pushes write that copy.
// Not here: the engine's side (pausing between steps, dropping stale K/V: engine/engine.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/error.h"
#include "model/schema.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace mmx {

namespace {

// One tensor's home in ModelWeights: a storage-dtype view, or an F32 buffer made at load.
struct Home {
  Tensor* view = nullptr;
  Buffer* f32 = nullptr;
  float offset = 0;  // added to every value (Gemma (1 + w) gains)
};

Home home_of(ModelWeights& w, const ModelConfig& cfg, const TensorSpec& s) {
  LayerWeights* lw = s.layer >= 0 ? &w.layers[size_t(s.layer)] : nullptr;
  ExpertWeights* ex = s.expert >= 0 ? &lw->moe.experts[size_t(s.expert)] : nullptr;
  const float g = cfg.gemma_norm ? 1.0f : 0.0f;
  switch (s.role) {
    case TensorRole::kEmbed: return {&w.embed};
    case TensorRole::kAttnNorm: return {nullptr, &lw->attn_norm, g};
    case TensorRole::kFfnNorm: return {nullptr, &lw->ffn_norm, g};
    case TensorRole::kQ: return {&lw->attn.q.w};
    case TensorRole::kK: return {&lw->attn.k.w};
    case TensorRole::kV: return {&lw->attn.v.w};
    case TensorRole::kO: return {&lw->attn.o.w};
    case TensorRole::kQNorm: return {nullptr, &lw->attn.q_norm, g};
    case TensorRole::kKNorm: return {nullptr, &lw->attn.k_norm, g};
    case TensorRole::kIndexQ: return {&lw->attn.iq.w};
    case TensorRole::kIndexK: return {&lw->attn.ik.w};
    case TensorRole::kIndexQNorm: return {nullptr, &lw->attn.iq_norm, g};
    case TensorRole::kIndexKNorm: return {nullptr, &lw->attn.ik_norm, g};
    case TensorRole::kLinQkv: return {&lw->lin.qkv.w};
    case TensorRole::kLinGate: return {&lw->lin.gate.w};
    case TensorRole::kLinNorm: return {nullptr, &lw->lin.norm, 0.0f};  // no Gemma offset (spec §3.2)
    case TensorRole::kLinOut: return {&lw->lin.out.w};
    case TensorRole::kMlpGate: return {&lw->mlp.gate.w};
    case TensorRole::kMlpUp: return {&lw->mlp.up.w};
    case TensorRole::kMlpDown: return {&lw->mlp.down.w};
    case TensorRole::kRouter: return {nullptr, &lw->moe.gate_f32};  // moe.gate views it
    case TensorRole::kRouterBias: return {nullptr, &lw->moe.bias};
    case TensorRole::kExpertGate: return {&ex->w1.w};
    case TensorRole::kExpertDown: return {&ex->w2.w};
    case TensorRole::kExpertUp: return {&ex->w3.w};
    case TensorRole::kSharedGate: return {&lw->moe.shared.gate.w};
    case TensorRole::kSharedUp: return {&lw->moe.shared.up.w};
    case TensorRole::kSharedDown: return {&lw->moe.shared.down.w};
    case TensorRole::kFinalNorm: return {nullptr, &w.final_norm, g};
    case TensorRole::kLmHead: return {&w.lm_head.w};
  }
  fail("{}: no weight of this role", s.name);
}

// The storage dtypes a push can encode into (FP8's block scales would need recomputing).
bool writable_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || dtype_is_quant(t); }

// values [numel] F32 -> *t in t->dtype, moving *t into a copy `w` owns first when it is not one.
void write_view(ModelWeights& w, Tensor* t, std::span<const float> values) {
  if (!w.owned.count(t->data)) {
    MMX_CHECK(t->ndim == 2, "a pushed weight of rank {}", t->ndim);
    Buffer b(t->dtype, {t->dim(0), t->dim(1)});
    w.store.release(t->data, t->size_bytes());  // in huge pages: those bytes are not read again
    t->data = b.t().data;
    w.owned.insert(t->data);
    w.copies.push_back(std::move(b));
  }
  const Tensor src(const_cast<float*>(values.data()), DType::kF32, {t->dim(0), t->dim(1)});
  if (t->dtype == DType::kF32) std::memcpy(t->data, values.data(), values.size() * sizeof(float));
  else ops::quantize(src, *t);  // F16 / BF16 rounded to nearest even, GGUF blocks requantized
}

}  // namespace

void update_weights(ModelWeights& w, const ModelConfig& cfg, std::span<const TensorValues> updates) {
  const std::vector<TensorSpec> schema = checkpoint_schema(cfg);
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < schema.size(); ++i) by_name.emplace(schema[i].name, i);
  // 1. Check every update; nothing is written unless all pass.
  std::vector<const TensorSpec*> specs;
  std::unordered_map<std::string, size_t> seen;
  for (const TensorValues& u : updates) {
    const auto it = by_name.find(u.name);
    if (it == by_name.end())
      fail("weight push: this model has no tensor \"{}\" (names are the checkpoint's, as the trainer's ParamSet "
           "holds them); nothing was changed", u.name);
    if (!seen.emplace(u.name, 0).second) fail("weight push: tensor \"{}\" is given twice; nothing was changed", u.name);
    const TensorSpec& s = schema[it->second];
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    if (int64_t(u.values.size()) != numel)
      fail("weight push: tensor \"{}\" takes {} values (shape [{}]), {} given; nothing was changed", u.name, numel,
           fmt::join(s.shape, ", "), u.values.size());
    const Home h = home_of(w, cfg, s);
    if (h.view && !writable_dtype(h.view->dtype))
      fail("weight push: tensor \"{}\" is stored as {} (block-scaled); a push cannot re-derive its scales. Load an "
           "F32, F16 or BF16 checkpoint (or a GGUF block type) for RL; nothing was changed", u.name,
           dtype_name(h.view->dtype));
    specs.push_back(&s);
  }
  // 2. Write.
  const void* embed_before = w.embed.data;
  const TensorValues* embed_update = nullptr;
  for (size_t i = 0; i < updates.size(); ++i) {
    const Home h = home_of(w, cfg, *specs[i]);
    const std::span<const float> v = updates[i].values;
    if (h.f32) {
      float* dst = h.f32->f32();
      for (size_t k = 0; k < v.size(); ++k) dst[k] = v[k] + h.offset;
    } else {
      write_view(w, h.view, v);
    }
    if (specs[i]->role == TensorRole::kEmbed) embed_update = &updates[i];
  }
  // A tied lm_head reads the embedding (load_weights: lm_head.w = embed), or a re-encoded copy of it.
  if (cfg.tie_word_embeddings && embed_update) {
    if (w.lm_head.w.data == embed_before) w.lm_head.w = w.embed;
    else write_view(w, &w.lm_head.w, embed_update->values);
  }
}

}  // namespace mmx
