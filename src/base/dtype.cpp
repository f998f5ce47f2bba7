#include "base/dtype.h"

#include <cmath>

#include "base/error.h"
#include "base/qblocks.h"

namespace mmx {

bool dtype_is_quant(DType t) { return dtype_block(t) > 1; }

int64_t dtype_block(DType t) {
  switch (t) {
    case DType::kQ8_0: return kQ8_0Block;
    case DType::kQ4_0: return kQ4_0Block;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return kQkBlock;
    default: return 1;
  }
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_K: return sizeof(BlockQ4K);
    case DType::kQ5_K: return sizeof(BlockQ5K);
    case DType::kQ6_K: return sizeof(BlockQ6K);
    default: return dtype_size(t);
  }
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const int64_t b = dtype_block(t);
  MMX_CHECK(n >= 0 && n % b == 0, "a {} row of {} elements is not a whole number of {}-blocks",
            dtype_name(t), n, b);
  return size_t(n / b) * dtype_block_bytes(t);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF64: return 8;
    default: break;
  }
  MMX_CHECK(false, "dtype {} is block-quantized: it has no per-element size", dtype_name(t));
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kF64: return "F64";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ5_K: return "Q5_K";
    case DType::kQ6_K: return "Q6_K";
  }
  return "?";
}

bool dtype_from_name(std::string_view s, DType* out) {
  static const struct { std::string_view name; DType t; } kNames[] = {
      {"F32", DType::kF32},       {"F16", DType::kF16}, {"BF16", DType::kBF16},
      {"F8_E4M3", DType::kF8E4M3}, {"I32", DType::kI32}, {"I64", DType::kI64},
      {"U8", DType::kU8},         {"F64", DType::kF64},
  };
  for (const auto& n : kNames) {
    if (n.name == s) {
      *out = n.t;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(float(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(float(man | 0x400), int(exp) - 25);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to inf
  if (a < std::ldexp(1.0f, -14)) {           // subnormal: multiples of 2^-24
    const float q = std::nearbyint(a * std::ldexp(1.0f, 24));  // default mode: ties-to-even
    return sign | uint16_t(q);
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const float q = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits, [1024, 2048]
  uint32_t m = uint32_t(q);
  int exp = e - 1 + 15;
  if (m == 2048) {
    m = 1024;
    ++exp;
  }
  if (exp >= 31) return sign | 0x7c00;
  return sign | uint16_t(exp << 10) | uint16_t(m & 0x3ff);
}

float f8e4m3_to_f32(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  float v;
  if (exp == 15 && man == 7) v = NAN;
  else if (exp == 0) v = std::ldexp(float(man), -9);
  else v = std::ldexp(float(man | 8), int(exp) - 10);
  return sign ? -v : v;
}

uint8_t f32_to_f8e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (e4m3fn has no inf)
  if (a < std::ldexp(1.0f, -6)) {        // subnormal: multiples of 2^-9
    const float q = std::nearbyint(a * 512.0f);
    return sign | uint8_t(q);  // q == 8 is the smallest normal, encoded the same way
  }
  int e;
  std::frexp(a, &e);
  const float q = std::nearbyint(std::ldexp(a, 4 - e));  // 4 significant bits, [8, 16]
  uint32_t m = uint32_t(q);
  int exp = e - 1 + 7;
  if (m == 16) {
    m = 8;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && (m & 7) == 7)) return sign | 0x7e;
  return sign | uint8_t(exp << 3) | uint8_t(m & 7);
}

}  // namespace mmx
