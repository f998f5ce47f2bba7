// What one token of a model costs: the bytes a decode step streams and the FLOPs of the weight
// GEMMs, read from the checkpoint's tensor sizes (HF directory or GGUF file). bench_model.cpp.
#pragma once

#include <optional>
#include <string>

#include "base/dtype.h"
#include "model/config.h"

namespace mmx::cli {

struct TokenCost {
  double weight_bytes = 0;      // weights read per decode token (active experts, one embedding row)
  double flops_per_token = 0;   // 2 x active weight elements (no lm_head, no attention scores)
  double kv_bytes_per_ctx = 0;  // K/V bytes attention reads per token of context (kv_dtype pages)
};
// lm_head_dtype: the type the lm_head is re-encoded in at load (LoadOptions), if any; its bytes
// are then counted in that type, not in the checkpoint's.
TokenCost token_cost(const std::string& path, const ModelConfig& c, DType kv_dtype,
                     std::optional<DType> lm_head_dtype = std::nullopt);

}  // namespace mmx::cli
