// GGUF block types: the fp64 decoder ops::ref::linear_at proven on hand-built blocks (values
// worked out from the layouts in base/qblocks.h, independent of any decoder), then the fast
// decoder (linear_dequant_rows, embedding) and the packed GEMM path against it over a grid of
// types, shapes and random block bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/qblocks.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {


TEST(QuantRef, HandQ8_0AndQ4_0) {
  Buffer b(DType::kQ8_0, {1, 32});
  auto* q8 = b.t().ptr<BlockQ8_0>();
  q8->d = f32_to_f16(0.5f);
  for (int j = 0; j < 32; ++j) q8->qs[j] = int8_t(j - 16);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(ops::ref::linear_at(as_linear(b), 0, j), 0.5 * (j - 16));

  Buffer c(DType::kQ4_0, {1, 32});
  auto* q4 = c.t().ptr<BlockQ4_0>();
  q4->d = f32_to_f16(2.0f);
  q4->qs[3] = 0xA1;  // element 3: low nibble 1 -> (1 - 8) * 2 = -14; element 19: 10 -> 4
  EXPECT_EQ(ops::ref::linear_at(as_linear(c), 0, 3), -14.0);
  EXPECT_EQ(ops::ref::linear_at(as_linear(c), 0, 19), 4.0);
  EXPECT_EQ(ops::ref::linear_at(as_linear(c), 0, 0), -16.0);  // nibble 0 -> -8 * 2
}

TEST(QuantRef, HandQ4KAndQ5K) {
  // Sub-block 5 (elements 160..191, the high nibbles of chunk c = 2): scale and min live in the
  // split 6-bit fields: sc_5 = (scales[9] & 15) | (scales[1] >> 6) << 4, m_5 = (scales[9] >> 4) |
  // (scales[5] >> 6) << 4. Pick sc_5 = 0b01'0011 = 19, m_5 = 0b10'0101 = 37.
  Buffer b(DType::kQ4_K, {1, 256});
  auto* k = b.t().ptr<BlockQ4K>();
  k->d = f32_to_f16(0.25f);
  k->dmin = f32_to_f16(0.125f);
  k->scales[9] = uint8_t(0x3 | (0x5 << 4));
  k->scales[1] = uint8_t(0x1 << 6);
  k->scales[5] = uint8_t(0x2 << 6);
  k->qs[64 + 7] = 0xB0;  // element 160 + 7 = 167: high nibble 11
  EXPECT_EQ(ops::ref::linear_at(as_linear(b), 0, 167), 0.25 * 19 * 11 - 0.125 * 37);
  // Sub-block 1 (elements 32..63) uses the plain low 6 bits of scales[1] (0b000000 here -> 0)
  // and scales[5] & 63 = 0: element 40 decodes to 0 whatever its level.
  k->qs[8] = 0xF0;
  EXPECT_EQ(ops::ref::linear_at(as_linear(b), 0, 40), 0.0);

  Buffer c(DType::kQ5_K, {1, 256});
  auto* f = c.t().ptr<BlockQ5K>();
  f->d = f32_to_f16(1.0f);
  f->dmin = f32_to_f16(1.0f);
  f->scales[2] = 3;      // sc_2 = 3 (sub-block 2 = elements 64..95, low nibbles of chunk 1)
  f->scales[6] = 2;      // m_2 = 2
  f->qs[32 + 4] = 0x07;  // element 68: low nibble 7
  f->qh[4] = 1 << 2;     // fifth bit of sub-block 2 for lane 4 -> level 23
  EXPECT_EQ(ops::ref::linear_at(as_linear(c), 0, 68), 3.0 * 23 - 2.0);
}

TEST(QuantRef, HandQ6K) {
  // Element 128 + 64 + 5 = 197: half 1, quarter 2 -> low 4 bits = ql[64 + 5] >> 4, high 2 bits =
  // (qh[32 + 5] >> 4) & 3, sub-block 197 / 16 = 12.
  Buffer b(DType::kQ6_K, {1, 256});
  auto* k = b.t().ptr<BlockQ6K>();
  k->d = f32_to_f16(0.5f);
  k->scales[12] = -3;
  k->ql[69] = 0x90;           // low bits 9
  k->qh[37] = uint8_t(2 << 4);  // high bits 2 -> q = 9 | 32 = 41 -> 41 - 32 = 9
  EXPECT_EQ(ops::ref::linear_at(as_linear(b), 0, 197), 0.5 * -3 * 9);
  // Element 5 of half 0, quarter 0: ql[5] & 15 = 0, qh[5] & 3 = 0 -> -32 * d * scales[0].
  k->scales[0] = 1;
  EXPECT_EQ(ops::ref::linear_at(as_linear(b), 0, 5), 0.5 * 1 * -32);
}

// The fast decoder computes in f32 what ref computes in fp64. Every product is exact in f32
// (an fp16 scale has 11 significant bits, a sub-block scale at most 8, a level at most 7), so
// Q8_0/Q4_0/Q4_K/Q5_K values carry at most the one rounding of the final subtraction and Q6_K
// the one of its last product: within one ulp of the fp64 value.
TEST(QuantDequant, FastMatchesRefGrid) {
  for (DType t : kQuantTypes)
    for (int64_t n_in : {dtype_block(t), 2 * dtype_block(t), int64_t(768)}) {
      if (n_in % dtype_block(t)) continue;
      const int64_t rows = 5;
      Buffer w = random_qblocks(t, rows, n_in, 11 + uint64_t(n_in));
      const ops::Linear l = as_linear(w);
      Buffer out(DType::kF32, {rows - 1, n_in});
      ops::linear_dequant_rows(l, 1, out.t());
      for (int64_t o = 1; o < rows; ++o)
        for (int64_t i = 0; i < n_in; ++i) {
          const double want = ops::ref::linear_at(l, o, i);
          const double got = out.f32()[(o - 1) * n_in + i];
          EXPECT_NEAR(got, want, std::fabs(want) * 1.2e-7)
              << dtype_name(t) << " o=" << o << " i=" << i;
        }
      // embedding decodes rows the same way
      Buffer ids = i32_tensor({4, 0, 2});
      Buffer e(DType::kF32, {3, n_in}), er(DType::kF32, {3, n_in});
      ops::embedding(w.t(), ids.t(), e.t());
      ops::ref::embedding(w.t(), ids.t(), er.t());
      for (int64_t i = 0; i < 3 * n_in; ++i)
        EXPECT_NEAR(e.f32()[i], er.f32()[i], std::fabs(er.f32()[i]) * 1.2e-7) << dtype_name(t);
    }
}

// matmul on a GGUF weight (n >= 32: the int8 GEMM, cpu/qgemm.cpp; smaller n: the int8 GEMV) against
// the fp64 reference: f32 accumulation error plus the int8 activations both paths use.
TEST(QuantMatmul, MatchesRefGrid) {
  for (DType t : kQuantTypes)
    for (int64_t n : {1, 3, 33}) {
      const int64_t n_out = 9, n_in = 512;
      Buffer w = random_qblocks(t, n_out, n_in, 3 + uint64_t(n));
      const ops::Linear l = as_linear(w);
      Buffer x = random_tensor({n, n_in}, 7);
      Buffer y(DType::kF32, {n, n_out}), yr(DType::kF32, {n, n_out});
      ops::matmul(x.t(), l, y.t());
      ops::ref::matmul(x.t(), l, yr.t());
      for (int64_t i = 0; i < n * n_out; ++i) {
        // |sum| <= sum |x||w|; f32 accumulation over n_in terms; plus the int8 activations of
        // both kernels: d_x/2 per element, d_x = max|x|/127 per 32 block.
        double bound = 0, amax = 0;
        const int64_t tok = i / n_out, o = i % n_out;
        for (int64_t k = 0; k < n_in; ++k) {
          bound += std::fabs(x.f32()[tok * n_in + k] * ops::ref::linear_at(l, o, k));
          amax = std::max(amax, double(std::fabs(x.f32()[tok * n_in + k])));
        }
        double wsum = 0;
        for (int64_t k = 0; k < n_in; ++k) wsum += std::fabs(ops::ref::linear_at(l, o, k));
        const double tol = 1e-5 * bound + wsum * amax / 127 / 2 + 1e-6;
        EXPECT_NEAR(y.f32()[i], yr.f32()[i], tol) << dtype_name(t) << " n=" << n << " i=" << i;
      }
    }
}

}  // namespace
}  // namespace mmx::testing
