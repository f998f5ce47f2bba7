// HF checkpoint -> GGUF file (llama.cpp's minimax-m2 layout), our writer and quantizers.
//
// Tensors are streamed: each is read from the mmapped checkpoint a few MiB of rows at a time,
// dequantized to f32 (FP8 128x128 blocks with their scales), checked finite, converted to the
// target type and written; a checkpoint is never whole in RAM. Types per tensor:
//   * 1-D tensors (norm gains, the routing bias) and the router: F32, always;
//   * f16 / bf16 / q8_0 / q4_0 / q4_k / q5_k / q6_k: every other tensor in that type;
//   * q4_k_m: llama.cpp's mix — Q4_K, with the output (lm_head), and the v projection and the
//     (expert) down projections of the layers where llama.cpp's use_more_bits(layer) holds, in Q6_K;
//   * a row whose length is not a whole number of the type's blocks falls back to Q8_0 (32),
//     or F16 when not even that fits (llama.cpp falls back to Q5_0/Q5_1, which mmx lacks).
// A tied checkpoint still gets an output tensor (a copy of the embedding): llama.cpp's
// minimax-m2 graph requires one. Tensor names and GGUF file order: the checkpoint schema
// (model/schema.h).
//
// A separate library (mmx_convert) in the formats room: it needs ModelConfig and the schema
// (model/) and the quantizers (ops/), which mmx_formats must not depend on. Not here: the GGUF
// keys (formats/hf_view.h), the byte layout (formats/gguf_writer.h), the CLI (tools/mmx).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/dtype.h"
#include "model/schema.h"

namespace mmx {

enum class GgufTarget { kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K, kQ4_K_M };
// "q4_k_m" -> kQ4_K_M; throws mmx::Error listing the names on anything else.
GgufTarget parse_gguf_target(const std::string& s);
const char* gguf_target_name(GgufTarget t);

// The type the tensor of `role` (of blk `layer`, or -1) with rows of `n_in` elements gets.
DType gguf_tensor_type(GgufTarget t, TensorRole role, int layer, int n_layers, int64_t n_in, int ndim);

struct ConvertStats {
  uint64_t bytes_written = 0;
  int64_t tensors = 0;
  int64_t params = 0;
};

// progress(done_bytes, total_bytes) of output data, may be empty.
ConvertStats convert_to_gguf(const std::string& hf_dir, const std::string& out_path, GgufTarget t,
                             const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace mmx
