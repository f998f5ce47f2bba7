// Storage dtypes and scalar conversions (bf16, fp16, fp8 e4m3fn <-> fp32).
// Compute is fp32 on the CPU; these types only describe how weights and caches are stored.
//
// Block-quantized types (llama.cpp's GGUF formats, layouts in base/qblocks.h) store a row of n
// elements as n / dtype_block(t) blocks of dtype_block_bytes(t) bytes; they have no per-element
// size (dtype_size throws on them) and only whole rows are addressable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace mmx {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kF8E4M3, kI32, kI64, kU8, kF64,  // kF64: gradient dumps
  kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K,                   // block-quantized (GGUF)
};

bool dtype_is_quant(DType t);             // one of the block-quantized types
size_t dtype_size(DType t);               // bytes per element; throws for block-quantized types
int64_t dtype_block(DType t);             // elements per block: 32 (Q8_0, Q4_0), 256 (K types), else 1
size_t dtype_block_bytes(DType t);        // bytes per block (dtype_size for plain types)
// Bytes of a row of n elements; n must be a multiple of dtype_block(t) (MMX_CHECK).
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);     // "F32", "BF16", ... (safetensors spelling), "Q4_K", ...
bool dtype_from_name(std::string_view s, DType* out);  // safetensors names only; false otherwise

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round-to-nearest-even, saturates to inf

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no inf; 0x7f/0xff are NaN; max 448.
float f8e4m3_to_f32(uint8_t b);
uint8_t f32_to_f8e4m3(float f);  // round-to-nearest-even, saturates to +-448

}  // namespace mmx
