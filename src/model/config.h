// ModelConfig: the Hugging Face config.json, parsed and normalized ONCE at load (DESIGN rule 6).
//
// After parse_config() nothing downstream reads JSON or compares architecture strings: the
// forward pass sees only these fields. Unsupported values with a real effect on the math are
// refused here with a message that says what is wrong; keys known to have no effect on
// inference are accepted silently; unknown keys are listed as warnings (they may matter).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace mmx {

enum class Family : uint8_t {
  kMiniMaxM2,      // MiniMax-M2 / M2.1 / M2.5 / M2.7 (spec §4)
  kMiniMaxText01,  // MiniMax-Text-01 and MiniMax-M1: lightning + softmax hybrid (spec §3)
  kMiniMaxM3,      // MiniMax-M3 text backbone: dense + MiniMax Sparse Attention layers (spec §5)
};
enum class LayerKind : uint8_t {
  kSoftmax,    // GQA softmax attention over a KV cache
  kLightning,  // linear attention with per-head decay over a fixed-size state (Text-01)
  kSparse,     // MiniMax Sparse Attention: indexer picks top-k KV blocks per GQA group (M3)
};
enum class FfnAct : uint8_t {
  kSiluGlu,    // silu(gate) · up (M2, Text-01)
  kSwigluOai,  // (clamp(up) + 1) · min(gate, limit) · sigmoid(alpha · min(gate, limit)) (M3)
};
enum class RouterKind : uint8_t {
  kSigmoidBias,  // sigmoid scores, selection-only bias (M2, M3)
  kSoftmax,      // softmax over all experts, top-k renormalised (Text-01 / M1)
};

// Residual update of one sub-layer (spec §3.3): out = alpha · r + beta · branch, where r is the
// sub-layer's normed input when `postnorm`, else its un-normed input. Pre-norm families use
// alpha = beta = 1 with postnorm = false.
struct ResidualScale {
  float alpha = 1.0f;
  float beta = 1.0f;
};

struct Fp8Quant {
  bool enabled = false;
  bool mx = false;      // MXFP8 (M3): U8 E8M0 scales (2^(e-127)) per 1x32, instead of F32 scales
  int block_out = 128;  // quantization_config.weight_block_size[0]
  int block_in = 128;   // quantization_config.weight_block_size[1]
};

// MiniMax Sparse Attention (spec §5.6): sparse_attention_config.
struct MsaConfig {
  int index_heads = 0;  // sparse_num_index_heads (== num_key_value_heads: one selection per group)
  int index_dim = 0;    // sparse_index_dim
  int topk = 0;         // sparse_topk_blocks (K, the local block included)
  int block = 0;        // sparse_block_size (B tokens per block = per KV page)
};

struct ModelConfig {
  std::string architecture;  // HF architectures[0], e.g. "MiniMaxM2ForCausalLM"
  Family family = Family::kMiniMaxM2;

  int64_t vocab_size = 0;
  int64_t d_model = 0;        // hidden_size
  int n_layers = 0;           // num_hidden_layers
  int n_heads = 0;            // num_attention_heads
  int n_kv_heads = 0;         // num_key_value_heads
  int head_dim = 0;
  int rotary_dim = 0;         // channels rotated per head (partial NeoX RoPE)
  double rope_theta = 0;
  int64_t max_position = 0;   // max_position_embeddings
  float norm_eps = 1e-6f;     // rms_norm_eps

  // attention
  bool use_qk_norm = true;    // RMSNorm over the whole q / k projection (qk_norm_type "per_layer")
  std::vector<LayerKind> layer_kinds;  // [n_layers]

  // Text-01 / M1 only (spec §3.3, §3.5)
  bool postnorm = false;          // residual carries the normed value
  ResidualScale res_softmax;      // layernorm_full_attention_alpha/_beta
  ResidualScale res_lightning;    // layernorm_linear_attention_alpha/_beta
  ResidualScale res_mlp;          // layernorm_mlp_alpha/_beta
  int lightning_block = 256;      // chunk length of the blockwise lightning prefill (`block`)
  float lightning_norm_eps = 1e-6f;  // inner RMSNorm over all heads (spec §8: reference 1e-6)

  // M3 only (spec §5)
  bool qk_norm_per_head = false;  // qk_norm_type "per_head": one [head_dim] gain shared by heads
  bool gemma_norm = false;        // use_gemma_norm: (1 + w) gains, folded into the weights at load
  MsaConfig msa;
  std::vector<bool> moe_layers;   // [n_layers] false: dense MLP (moe_layer_freq 0); empty: all MoE
  int64_t dense_ffn_dim = 0;      // dense_intermediate_size
  int64_t shared_ffn_dim = 0;     // shared expert width (0 = none)
  FfnAct ffn_act = FfnAct::kSiluGlu;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;

  // MoE
  int64_t ffn_dim = 0;        // intermediate_size, per expert
  int n_experts = 0;          // num_local_experts
  int n_experts_active = 0;   // num_experts_per_tok
  RouterKind router = RouterKind::kSigmoidBias;
  bool use_routing_bias = true;
  float routed_scaling_factor = 1.0f;

  bool tie_word_embeddings = false;
  Fp8Quant fp8;
  std::vector<std::string> fp8_skip_modules;  // quantization_config.modules_to_not_convert

  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  // MTP keys are declared by the released M2 configs but no weights ship (spec §4.6).
  int n_mtp_modules = 0;

  std::vector<std::string> warnings;  // unknown keys etc., printed by the CLI

  int64_t q_dim() const { return int64_t(n_heads) * head_dim; }
  // Tokens per KV page of the block-major paged layout (M3: the MSA block; else 16).
  int kv_page() const { return msa.block > 0 ? msa.block : 16; }
  bool is_moe_layer(int il) const { return moe_layers.empty() || moe_layers[il]; }
  int count_layers(LayerKind k) const {
    int n = 0;
    for (LayerKind x : layer_kinds) n += x == k;
    return n;
  }
  int64_t kv_dim() const { return int64_t(n_kv_heads) * head_dim; }
};

// Parses config.json text. `where` names the file in error messages. Throws mmx::Error.
ModelConfig parse_config(const std::string& json_text, const std::string& where);
// The config.json of a checkpoint (DIR/config.json, or the one a GGUF file stands for), through
// the formats gateway (formats/checkpoint.h).
class Checkpoint;
ModelConfig load_config(const Checkpoint& ck);
ModelConfig load_config(const std::string& dir);  // load_config(open_checkpoint(dir))

// Human-readable summary (mmx inspect).
std::string config_summary(const ModelConfig& c);

}  // namespace mmx
