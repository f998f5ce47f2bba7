// Loading MiniMax-M2 (spec §4.3), Text-01/M1 (spec §3.2) and M3 (spec §5.3) weights by their
// Hugging Face names, with shape/dtype checks. Gemma (1 + w) norm gains are folded here.
#include "model/weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "formats/hf_view.h"

namespace mmx {

namespace {

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

class Loader {
 public:
  Loader(const TensorStore& store, const ModelConfig& cfg, std::vector<Buffer>& copies)
      : store_(store), cfg_(cfg), copies_(copies) {}

  // The tensor `name` (an HF name), checked to have `shape`.
  Tensor get(const std::string& name, const std::vector<int64_t>& shape) const {
    if (store_.gguf()) return get_gguf(name, shape);
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

  // The GGUF twin of HF tensor `name` (formats/hf_view.h); an expert is a slice of its layer's
  // stacked [n_experts, ...] tensor. GGUF data is aligned, so views never need a copy.
  Tensor get_gguf(const std::string& name, const std::vector<int64_t>& shape) const {
    const std::string& file = store_.gguf()->path();
    gguf::GgufName g;
    if (!gguf::gguf_name_of(name, &g))
      fail("GGUF file '{}': the model needs \"{}\", which has no minimax-m2 GGUF name", file, name);
    std::vector<int64_t> want = shape;
    if (g.expert >= 0) want.insert(want.begin(), cfg_.n_experts);
    if (!store_.has(g.name))
      fail("GGUF file '{}': missing tensor '{}' (expected shape {}); the file does not hold the "
           "model its metadata describes", file, g.name, shape_str(want));
    const TensorInfo& info = store_.info(g.name);
    if (info.shape != want)
      fail("GGUF file '{}': tensor '{}' has shape {}, but the metadata implies {}", file, g.name,
           shape_str(info.shape), shape_str(want));
    Tensor t = store_.tensor(g.name);
    return g.expert >= 0 ? t.slice0(g.expert) : t;
  }

  // A norm gain as F32; Gemma-style (1 + w) offsets are folded in (spec §2).
  Buffer norm(const std::string& name, int64_t n) const {
    Buffer b = get_f32(name, n);
    if (cfg_.gemma_norm)
      for (int64_t i = 0; i < n; ++i) b.f32()[i] += 1.0f;
    return b;
  }

  // A small tensor (norm gain, router, bias) converted to F32.
  Buffer get_f32(const std::string& name, int64_t n) const {
    Tensor t = get(name, {n});
    check_float(name, t, /*allow_fp8=*/false);
    Buffer b(DType::kF32, {n});
    ops::to_f32(t, b.t());
    return b;
  }
  Buffer get_f32_2d(const std::string& name, int64_t rows, int64_t cols) const {
    Tensor t = get(name, {rows, cols});
    check_float(name, t, false);
    Buffer b(DType::kF32, {rows, cols});
    ops::to_f32(t, b.t());
    return b;
  }

  // A linear weight [n_out, n_in]; F8E4M3 needs its `<name>_scale_inv` block scales.
  ops::Linear linear(const std::string& name, int64_t n_out, int64_t n_in) const {
    ops::Linear l;
    l.w = get(name, {n_out, n_in});
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
  const int64_t d = cfg.d_model, qd = cfg.q_dim(), kvd = cfg.kv_dim(), f = cfg.ffn_dim;
  const std::string& pre = cfg.tensor_prefix;  // "language_model." for M3, else ""

  mw.embed = ld.get(pre + "model.embed_tokens.weight", {cfg.vocab_size, d});
  if (mw.embed.dtype == DType::kF8E4M3 || mw.embed.dtype == DType::kI32 || mw.embed.dtype == DType::kI64 ||
      mw.embed.dtype == DType::kU8)
    fail("model.embed_tokens.weight has dtype {}, expected F32, F16 or BF16", dtype_name(mw.embed.dtype));
  mw.layers.resize(cfg.n_layers);
  for (int il = 0; il < cfg.n_layers; ++il) {
    const std::string p = fmt::format("{}model.layers.{}.", pre, il);
    LayerWeights& lw = mw.layers[il];
    lw.attn_norm = ld.norm(p + "input_layernorm.weight", d);
    lw.ffn_norm = ld.norm(p + "post_attention_layernorm.weight", d);
    if (cfg.layer_kinds[il] == LayerKind::kLightning) {
      LightningWeights& a = lw.lin;
      a.qkv = ld.linear(p + "self_attn.qkv_proj.weight", 3 * qd, d);
      a.gate = ld.linear(p + "self_attn.output_gate.weight", qd, d);
      a.out = ld.linear(p + "self_attn.out_proj.weight", d, qd);
      a.norm = ld.get_f32(p + "self_attn.norm.weight", qd);
    } else {
      AttentionWeights& a = lw.attn;
      a.q = ld.linear(p + "self_attn.q_proj.weight", qd, d);
      a.k = ld.linear(p + "self_attn.k_proj.weight", kvd, d);
      a.v = ld.linear(p + "self_attn.v_proj.weight", kvd, d);
      a.o = ld.linear(p + "self_attn.o_proj.weight", d, qd);
      if (cfg.use_qk_norm) {
        a.q_norm = ld.norm(p + "self_attn.q_norm.weight", cfg.qk_norm_per_head ? cfg.head_dim : qd);
        a.k_norm = ld.norm(p + "self_attn.k_norm.weight", cfg.qk_norm_per_head ? cfg.head_dim : kvd);
      }
      if (cfg.layer_kinds[il] == LayerKind::kSparse) {
        const int64_t di = cfg.msa.index_dim;
        a.iq = ld.linear(p + "self_attn.index_q_proj.weight", cfg.msa.index_heads * di, d);
        a.ik = ld.linear(p + "self_attn.index_k_proj.weight", di, d);
        a.iq_norm = ld.norm(p + "self_attn.index_q_norm.weight", di);
        a.ik_norm = ld.norm(p + "self_attn.index_k_norm.weight", di);
      }
    }
    if (!cfg.is_moe_layer(il)) {
      lw.mlp.gate = ld.linear(p + "mlp.gate_proj.weight", cfg.dense_ffn_dim, d);
      lw.mlp.up = ld.linear(p + "mlp.up_proj.weight", cfg.dense_ffn_dim, d);
      lw.mlp.down = ld.linear(p + "mlp.down_proj.weight", d, cfg.dense_ffn_dim);
      if (progress) progress(il + 1, cfg.n_layers);
      continue;
    }
    MoeWeights& m = lw.moe;
    const std::string mp = p + "block_sparse_moe.";
    m.gate_f32 = ld.get_f32_2d(mp + "gate.weight", cfg.n_experts, d);
    m.gate.w = m.gate_f32.t();
    if (cfg.use_routing_bias) m.bias = ld.get_f32(mp + "e_score_correction_bias", cfg.n_experts);
    m.experts.resize(cfg.n_experts);
    for (int e = 0; e < cfg.n_experts; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", mp, e);
      m.experts[e].w1 = ld.linear(ep + "w1.weight", f, d);
      m.experts[e].w3 = ld.linear(ep + "w3.weight", f, d);
      m.experts[e].w2 = ld.linear(ep + "w2.weight", d, f);
    }
    if (cfg.shared_ffn_dim > 0) {
      const std::string sp = mp + "shared_experts.";
      m.shared.gate = ld.linear(sp + "gate_proj.weight", cfg.shared_ffn_dim, d);
      m.shared.up = ld.linear(sp + "up_proj.weight", cfg.shared_ffn_dim, d);
      m.shared.down = ld.linear(sp + "down_proj.weight", d, cfg.shared_ffn_dim);
    }
    if (progress) progress(il + 1, cfg.n_layers);
  }
  mw.final_norm = ld.norm(pre + "model.norm.weight", d);
  if (cfg.tie_word_embeddings) {
    mw.lm_head.w = mw.embed;
  } else {
    mw.lm_head = ld.linear(pre + "lm_head.weight", cfg.vocab_size, d);
  }
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
