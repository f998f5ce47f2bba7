// The checkpoint schema (see schema.h): the Hugging Face names of the MiniMax lineage, one table
// per family (which tensors, in checkpoint order, and when), the GGUF names of the families that
// have a GGUF form (llama.cpp's, in its file order), and the rules every family shares (shapes,
// storage kind, training init). The mapping code is ours; the GGUF names are llama.cpp's
// (llama-arch.cpp, LLM_ARCH_MINIMAX_M2).
#include "model/schema.h"

#include <fmt/format.h>

#include <span>

#include "base/error.h"

namespace mmx {

namespace {

using R = TensorRole;

// When a row of a family table is present: every bit set must hold (for the row's layer).
enum When : uint16_t {
  kAlways = 0,
  kSoftmaxLayer = 1 << 0,    // softmax or sparse attention, not lightning
  kLightningLayer = 1 << 1,
  kSparseLayer = 1 << 2,     // MiniMax Sparse Attention
  kQkNorm = 1 << 3,          // use_qk_norm
  kMoeLayer = 1 << 4,
  kDenseLayer = 1 << 5,      // dense MLP instead of the MoE
  kRoutingBias = 1 << 6,     // use_routing_bias
  kSharedExpert = 1 << 7,    // shared_ffn_dim > 0
  kUntied = 1 << 8,          // !tie_word_embeddings
};

struct Row {
  R role;
  uint16_t when;
};
struct RoleName {
  R role;
  const char* name;
};
struct Foreign {
  ForeignPart part;
  const char* prefix;
  bool under_prefix;  // after the family's tensor prefix
};

// ---- names ----

// Hugging Face names of the MiniMax lineage (M2, Text-01 / M1 and M3 spell them alike):
// model-level tensors in full, per-layer ones after "model.layers.<il>.", expert ones after
// "model.layers.<il>.block_sparse_moe.experts.<e>.".
constexpr char kLayerPrefix[] = "model.layers.";
constexpr char kExpertPrefix[] = "block_sparse_moe.experts.";
constexpr RoleName kMiniMaxNames[] = {
    {R::kEmbed, "model.embed_tokens.weight"},
    {R::kAttnNorm, "input_layernorm.weight"},
    {R::kFfnNorm, "post_attention_layernorm.weight"},
    {R::kQ, "self_attn.q_proj.weight"},
    {R::kK, "self_attn.k_proj.weight"},
    {R::kV, "self_attn.v_proj.weight"},
    {R::kO, "self_attn.o_proj.weight"},
    {R::kQNorm, "self_attn.q_norm.weight"},
    {R::kKNorm, "self_attn.k_norm.weight"},
    {R::kIndexQ, "self_attn.index_q_proj.weight"},
    {R::kIndexK, "self_attn.index_k_proj.weight"},
    {R::kIndexQNorm, "self_attn.index_q_norm.weight"},
    {R::kIndexKNorm, "self_attn.index_k_norm.weight"},
    {R::kLinQkv, "self_attn.qkv_proj.weight"},
    {R::kLinGate, "self_attn.output_gate.weight"},
    {R::kLinNorm, "self_attn.norm.weight"},
    {R::kLinOut, "self_attn.out_proj.weight"},
    {R::kMlpGate, "mlp.gate_proj.weight"},
    {R::kMlpUp, "mlp.up_proj.weight"},
    {R::kMlpDown, "mlp.down_proj.weight"},
    {R::kRouter, "block_sparse_moe.gate.weight"},
    {R::kRouterBias, "block_sparse_moe.e_score_correction_bias"},
    {R::kExpertGate, "w1.weight"},
    {R::kExpertDown, "w2.weight"},
    {R::kExpertUp, "w3.weight"},
    {R::kSharedGate, "block_sparse_moe.shared_experts.gate_proj.weight"},
    {R::kSharedUp, "block_sparse_moe.shared_experts.up_proj.weight"},
    {R::kSharedDown, "block_sparse_moe.shared_experts.down_proj.weight"},
    {R::kFinalNorm, "model.norm.weight"},
    {R::kLmHead, "lm_head.weight"},
};

// ---- one table per family: its tensors in checkpoint order ----
// Model-level rows are listed first (before the layers) or last (after them) as scope_of() says;
// expert rows are consecutive and repeat per expert (e0: w1 w2 w3, e1: ...).

// MiniMax-M2 (spec §4.3): softmax GQA with per-layer QK-norm, sigmoid router + bias, every layer MoE.
constexpr Row kM2Rows[] = {
    {R::kEmbed, kAlways},
    {R::kAttnNorm, kAlways}, {R::kFfnNorm, kAlways},
    {R::kQ, kAlways}, {R::kK, kAlways}, {R::kV, kAlways}, {R::kO, kAlways},
    {R::kQNorm, kQkNorm}, {R::kKNorm, kQkNorm},
    {R::kRouter, kAlways}, {R::kRouterBias, kRoutingBias},
    {R::kExpertGate, kAlways}, {R::kExpertDown, kAlways}, {R::kExpertUp, kAlways},
    {R::kFinalNorm, kAlways}, {R::kLmHead, kUntied},
};
// llama.cpp's minimax-m2 tensors in its file order; per-layer names follow "blk.<il>.", the
// expert tensors stack all experts.
constexpr RoleName kM2Gguf[] = {
    {R::kEmbed, "token_embd.weight"},
    {R::kAttnNorm, "attn_norm.weight"},
    {R::kQ, "attn_q.weight"},
    {R::kK, "attn_k.weight"},
    {R::kV, "attn_v.weight"},
    {R::kO, "attn_output.weight"},
    {R::kQNorm, "attn_q_norm.weight"},
    {R::kKNorm, "attn_k_norm.weight"},
    {R::kFfnNorm, "ffn_norm.weight"},
    {R::kRouter, "ffn_gate_inp.weight"},
    {R::kRouterBias, "exp_probs_b.bias"},
    {R::kExpertGate, "ffn_gate_exps.weight"},
    {R::kExpertUp, "ffn_up_exps.weight"},
    {R::kExpertDown, "ffn_down_exps.weight"},
    {R::kFinalNorm, "output_norm.weight"},
    {R::kLmHead, "output.weight"},
};
constexpr const char* kM2QuantSkip[] = {"gate", "e_score_correction_bias", "lm_head"};

// MiniMax-Text-01 / M1 (spec §3.2): lightning layers (fused per-head interleaved qkv, output
// gate, inner norm, out) mixed with softmax layers; softmax router without bias.
constexpr Row kText01Rows[] = {
    {R::kEmbed, kAlways},
    {R::kAttnNorm, kAlways}, {R::kFfnNorm, kAlways},
    {R::kLinQkv, kLightningLayer}, {R::kLinGate, kLightningLayer},
    {R::kLinNorm, kLightningLayer}, {R::kLinOut, kLightningLayer},
    {R::kQ, kSoftmaxLayer}, {R::kK, kSoftmaxLayer}, {R::kV, kSoftmaxLayer}, {R::kO, kSoftmaxLayer},
    {R::kQNorm, kSoftmaxLayer | kQkNorm}, {R::kKNorm, kSoftmaxLayer | kQkNorm},
    {R::kRouter, kAlways}, {R::kRouterBias, kRoutingBias},
    {R::kExpertGate, kAlways}, {R::kExpertDown, kAlways}, {R::kExpertUp, kAlways},
    {R::kFinalNorm, kAlways}, {R::kLmHead, kUntied},
};

// MiniMax-M3 text backbone (spec §5.3) under the VL wrapper's "language_model.": per-head
// QK-norm, MSA index branch on sparse layers, dense MLP layers then MoE with a shared expert.
constexpr Row kM3Rows[] = {
    {R::kEmbed, kAlways},
    {R::kAttnNorm, kAlways}, {R::kFfnNorm, kAlways},
    {R::kQ, kAlways}, {R::kK, kAlways}, {R::kV, kAlways}, {R::kO, kAlways},
    {R::kQNorm, kQkNorm}, {R::kKNorm, kQkNorm},
    {R::kIndexQ, kSparseLayer}, {R::kIndexK, kSparseLayer},
    {R::kIndexQNorm, kSparseLayer}, {R::kIndexKNorm, kSparseLayer},
    {R::kMlpGate, kDenseLayer}, {R::kMlpUp, kDenseLayer}, {R::kMlpDown, kDenseLayer},
    {R::kRouter, kMoeLayer}, {R::kRouterBias, kMoeLayer | kRoutingBias},
    {R::kExpertGate, kMoeLayer}, {R::kExpertDown, kMoeLayer}, {R::kExpertUp, kMoeLayer},
    {R::kSharedGate, kMoeLayer | kSharedExpert}, {R::kSharedUp, kMoeLayer | kSharedExpert},
    {R::kSharedDown, kMoeLayer | kSharedExpert},
    {R::kFinalNorm, kAlways}, {R::kLmHead, kUntied},
};
// The VL wrapper's other parts (spec §5.9), not read by the text model.
constexpr Foreign kM3Foreign[] = {
    {ForeignPart::kVisionTower, "vision_tower.", false},
    {ForeignPart::kProjector, "multi_modal_projector.", false},
    {ForeignPart::kPatchMerge, "patch_merge_mlp.", false},
    {ForeignPart::kMtp, "model.mtp.", true},
};
constexpr const char* kM3QuantSkip[] = {"lm_head", "model.embed_tokens", "vision_tower"};

struct FamilyTable {
  Family family;
  const char* label;                    // for messages
  const char* prefix;                   // before every text-model name
  std::span<const RoleName> hf;         // role -> HF name (kLayerPrefix / kExpertPrefix rules)
  std::span<const Row> rows;            // checkpoint order
  std::span<const RoleName> gguf;       // GGUF file order; empty: no GGUF form
  std::span<const Foreign> foreign;
  std::span<const char* const> quant_skip;
};

const FamilyTable kFamilies[] = {
    {Family::kMiniMaxM2, "MiniMax-M2", "", kMiniMaxNames, kM2Rows, kM2Gguf, {}, kM2QuantSkip},
    {Family::kMiniMaxText01, "MiniMax-Text-01 / M1", "", kMiniMaxNames, kText01Rows, {}, {}, {}},
    {Family::kMiniMaxM3, "MiniMax-M3", "language_model.", kMiniMaxNames, kM3Rows, {}, kM3Foreign, kM3QuantSkip},
};

// ---- rules every family shares ----

enum class Scope : uint8_t { kHead, kLayer, kExpert, kTail };

Scope scope_of(R r) {
  switch (r) {
    case R::kEmbed: return Scope::kHead;
    case R::kFinalNorm:
    case R::kLmHead: return Scope::kTail;
    case R::kExpertGate:
    case R::kExpertDown:
    case R::kExpertUp: return Scope::kExpert;
    default: return Scope::kLayer;
  }
}

const FamilyTable& table_of(Family f) {
  for (const FamilyTable& t : kFamilies)
    if (t.family == f) return t;
  fail("no checkpoint schema for model family {}", int(f));
}

const char* find_name(std::span<const RoleName> names, R r) {
  for (const RoleName& n : names)
    if (n.role == r) return n.name;
  return nullptr;
}

bool has_row(const FamilyTable& t, R r) {
  for (const Row& row : t.rows)
    if (row.role == r) return true;
  return false;
}

std::string hf_name(const FamilyTable& t, R r, int il, int e) {
  const char* n = find_name(t.hf, r);
  MMX_CHECK(n != nullptr, "role {} has no name", int(r));
  const Scope s = scope_of(r);
  if (s == Scope::kHead || s == Scope::kTail) return fmt::format("{}{}", t.prefix, n);
  MMX_CHECK(il >= 0, "a per-layer tensor needs its layer");
  if (s == Scope::kLayer) return fmt::format("{}{}{}.{}", t.prefix, kLayerPrefix, il, n);
  MMX_CHECK(e >= 0, "an expert tensor needs its expert");
  return fmt::format("{}{}{}.{}{}.{}", t.prefix, kLayerPrefix, il, kExpertPrefix, e, n);
}

std::string gguf_name(const FamilyTable& t, R r, int il) {
  const char* n = find_name(t.gguf, r);
  if (n == nullptr) return "";
  const Scope s = scope_of(r);
  return s == Scope::kHead || s == Scope::kTail ? std::string(n) : fmt::format("blk.{}.{}", il, n);
}

bool holds(uint16_t when, const ModelConfig& c, int il) {
  const LayerKind k = il >= 0 ? c.layer_kinds[size_t(il)] : LayerKind::kSoftmax;
  if ((when & kSoftmaxLayer) && k == LayerKind::kLightning) return false;
  if ((when & kLightningLayer) && k != LayerKind::kLightning) return false;
  if ((when & kSparseLayer) && k != LayerKind::kSparse) return false;
  if ((when & kQkNorm) && !c.use_qk_norm) return false;
  if ((when & kMoeLayer) && !c.is_moe_layer(il)) return false;
  if ((when & kDenseLayer) && c.is_moe_layer(il)) return false;
  if ((when & kRoutingBias) && !c.use_routing_bias) return false;
  if ((when & kSharedExpert) && c.shared_ffn_dim <= 0) return false;
  if ((when & kUntied) && c.tie_word_embeddings) return false;
  return true;
}

std::vector<int64_t> shape_of(const ModelConfig& c, R r) {
  const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), V = c.vocab_size;
  const int64_t f = c.ffn_dim, E = c.n_experts, di = c.msa.index_dim;
  switch (r) {
    case R::kEmbed:
    case R::kLmHead: return {V, d};
    case R::kAttnNorm:
    case R::kFfnNorm:
    case R::kFinalNorm: return {d};
    case R::kQ: return {qd, d};
    case R::kK:
    case R::kV: return {kvd, d};
    case R::kO: return {d, qd};
    case R::kQNorm: return {c.qk_norm_per_head ? c.head_dim : qd};
    case R::kKNorm: return {c.qk_norm_per_head ? c.head_dim : kvd};
    case R::kIndexQ: return {int64_t(c.msa.index_heads) * di, d};
    case R::kIndexK: return {di, d};
    case R::kIndexQNorm:
    case R::kIndexKNorm: return {di};
    case R::kLinQkv: return {3 * qd, d};
    case R::kLinGate: return {qd, d};
    case R::kLinNorm: return {qd};
    case R::kLinOut: return {d, qd};
    case R::kMlpGate:
    case R::kMlpUp: return {c.dense_ffn_dim, d};
    case R::kMlpDown: return {d, c.dense_ffn_dim};
    case R::kRouter: return {E, d};
    case R::kRouterBias: return {E};
    case R::kExpertGate:
    case R::kExpertUp: return {f, d};
    case R::kExpertDown: return {d, f};
    case R::kSharedGate:
    case R::kSharedUp: return {c.shared_ffn_dim, d};
    case R::kSharedDown: return {d, c.shared_ffn_dim};
  }
  MMX_CHECK(false, "role {}", int(r));
  return {};
}

TensorSpec make_spec(const ModelConfig& c, const FamilyTable& t, R r, int il, int e) {
  TensorSpec s;
  s.role = r;
  s.layer = il;
  s.expert = e;
  s.name = hf_name(t, r, il, e);
  s.shape = shape_of(c, r);
  s.decay = s.shape.size() == 2;
  const Init gain = c.gemma_norm ? Init::kZeros : Init::kOnes;  // Gemma: w stored, 1 + w applied
  switch (r) {
    case R::kEmbed: s.kind = TensorKind::kEmbedding, s.init = Init::kEmbedding; break;
    case R::kAttnNorm: case R::kFfnNorm: case R::kQNorm: case R::kKNorm: case R::kIndexQNorm:
    case R::kIndexKNorm: case R::kLinNorm: case R::kFinalNorm:
      s.kind = TensorKind::kGain, s.init = gain;
      break;
    case R::kO: case R::kLinOut: case R::kMlpDown: case R::kExpertDown: case R::kSharedDown:
      s.kind = TensorKind::kLinear, s.init = Init::kResidual;
      break;
    case R::kRouter:
      s.kind = TensorKind::kRouter, s.init = Init::kFanIn;
      s.keep_f32 = c.router == RouterKind::kSigmoidBias;  // F32 in the released M2 / M3 checkpoints
      break;
    case R::kRouterBias:
      s.kind = TensorKind::kBias, s.init = Init::kZeros;
      s.trainable = false;  // the aux-loss-free update moves it (train/trainer.cpp)
      s.keep_f32 = true;
      break;
    default: s.kind = TensorKind::kLinear, s.init = Init::kFanIn; break;
  }
  s.gguf_name = gguf_name(t, r, il);
  if (!s.gguf_name.empty() && scope_of(r) == Scope::kExpert) s.gguf_expert = e;
  return s;
}

}  // namespace

std::vector<TensorSpec> checkpoint_schema(const ModelConfig& c) {
  const FamilyTable& t = table_of(c.family);
  MMX_CHECK(int(c.layer_kinds.size()) == c.n_layers, "layer_kinds {} for {} layers", c.layer_kinds.size(),
            c.n_layers);
  std::vector<TensorSpec> out;
  for (const Row& row : t.rows)
    if (scope_of(row.role) == Scope::kHead && holds(row.when, c, -1)) out.push_back(make_spec(c, t, row.role, -1, -1));
  for (int il = 0; il < c.n_layers; ++il) {
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const Scope s = scope_of(t.rows[i].role);
      if (s == Scope::kLayer && holds(t.rows[i].when, c, il)) out.push_back(make_spec(c, t, t.rows[i].role, il, -1));
      if (s != Scope::kExpert) continue;
      size_t end = i;
      while (end < t.rows.size() && scope_of(t.rows[end].role) == Scope::kExpert) ++end;
      for (int e = 0; e < c.n_experts; ++e)
        for (size_t j = i; j < end; ++j)
          if (holds(t.rows[j].when, c, il)) out.push_back(make_spec(c, t, t.rows[j].role, il, e));
      i = end - 1;
    }
  }
  for (const Row& row : t.rows)
    if (scope_of(row.role) == Scope::kTail && holds(row.when, c, -1)) out.push_back(make_spec(c, t, row.role, -1, -1));
  return out;
}

std::string tensor_name(Family family, TensorRole role, int il, int e) {
  const FamilyTable& t = table_of(family);
  if (!has_row(t, role)) fail("the {} checkpoint schema has no tensor of role {}", t.label, int(role));
  return hf_name(t, role, il, e);
}

std::string tensor_name(const ModelConfig& cfg, TensorRole role, int il, int e) {
  return tensor_name(cfg.family, role, il, e);
}

std::string gguf_tensor_name(Family family, TensorRole role) {
  MMX_CHECK(scope_of(role) == Scope::kHead || scope_of(role) == Scope::kTail, "model-level roles only");
  return gguf_name(table_of(family), role, -1);
}

std::vector<GgufTensorPlan> gguf_tensor_plan(const ModelConfig& c) {
  const FamilyTable& t = table_of(c.family);
  if (t.gguf.empty()) fail("{} checkpoints have no GGUF form (llama.cpp tensor names)", t.label);
  std::vector<std::vector<const TensorSpec*>> by_layer(size_t(c.n_layers) + 1);  // [0]: model-level
  const std::vector<TensorSpec> specs = checkpoint_schema(c);
  for (const TensorSpec& s : specs) by_layer[size_t(s.layer + 1)].push_back(&s);
  auto plan_of = [&](const RoleName& g, int il) {
    GgufTensorPlan p{gguf_name(t, g.role, il), {}, g.role, il, scope_of(g.role) == Scope::kExpert};
    for (const TensorSpec* s : by_layer[size_t(il + 1)])
      if (s->role == g.role) p.hf.push_back(s->name);
    return p;
  };
  std::vector<GgufTensorPlan> plan;
  auto add = [&](GgufTensorPlan p) {
    if (!p.hf.empty()) plan.push_back(std::move(p));
  };
  for (const RoleName& g : t.gguf)
    if (scope_of(g.role) == Scope::kHead) add(plan_of(g, -1));
  for (int il = 0; il < c.n_layers; ++il)
    for (const RoleName& g : t.gguf)
      if (scope_of(g.role) == Scope::kLayer || scope_of(g.role) == Scope::kExpert) add(plan_of(g, il));
  for (const RoleName& g : t.gguf)
    if (scope_of(g.role) == Scope::kTail) add(plan_of(g, -1));
  return plan;
}

bool is_foreign_tensor(const ModelConfig& cfg, const std::string& name) {
  const FamilyTable& t = table_of(cfg.family);
  for (const Foreign& f : t.foreign) {
    const std::string p = f.under_prefix ? std::string(t.prefix) + f.prefix : std::string(f.prefix);
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

std::string foreign_tensor_name(const ModelConfig& cfg, ForeignPart part, const std::string& rest) {
  const FamilyTable& t = table_of(cfg.family);
  for (const Foreign& f : t.foreign)
    if (f.part == part) return (f.under_prefix ? std::string(t.prefix) : std::string()) + f.prefix + rest;
  fail("{} checkpoints have no such non-text part ({})", t.label, int(part));
}

std::vector<std::string> quant_skip_modules(Family family) {
  const FamilyTable& t = table_of(family);
  return {t.quant_skip.begin(), t.quant_skip.end()};
}

}  // namespace mmx
