// Seeded tiny checkpoints in the real Hugging Face layout (`mmx make-tiny`).
//
// Real key names, tensor names and dtypes (spec §4.1/§4.3), small sizes. Used as the embedded
// default model of `make run` and by every model test (fresh checkpoints, never stale goldens).
#pragma once

#include <cstdint>
#include <string>

namespace mmx {

struct TinyOptions {
  std::string arch = "minimax_m2";
  std::string out_dir;
  std::string dtype = "f32";  // f32 | f16 | bf16 | fp8
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
};

// Writes config.json, generation_config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json into opt.out_dir (created if missing). Throws mmx::Error.
void write_tiny_checkpoint(const TinyOptions& opt);

}  // namespace mmx
