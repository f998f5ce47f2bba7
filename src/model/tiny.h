// Seeded tiny checkpoints in the real Hugging Face layout (`mmx make-tiny`).
//
// Real key names, tensor names and dtypes (spec §4.1/§4.3 for minimax_m2, §3.1/§3.2 for
// minimax_text01 / minimax_m1), small sizes. Used as the embedded default model of `make run` and
// by every model test (fresh checkpoints, never stale goldens).
#pragma once

#include <cstdint>
#include <string>

namespace mmx {

// The defaults are the M2 tiny shape; tiny_defaults("minimax_text01") gives the Text-01 / M1 one,
// tiny_defaults("minimax_m3") the M3 one.
struct TinyOptions {
  std::string arch = "minimax_m2";  // minimax_m2 | minimax_text01 | minimax_m1 | minimax_m3
  std::string out_dir;
  std::string dtype = "f32";  // f32 | f16 | bf16 | fp8 (M2) | mxfp8 (M3)
  uint64_t seed = 0;
  int fp8_block = 128;        // quantization_config.weight_block_size = [b, b]
  int n_layers = 4;
  int d_model = 64;
  int n_heads = 8;
  int n_kv_heads = 2;
  int head_dim = 16;
  int rotary_dim = 8;
  int ffn_dim = 32;
  int n_experts = 8;
  int n_experts_active = 2;
  int vocab_size = 512;
  int max_position = 4096;
  bool synthetic = false;  // fast approximate random values (benchmark-sized checkpoints)
  // Text-01 / M1 only:
  int full_attn_interval = 4;  // attn_type_list[i] = ((i + 1) % interval == 0): softmax, else lightning
  bool hf_keys = false;        // transformers -hf spelling (layer_types, *_alpha_factor) instead of
                               // the original keys (attn_type_list, layernorm_*_alpha, postnorm)
  // MiniMax-M3 only (dtype f32 | f16 | bf16 | mxfp8; ffn_dim is the routed-expert width):
  int n_dense_layers = 1;   // layers [0, n) dense attention + dense MLP, the rest MSA + MoE
  int dense_ffn_dim = 64;   // dense_intermediate_size
  int shared_ffn_dim = 32;  // shared_intermediate_size (one shared expert)
  int index_dim = 16;       // sparse_index_dim; sparse_num_index_heads = n_kv_heads
  int msa_block = 4;        // sparse_block_size
  int msa_topk = 3;         // sparse_topk_blocks (K·B = 12: an 80-token context has 20 blocks)
};

// The default tiny shape of a family: minimax_m2 -> TinyOptions{}; minimax_text01 / minimax_m1 ->
// 8 layers (softmax at 3 and 7), hidden 64, 4 heads / 2 kv heads of 16, rotary 8, 8 experts of 32,
// top-2, vocab 512; minimax_m3 -> 4 layers (0 dense attention + dense MLP 64, 1-3 MSA + MoE),
// hidden 64, 8 heads / 2 kv heads of 16, rotary 8, index 2 x 16, MSA block 4 top-3, 8 experts of
// 32 top-2 + a shared expert of 32, vocab 512. Throws mmx::Error for an unknown arch.
TinyOptions tiny_defaults(const std::string& arch);

// True for the lightning-hybrid archs ("minimax_text01", "minimax_m1").
bool tiny_is_text01(const std::string& arch);

// MiniMax-M3 (arch "minimax_m3", spec §5; tiny_m3.cpp): the minimax_m3_vl wrapper config with
// text_config, language_model.* tensors, dummy vision tensors, MXFP8 = E4M3 + U8 E8M0 scales.
void write_tiny_m3(const TinyOptions& opt);
// Its config.json text at shape `o` (o.dtype sets torch_dtype; mxfp8 adds the quantization_config),
// with the tokenizer's bos/eos ids. Also used by `mmx train --arch minimax_m3`.
std::string tiny_m3_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id);

// The config.json text of a MiniMax-M2 checkpoint of shape `o` (real M2 keys, spec §4.1), with the
// tokenizer's bos/eos ids. Also used by `mmx train` for the checkpoints it writes.
std::string tiny_m2_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id);

// The config.json text of the family o.arch (minimax_m2 | minimax_text01 | minimax_m1 |
// minimax_m3) at shape `o`, as write_tiny_checkpoint() writes it. Throws mmx::Error for an unknown
// arch.
std::string tiny_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id);

// Writes config.json, generation_config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json into opt.out_dir (created if missing). Throws mmx::Error.
void write_tiny_checkpoint(const TinyOptions& opt);

}  // namespace mmx
