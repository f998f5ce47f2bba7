// The checkpoint schema: every tensor a model family's checkpoint holds, by role, with its Hugging
// Face name, shape, how it is trained and saved, and its GGUF name. ONE table per family
// (schema.cpp, as llama.cpp's llama-arch.cpp lists LLM_TENSOR_NAMES per architecture); the weight
// loader, the trainer's parameter layout and graphs, the tiny checkpoint writers, the GGUF name
// map and converter all read it, so a tensor name is written in one place only.
//
// Not here: how a tensor is used (model/families, model/layers, train/graph_*), file formats
// (safetensors / GGUF bytes and metadata), the config keys (model/config*).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace mmx {

// What a tensor is, independent of how a family spells it. Per-layer roles are indexed by layer;
// the three expert roles also by expert.
enum class TensorRole : uint8_t {
  kEmbed,      // [vocab, d] token embedding
  kAttnNorm,   // [d] gain before attention
  kFfnNorm,    // [d] gain before the MoE / MLP
  kQ, kK, kV, kO,         // softmax / sparse attention projections
  kQNorm, kKNorm,         // QK-norm gains: [q_dim] / [kv_dim], or [head_dim] when per head (M3)
  kIndexQ, kIndexK,       // MSA index branch (M3 sparse layers): [index_heads*index_dim, d], [index_dim, d]
  kIndexQNorm, kIndexKNorm,  // [index_dim] gains
  kLinQkv, kLinGate, kLinNorm, kLinOut,  // lightning attention (Text-01): fused qkv, output gate, inner norm, out
  kMlpGate, kMlpUp, kMlpDown,            // dense MLP (M3 dense layers)
  kRouter,      // [n_experts, d] router weight
  kRouterBias,  // [n_experts] selection-only routing bias
  kExpertGate, kExpertDown, kExpertUp,   // routed expert e: w1 [ffn, d], w2 [d, ffn], w3 [ffn, d]
  kSharedGate, kSharedUp, kSharedDown,   // shared expert (M3)
  kFinalNorm,  // [d]
  kLmHead,     // [vocab, d] (absent when tied)
};

// How a tensor is stored: what a loader converts and a writer quantizes.
enum class TensorKind : uint8_t {
  kEmbedding,  // row lookup table, kept in its storage dtype (never FP8)
  kLinear,     // weight matrix [n_out, n_in]: storage dtype kept, FP8 with `<name>_scale_inv`, GGUF quants
  kGain,       // norm gain, F32 at load (Gemma (1 + w) offset folded where the family does)
  kRouter,     // router weight, F32 at load (and F32 in the released sigmoid-router checkpoints)
  kBias,       // routing bias, F32
};

// How the trainer fills a tensor when training from scratch.
enum class Init : uint8_t {
  kFanIn,      // N(0, 1/fan_in): input-side matrices
  kResidual,   // N(0, 1/fan_in) / sqrt(2·n_layers): matrices that write the residual stream (GPT-2)
  kEmbedding,  // N(0, 1)
  kOnes,       // norm gains
  kZeros,      // routing bias; Gemma-style gains stored as w with (1 + w) applied
};

struct TensorSpec {
  TensorRole role = TensorRole::kEmbed;
  int layer = -1;              // -1 for the model-level tensors
  int expert = -1;             // >= 0 for the routed-expert roles
  std::string name;            // checkpoint (HF) name
  std::vector<int64_t> shape;  // as in the checkpoint
  TensorKind kind = TensorKind::kLinear;
  Init init = Init::kFanIn;
  bool decay = false;          // AdamW weight decay applies (matrices; not norms, not the bias)
  bool trainable = true;       // false: updated outside the gradient (the routing bias, spec §4.4)
  bool keep_f32 = false;       // F32 even in a BF16 checkpoint (router of sigmoid families, bias)
  std::string gguf_name;       // GGUF tensor, "" when the family has no GGUF form
  int gguf_expert = -1;        // >= 0: this expert's slice of a stacked [n_experts, ...] GGUF tensor
};

// Every tensor the config implies, in checkpoint order (the order the trainer lays parameters out
// and the tiny writers draw them). Throws mmx::Error if the family has no table.
std::vector<TensorSpec> checkpoint_schema(const ModelConfig& cfg);

// The checkpoint name of one tensor (il: layer, e: expert, -1 when not per layer / per expert).
// Throws mmx::Error naming the role when the family has no such tensor.
std::string tensor_name(const ModelConfig& cfg, TensorRole role, int il = -1, int e = -1);
std::string tensor_name(Family family, TensorRole role, int il = -1, int e = -1);
// The GGUF name of a model-level tensor of `family` ("" when it has none), for readers that only
// know the architecture (GGUF metadata -> config).
std::string gguf_tensor_name(Family family, TensorRole role);

// One GGUF tensor of a conversion, in GGUF file order (llama.cpp's), with its HF sources: one, or
// the n_experts experts stacked on a new outer dim (`stacked`).
struct GgufTensorPlan {
  std::string gguf;
  std::vector<std::string> hf;
  TensorRole role = TensorRole::kEmbed;
  int layer = -1;  // blk index, -1 for the model-level tensors
  bool stacked = false;
};
// The GGUF tensors of the schema of `cfg`. Throws mmx::Error when the family has no GGUF form.
std::vector<GgufTensorPlan> gguf_tensor_plan(const ModelConfig& cfg);

// Parts of a checkpoint that the text model does not read (M3's vision-language wrapper).
enum class ForeignPart : uint8_t { kVisionTower, kProjector, kPatchMerge, kMtp };
// True when `name` belongs to such a part of a `cfg`-family checkpoint.
bool is_foreign_tensor(const ModelConfig& cfg, const std::string& name);
// The name of tensor `rest` under `part` (for the tiny writers, which write stand-ins). Throws mmx::Error
// when the family has no such part.
std::string foreign_tensor_name(const ModelConfig& cfg, ForeignPart part, const std::string& rest);

// The modules a quantized checkpoint of `family` leaves unquantized, as its quantization_config
// lists them (modules_to_not_convert / ignored_layers), for writers of such configs.
std::vector<std::string> quant_skip_modules(Family family);

}  // namespace mmx
