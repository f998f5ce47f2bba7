// Shared helpers for the ops tests: owning Linear weights in every storage dtype, seeded random
// tensors, exact-equality helpers. Test-only; never linked into the engine.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "base/qblocks.h"
#include "ops/ops.h"
#include "testing/allclose.h"

namespace mmx::testing {

// A Linear that owns its storage. Values are O(1) after dequantization:
//   F32/F16/BF16: normal(0, 1) rounded to the dtype;
//   F8E4M3: bytes = e4m3(normal(0, 64)) (never a NaN code), scale = uniform(0.5, 1.5) / 64 per block.
struct OwnedLinear {
  Buffer w;      // [n_out, n_in]
  Buffer scale;  // [ceil(n_out/block_out), ceil(n_in/block_in)] F32 (F8E4M3 only)
  ops::Linear lin;
};

inline OwnedLinear make_linear(DType dtype, int64_t n_out, int64_t n_in, uint64_t seed,
                               int block_out = 128, int block_in = 128) {
  OwnedLinear r;
  r.w = Buffer(dtype, {n_out, n_in});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = n_out * n_in;
  for (int64_t i = 0; i < n; ++i) {
    const float v = nd(rng);
    switch (dtype) {
      case DType::kF32: r.w.t().ptr<float>()[i] = v; break;
      case DType::kF16: r.w.t().ptr<uint16_t>()[i] = f32_to_f16(v); break;
      case DType::kBF16: r.w.t().ptr<uint16_t>()[i] = f32_to_bf16(v); break;
      case DType::kF8E4M3: r.w.t().ptr<uint8_t>()[i] = f32_to_f8e4m3(v * 64.0f); break;
      default: ADD_FAILURE() << "make_linear: dtype " << dtype_name(dtype);
    }
  }
  r.lin.w = r.w.t();
  r.lin.block_out = block_out;
  r.lin.block_in = block_in;
  if (dtype == DType::kF8E4M3) {
    const int64_t so = (n_out + block_out - 1) / block_out, si = (n_in + block_in - 1) / block_in;
    r.scale = Buffer(DType::kF32, {so, si});
    std::uniform_real_distribution<float> ud(0.5f, 1.5f);
    for (int64_t i = 0; i < so * si; ++i) r.scale.f32()[i] = ud(rng) / 64.0f;
    r.lin.scale = r.scale.t();
  }
  return r;
}

inline Buffer i32_tensor(std::initializer_list<int32_t> v) {
  Buffer b(DType::kI32, {int64_t(v.size())});
  int64_t i = 0;
  for (int32_t x : v) b.t().ptr<int32_t>()[i++] = x;
  return b;
}

inline Buffer f32_tensor(std::initializer_list<float> v) {
  Buffer b(DType::kF32, {int64_t(v.size())});
  int64_t i = 0;
  for (float x : v) b.f32()[i++] = x;
  return b;
}

// A copy of an F32 tensor with the same shape (for in-place ops: run fast and ref on copies).
inline Buffer copy_of(const Tensor& t) {
  Buffer b(t.dtype, {t.numel()});
  std::memcpy(b.t().data, t.data, t.size_bytes());
  b.t().ndim = t.ndim;
  b.t().shape = t.shape;
  return b;
}

// The same shape in another storage dtype: element e of the result is f(t, e) (an Elem).
template <class Elem, class F>
Buffer convert_elems(const Tensor& t, DType dtype, F f) {
  Buffer b(dtype, {t.numel()});
  for (int64_t e = 0; e < t.numel(); ++e) b.t().ptr<Elem>()[e] = f(t, e);
  b.t().ndim = t.ndim;
  b.t().shape = t.shape;
  return b;
}
// Rounded to bf16 / E4M3 (nearest even; E4M3 saturates), and widened back to F32 (exact).
inline Buffer to_bf16(const Tensor& t) {
  return convert_elems<uint16_t>(t, DType::kBF16, [](const Tensor& s, int64_t e) { return f32_to_bf16(s.f32()[e]); });
}
inline Buffer to_f8(const Tensor& t) {
  return convert_elems<uint8_t>(t, DType::kF8E4M3, [](const Tensor& s, int64_t e) { return f32_to_f8e4m3(s.f32()[e]); });
}
inline Buffer widen_bf16(const Tensor& t) {
  return convert_elems<float>(t, DType::kF32, [](const Tensor& s, int64_t e) { return bf16_to_f32(s.ptr<uint16_t>()[e]); });
}
inline Buffer widen_f8(const Tensor& t) {
  return convert_elems<float>(t, DType::kF32, [](const Tensor& s, int64_t e) { return f8e4m3_to_f32(s.ptr<uint8_t>()[e]); });
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.size_bytes() == b.size_bytes() && std::memcmp(a.data, b.data, a.size_bytes()) == 0;
}

// ---- GGUF block types (base/qblocks.h) ----
constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// P_j for element j of a block at blk (qmatmul_test's error model): a bound on |weight part| +
// |offset part| of the dequantized weight, from the block header alone.
inline double quant_part_bound(DType t, const uint8_t* blk, int64_t j) {
  switch (t) {
    case DType::kQ8_0: return std::fabs(f16_to_f32(reinterpret_cast<const BlockQ8_0*>(blk)->d)) * 128;
    case DType::kQ4_0: return std::fabs(f16_to_f32(reinterpret_cast<const BlockQ4_0*>(blk)->d)) * 23;
    case DType::kQ4_K: case DType::kQ5_K: {
      const auto* b4 = reinterpret_cast<const BlockQ4K*>(blk);  // d, dmin, scales: same offsets in Q5_K
      uint8_t sc, m;
      scale_min_k4(b4->scales, int(j / 32), &sc, &m);
      const double lmax = t == DType::kQ4_K ? 15 : 31;
      return std::fabs(f16_to_f32(b4->d)) * sc * lmax + std::fabs(f16_to_f32(b4->dmin)) * m;
    }
    case DType::kQ6_K: {
      const auto* b = reinterpret_cast<const BlockQ6K*>(blk);
      return std::fabs(f16_to_f32(b->d)) * std::abs(int(b->scales[j / 16])) * 95;
    }
    default: ADD_FAILURE() << "not a block type"; return 0;
  }
}

enum class QScales { kSane, kExtreme };

// Random block bytes (every bit pattern of the levels and sub-block scales is valid), fp16 scale
// fields set to ±uniform(1/512, 1/16) (kSane) or drawn from the fp16 extremes (kExtreme: the
// largest finite, the smallest normal and subnormal, 1). zero_every > 0: every such block is all
// zero bytes (a zero weight block: d = dmin = 0).
inline Buffer random_qblocks(DType t, int64_t rows, int64_t n_in, uint64_t seed, QScales mode = QScales::kSane,
                      int zero_every = 0) {
  Buffer b(t, {rows, n_in});
  auto* p = b.t().ptr<uint8_t>();
  const size_t bytes = b.t().size_bytes(), bb = dtype_block_bytes(t);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < bytes; ++i) p[i] = uint8_t(rng());
  std::uniform_real_distribution<float> ud(1.0f / 512, 1.0f / 16);
  const float extremes[] = {65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 1.0f};
  auto scale = [&](uint8_t* at) {
    const float v = mode == QScales::kSane ? ud(rng) : extremes[rng() % 4];
    const uint16_t h = f32_to_f16((rng() & 1) ? v : -v);
    std::memcpy(at, &h, 2);
  };
  size_t idx = 0;
  for (size_t off = 0; off < bytes; off += bb, ++idx) {
    uint8_t* blk = p + off;
    switch (t) {
      case DType::kQ8_0: case DType::kQ4_0: scale(blk); break;
      case DType::kQ4_K: case DType::kQ5_K: scale(blk); scale(blk + 2); break;
      case DType::kQ6_K: scale(blk + offsetof(BlockQ6K, d)); break;
      default: break;
    }
    if (zero_every > 0 && idx % size_t(zero_every) == 0) std::memset(blk, 0, bb);
  }
  return b;
}

inline ops::Linear as_linear(const Buffer& b) {
  ops::Linear l;
  l.w = b.t();
  return l;
}


}  // namespace mmx::testing
