// Loading MiniMax-M2 (spec §4.3), Text-01/M1 (spec §3.2) and M3 (spec §5.3) weights: every tensor
// of the checkpoint schema (model/schema.h) by role, with shape/dtype checks. Gemma (1 + w) norm
// gains are folded here.
#include "model/weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "formats/hf_view.h"
#include "model/schema.h"

namespace mmx {

namespace {

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

class Loader {
 public:
  Loader(const TensorStore& store, const ModelConfig& cfg, std::vector<Buffer>& copies)
      : store_(store), cfg_(cfg), copies_(copies) {}

  // The tensor of `spec` (its HF name), checked to have `shape`.
  Tensor get(const TensorSpec& spec, const std::vector<int64_t>& shape) const {
    if (store_.gguf()) return get_gguf(spec, shape);
    return get(spec.name, shape);
  }
  Tensor get(const std::string& name, const std::vector<int64_t>& shape) const {
    if (!store_.has(name))
      fail("missing tensor \"{}\" (expected shape {}); the checkpoint does not match config.json",
           name, shape_str(shape));
    const TensorInfo& info = store_.info(name);
    if (info.shape != shape)
      fail("tensor \"{}\" in {} has shape {}, but config.json implies {}", name, store_.file_of(name),
           shape_str(info.shape), shape_str(shape));
    Tensor t = store_.tensor(name);
    // Files written by the safetensors library align every tensor to its element size; a
    // hand-made file may not. Kernels load whole elements, so misaligned tensors get a copy.
    const size_t es = dtype_is_quant(t.dtype) ? 1 : dtype_size(t.dtype);
    if (es > 1 && reinterpret_cast<uintptr_t>(t.data) % es != 0) {
      Buffer b(t.dtype, {t.numel()});
      std::memcpy(b.t().data, t.data, t.size_bytes());
      Tensor c = b.t();
      c.ndim = t.ndim;
      c.shape = t.shape;
      copies_.push_back(std::move(b));
      return c;
    }
    return t;
  }

  // The GGUF twin of `spec` (model/schema.h); an expert is a slice of its layer's stacked
  // [n_experts, ...] tensor. GGUF data is aligned, so views never need a copy.
  Tensor get_gguf(const TensorSpec& spec, const std::vector<int64_t>& shape) const {
    const std::string& file = store_.gguf()->path();
    const std::string& g = spec.gguf_name;
    if (g.empty())
      fail("GGUF file '{}': the model needs \"{}\", which has no minimax-m2 GGUF name", file, spec.name);
    std::vector<int64_t> want = shape;
    if (spec.gguf_expert >= 0) want.insert(want.begin(), cfg_.n_experts);
    if (!store_.has(g))
      fail("GGUF file '{}': missing tensor '{}' (expected shape {}); the file does not hold the "
           "model its metadata describes", file, g, shape_str(want));
    const TensorInfo& info = store_.info(g);
    if (info.shape != want)
      fail("GGUF file '{}': tensor '{}' has shape {}, but the metadata implies {}", file, g,
           shape_str(info.shape), shape_str(want));
    Tensor t = store_.tensor(g);
    return spec.gguf_expert >= 0 ? t.slice0(spec.gguf_expert) : t;
  }

  // A norm gain as F32; Gemma-style (1 + w) offsets are folded in (spec §2).
  Buffer norm(const TensorSpec& s) const {
    Buffer b = get_f32(s);
    if (cfg_.gemma_norm)
      for (int64_t i = 0; i < b.t().numel(); ++i) b.f32()[i] += 1.0f;
    return b;
  }

  // A small tensor (norm gain, router, bias) converted to F32.
  Buffer get_f32(const TensorSpec& s) const {
    Tensor t = get(s, s.shape);
    check_float(s.name, t, /*allow_fp8=*/false);
    MMX_CHECK(s.shape.size() == 1 || s.shape.size() == 2, "{}: rank {}", s.name, s.shape.size());
    Buffer b = s.shape.size() == 1 ? Buffer(DType::kF32, {s.shape[0]}) : Buffer(DType::kF32, {s.shape[0], s.shape[1]});
    ops::to_f32(t, b.t());
    return b;
  }

  // A linear weight [n_out, n_in]; F8E4M3 needs its `<name>_scale_inv` block scales.
  ops::Linear linear(const TensorSpec& s) const {
    MMX_CHECK(s.shape.size() == 2, "{} is not a matrix", s.name);
    const std::string& name = s.name;
    const int64_t n_out = s.shape[0], n_in = s.shape[1];
    ops::Linear l;
    l.w = get(s, s.shape);
    check_float(name, l.w, /*allow_fp8=*/true);
    if (l.w.dtype == DType::kF8E4M3) {
      if (!cfg_.fp8.enabled)
        fail("tensor \"{}\" is F8_E4M3 but config.json has no fp8 quantization_config (block size "
             "unknown)", name);
      l.block_out = cfg_.fp8.block_out;
      l.block_in = cfg_.fp8.block_in;
      const std::string sname = name + "_scale_inv";
      const int64_t so = (n_out + l.block_out - 1) / l.block_out;
      const int64_t si = (n_in + l.block_in - 1) / l.block_in;
      l.scale = get(sname, {so, si});
      if (cfg_.fp8.mx) {
        l.scale = e8m0_to_f32(sname, l.scale);
      } else if (l.scale.dtype != DType::kF32) {
        fail("tensor \"{}\" must be F32 block scales, found {}", sname, dtype_name(l.scale.dtype));
      }
    } else if (store_.has(name + "_scale_inv")) {
      fail("tensor \"{}\" is {} but has a weight_scale_inv sibling; only F8_E4M3 weights carry "
           "scales", name, dtype_name(l.w.dtype));
    }
    return l;
  }

 private:
  // MXFP8 scales: one E8M0 byte e per 1x32 block, value 2^(e - 127) (spec §5.2); 255 is NaN.
  Tensor e8m0_to_f32(const std::string& name, const Tensor& t) const {
    if (t.dtype != DType::kU8)
      fail("tensor \"{}\" must be U8 E8M0 scales for mxfp8, found {}", name, dtype_name(t.dtype));
    Buffer b(DType::kF32, {t.dim(0), t.dim(1)});
    const uint8_t* e = t.ptr<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (e[i] == 255) fail("tensor \"{}\" holds the E8M0 NaN code 255 at element {}", name, i);
      b.f32()[i] = std::ldexp(1.0f, int(e[i]) - 127);
    }
    Tensor v = b.t();
    copies_.push_back(std::move(b));
    return v;
  }

  void check_float(const std::string& name, const Tensor& t, bool allow_fp8) const {
    const DType d = t.dtype;
    // allow_fp8: a linear weight, which may also be GGUF block-quantized.
    const bool ok = d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 ||
                    (allow_fp8 && (d == DType::kF8E4M3 || dtype_is_quant(d)));
    if (!ok)
      fail("tensor \"{}\" has dtype {}, expected {}", name, dtype_name(d),
           allow_fp8 ? "F32, F16, BF16, F8_E4M3 or a GGUF block type" : "F32, F16 or BF16");
  }

  const TensorStore& store_;
  const ModelConfig& cfg_;
  std::vector<Buffer>& copies_;
};

}  // namespace

ModelWeights load_weights(const std::string& dir, const ModelConfig& cfg,
                          void (*progress)(int, int), bool huge_pages) {
  ModelWeights mw(TensorStore::open(dir));
  if (huge_pages) mw.store.to_huge_pages();
  const Loader ld(mw.store, cfg, mw.copies);
  mw.layers.resize(cfg.n_layers);
  const std::vector<TensorSpec> schema = checkpoint_schema(cfg);
  for (size_t i = 0; i < schema.size(); ++i) {
    const TensorSpec& s = schema[i];
    const std::vector<int64_t>& sh = s.shape;
    LayerWeights* lw = s.layer >= 0 ? &mw.layers[size_t(s.layer)] : nullptr;
    if (s.expert >= 0 && lw->moe.experts.empty()) lw->moe.experts.resize(size_t(cfg.n_experts));
    switch (s.role) {
      case TensorRole::kEmbed: {
        mw.embed = ld.get(s, sh);
        const DType t = mw.embed.dtype;
        if (t == DType::kF8E4M3 || t == DType::kI32 || t == DType::kI64 || t == DType::kU8)
          fail("{} has dtype {}, expected F32, F16 or BF16", s.name, dtype_name(t));
        break;
      }
      case TensorRole::kAttnNorm: lw->attn_norm = ld.norm(s); break;
      case TensorRole::kFfnNorm: lw->ffn_norm = ld.norm(s); break;
      case TensorRole::kQ: lw->attn.q = ld.linear(s); break;
      case TensorRole::kK: lw->attn.k = ld.linear(s); break;
      case TensorRole::kV: lw->attn.v = ld.linear(s); break;
      case TensorRole::kO: lw->attn.o = ld.linear(s); break;
      case TensorRole::kQNorm: lw->attn.q_norm = ld.norm(s); break;
      case TensorRole::kKNorm: lw->attn.k_norm = ld.norm(s); break;
      case TensorRole::kIndexQ: lw->attn.iq = ld.linear(s); break;
      case TensorRole::kIndexK: lw->attn.ik = ld.linear(s); break;
      case TensorRole::kIndexQNorm: lw->attn.iq_norm = ld.norm(s); break;
      case TensorRole::kIndexKNorm: lw->attn.ik_norm = ld.norm(s); break;
      case TensorRole::kLinQkv: lw->lin.qkv = ld.linear(s); break;
      case TensorRole::kLinGate: lw->lin.gate = ld.linear(s); break;
      case TensorRole::kLinNorm: lw->lin.norm = ld.get_f32(s); break;  // no Gemma offset (spec §3.2)
      case TensorRole::kLinOut: lw->lin.out = ld.linear(s); break;
      case TensorRole::kMlpGate: lw->mlp.gate = ld.linear(s); break;
      case TensorRole::kMlpUp: lw->mlp.up = ld.linear(s); break;
      case TensorRole::kMlpDown: lw->mlp.down = ld.linear(s); break;
      case TensorRole::kRouter:
        lw->moe.gate_f32 = ld.get_f32(s);
        lw->moe.gate.w = lw->moe.gate_f32.t();
        break;
      case TensorRole::kRouterBias: lw->moe.bias = ld.get_f32(s); break;
      case TensorRole::kExpertGate: lw->moe.experts[size_t(s.expert)].w1 = ld.linear(s); break;
      case TensorRole::kExpertDown: lw->moe.experts[size_t(s.expert)].w2 = ld.linear(s); break;
      case TensorRole::kExpertUp: lw->moe.experts[size_t(s.expert)].w3 = ld.linear(s); break;
      case TensorRole::kSharedGate: lw->moe.shared.gate = ld.linear(s); break;
      case TensorRole::kSharedUp: lw->moe.shared.up = ld.linear(s); break;
      case TensorRole::kSharedDown: lw->moe.shared.down = ld.linear(s); break;
      case TensorRole::kFinalNorm: mw.final_norm = ld.norm(s); break;
      case TensorRole::kLmHead: mw.lm_head = ld.linear(s); break;
    }
    const bool layer_done = s.layer >= 0 && (i + 1 == schema.size() || schema[i + 1].layer != s.layer);
    if (progress && layer_done) progress(s.layer + 1, cfg.n_layers);
  }
  if (cfg.tie_word_embeddings) mw.lm_head.w = mw.embed;
  return mw;
}

ParamCounts count_params(const ModelConfig& c) {
  ParamCounts p;
  const int64_t d = c.d_model, L = c.n_layers;
  p.embedding = c.vocab_size * d;
  p.lm_head = c.tie_word_embeddings ? 0 : c.vocab_size * d;
  const int64_t qk_norm = !c.use_qk_norm ? 0 : c.qk_norm_per_head ? 2 * c.head_dim : c.q_dim() + c.kv_dim();
  const int64_t softmax = c.q_dim() * d + 2 * c.kv_dim() * d + d * c.q_dim() + qk_norm;
  const int64_t index = int64_t(c.msa.index_heads + 1) * c.msa.index_dim * d + 2 * c.msa.index_dim;
  const int64_t lightning = 3 * c.q_dim() * d + c.q_dim() * d + d * c.q_dim() + c.q_dim();
  const int n_lin = c.count_layers(LayerKind::kLightning);
  const int n_sparse = c.count_layers(LayerKind::kSparse);
  p.attention = (L - n_lin) * softmax + n_lin * lightning + n_sparse * index;
  p.norms = L * 2 * d + d;
  int64_t n_moe = 0;
  for (int il = 0; il < L; ++il) n_moe += c.is_moe_layer(il);
  p.router = n_moe * (int64_t(c.n_experts) * d + (c.use_routing_bias ? c.n_experts : 0));
  const int64_t expert = 3 * c.ffn_dim * d;
  p.experts = n_moe * c.n_experts * expert;
  p.experts_active = n_moe * c.n_experts_active * expert;
  p.dense_mlp = (L - n_moe) * 3 * c.dense_ffn_dim * d + n_moe * 3 * c.shared_ffn_dim * d;
  return p;
}

}  // namespace mmx
