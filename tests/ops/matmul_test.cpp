// matmul and linear_dequant_rows: the fp64 reference proven on hand-built cases, then the fast
// path (GEMV for n < 4, packed GEMM above) against it over a grid of dtypes, token counts,
// ragged shapes and fp8 block sizes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

// ---- the reference, by hand ----

TEST(MatmulRef, HandF32) {
  // W = [[1, 2], [3, 4], [-1, 0.5]], x = [[1, 1], [2, -1]]  ->  y = [[3, 7, -0.5], [0, 2, -2.5]]
  Buffer w(DType::kF32, {3, 2});
  const float wv[] = {1, 2, 3, 4, -1, 0.5f};
  for (int i = 0; i < 6; ++i) w.f32()[i] = wv[i];
  Buffer x(DType::kF32, {2, 2});
  const float xv[] = {1, 1, 2, -1};
  for (int i = 0; i < 4; ++i) x.f32()[i] = xv[i];
  ops::Linear lin;
  lin.w = w.t();
  Buffer y(DType::kF32, {2, 3});
  ops::ref::matmul(x, lin, y.t());
  const float want[] = {3, 7, -0.5f, 0, 2, -2.5f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.f32()[i], want[i]) << i;
}

TEST(MatmulRef, LinearAtF8BlockScales) {
  // 3x3 fp8 weight, 2x2 blocks -> scale [2, 2]; W[o,i] = e4m3(byte) * scale[o/2][i/2].
  // Bytes by hand: 0x38 = 2^0 = 1; 0x40 = 2; 0xc0 = -2; 0x3c = 1.5; 0x7e = 448; 0x01 = 2^-9;
  // 0x08 = 2^-6 (smallest normal); 0x00 = 0; 0x30 = 0.5.
  Buffer w(DType::kF8E4M3, {3, 3});
  const uint8_t b[] = {0x38, 0x40, 0xc0, 0x3c, 0x7e, 0x01, 0x08, 0x00, 0x30};
  for (int i = 0; i < 9; ++i) w.t().ptr<uint8_t>()[i] = b[i];
  Buffer s(DType::kF32, {2, 2});
  const float sv[] = {0.5f, 2.0f, 4.0f, 0.25f};
  for (int i = 0; i < 4; ++i) s.f32()[i] = sv[i];
  ops::Linear lin{w.t(), s.t(), 2, 2};
  const double want[3][3] = {{1 * 0.5, 2 * 0.5, -2 * 2.0},
                             {1.5 * 0.5, 448 * 0.5, std::ldexp(1.0, -9) * 2.0},
                             {std::ldexp(1.0, -6) * 4.0, 0.0, 0.5 * 0.25}};
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ops::ref::linear_at(lin, o, i), want[o][i]) << o << "," << i;

  // ... and the fast dequantizer agrees exactly (one f32 rounding of an exact product).
  Buffer out(DType::kF32, {2, 3});
  ops::linear_dequant_rows(lin, 1, out.t());
  for (int o = 1; o < 3; ++o)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out.f32()[(o - 1) * 3 + i], float(want[o][i]));
}

TEST(MatmulRef, HandBf16F16) {
  // 1.5 and -0.25 are exact in both; bf16(1.5) = 0x3fc0, f16(1.5) = 0x3e00,
  // bf16(-0.25) = 0xbe80, f16(-0.25) = 0xb400.
  Buffer wb(DType::kBF16, {1, 2}), wh(DType::kF16, {1, 2});
  wb.t().ptr<uint16_t>()[0] = 0x3fc0;
  wb.t().ptr<uint16_t>()[1] = 0xbe80;
  wh.t().ptr<uint16_t>()[0] = 0x3e00;
  wh.t().ptr<uint16_t>()[1] = 0xb400;
  Buffer x(DType::kF32, {1, 2});
  x.f32()[0] = 2.0f;
  x.f32()[1] = 4.0f;
  for (const Buffer* w : {&wb, &wh}) {
    ops::Linear lin;
    lin.w = w->t();
    Buffer y(DType::kF32, {1, 1});
    ops::ref::matmul(x, lin, y.t());
    EXPECT_EQ(y.f32()[0], 2.0f);  // 1.5*2 - 0.25*4
  }
}

// ---- fast vs reference ----

struct MatmulCase {
  DType dtype;
  int64_t n, n_out, n_in;
  int block_out = 128, block_in = 128;
  std::string name() const {
    return fmt::format("{} n={} W=[{}, {}] block={}x{}", dtype_name(dtype), n, n_out, n_in,
                       block_out, block_in);
  }
};

void check_matmul(const MatmulCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  OwnedLinear w = make_linear(c.dtype, c.n_out, c.n_in, seed, c.block_out, c.block_in);
  Buffer x = random_tensor({c.n, c.n_in}, seed + 1);
  Buffer y(DType::kF32, {c.n, c.n_out}), y_ref(DType::kF32, {c.n, c.n_out});
  ops::matmul(x, w.lin, y.t());
  ops::ref::matmul(x, w.lin, y_ref.t());
  EXPECT_ALLCLOSE(y.t(), y_ref.t(), tol::kF32Reduce);
}

TEST(Matmul, GridAllDtypes) {
  // n < 32 takes the GEMV tiles (T = 1..4 tokens), n >= 32 the packed GEMM (6-token tails 1..5).
  const int64_t ns[] = {1, 2, 3, 4, 5, 7, 13, 31, 32, 33, 37, 40, 41};
  const int64_t shapes[][2] = {{1, 1},   {5, 3},    {16, 16},  {17, 33},
                               {64, 64}, {67, 100}, {130, 257}, {40, 600}};
  uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3})
    for (int64_t n : ns)
      for (const auto& s : shapes) check_matmul({dt, n, s[0], s[1]}, seed++);
}

TEST(Matmul, Fp8RaggedBlocks) {
  // Block sizes that do not divide the shape, blocks larger than the shape, per-element blocks.
  const int blocks[][2] = {{48, 48}, {16, 32}, {7, 13}, {1, 1}, {128, 128}, {3, 200}};
  const int64_t shapes[][2] = {{50, 64}, {33, 97}, {129, 130}, {8, 17}};
  uint64_t seed = 100;
  for (const auto& b : blocks)
    for (const auto& s : shapes)
      for (int64_t n : {1, 2, 5, 19, 40})
        check_matmul({DType::kF8E4M3, n, s[0], s[1], b[0], b[1]}, seed++);
}

TEST(Matmul, ModelShapes) {
  // Real MiniMax-M2 widths (attention k/v 1024 x 3072, expert 1536 x 3072 split in row bands to
  // keep the fp64 reference fast). K = 3072 is the longest reduction in the suite.
  check_matmul({DType::kF8E4M3, 1, 64, 3072}, 7);
  check_matmul({DType::kF8E4M3, 9, 48, 3072}, 8);
  check_matmul({DType::kF8E4M3, 35, 48, 3072}, 11);
  check_matmul({DType::kBF16, 1, 64, 3072}, 9);
  check_matmul({DType::kF32, 24, 40, 1536}, 10);
}

TEST(Matmul, ExactSizeAllocations) {
  // Buffer pads to 64 bytes, which would hide a tail over-read from AddressSanitizer; here every
  // operand sits in an exactly sized heap block (run under -DMMX_SANITIZE=address).
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF8E4M3})
    for (int64_t n : {1, 2, 5})
      for (const auto& s : {std::array<int64_t, 2>{3, 13}, std::array<int64_t, 2>{17, 31}}) {
        SCOPED_TRACE(fmt::format("{} n={} W=[{}, {}]", dtype_name(dt), n, s[0], s[1]));
        OwnedLinear src = make_linear(dt, s[0], s[1], 11, 16, 16);
        std::vector<uint8_t> w(src.w.t().size_bytes());
        std::memcpy(w.data(), src.w.t().data, w.size());
        std::vector<float> scale(src.lin.scale.empty() ? 0 : size_t(src.lin.scale.numel()));
        if (!scale.empty()) std::memcpy(scale.data(), src.lin.scale.data, scale.size() * 4);
        ops::Linear lin = src.lin;
        lin.w.data = w.data();
        if (!scale.empty()) lin.scale.data = scale.data();
        std::vector<float> x(size_t(n * s[1])), y(size_t(n * s[0]));
        fill_random(x.data(), n * s[1], 12);
        Tensor xt(x.data(), DType::kF32, {n, s[1]}), yt(y.data(), DType::kF32, {n, s[0]});
        Buffer y_ref(DType::kF32, {n, s[0]});
        ops::matmul(xt, lin, yt);
        ops::ref::matmul(xt, lin, y_ref.t());
        EXPECT_ALLCLOSE(yt, y_ref.t(), tol::kF32Reduce);
        std::vector<float> rows(size_t(2 * s[1]));
        Tensor rt(rows.data(), DType::kF32, {2, s[1]});
        ops::linear_dequant_rows(lin, s[0] - 2, rt);
        EXPECT_EQ(rows.back(), float(ops::ref::linear_at(lin, s[0] - 1, s[1] - 1)));
      }
}

TEST(Matmul, Fp8EveryCodeExact) {
  // Row 0 of W holds all 256 byte codes (NaN codes 0x7f/0xff replaced by 0), row 1 the same
  // reversed, with power-of-two block scales. With one-hot x, y[t, o] = W[o, t] exactly, through
  // the GEMV (n = 1, 2) and the GEMM (n = 256): every code, subnormals included, decodes right.
  Buffer w(DType::kF8E4M3, {2, 256});
  for (int i = 0; i < 256; ++i) {
    const uint8_t b = (i & 0x7f) == 0x7f ? 0 : uint8_t(i);
    w.t().ptr<uint8_t>()[i] = b;
    w.t().ptr<uint8_t>()[256 + 255 - i] = b;
  }
  Buffer scale(DType::kF32, {1, 3});
  scale.f32()[0] = 0.5f;
  scale.f32()[1] = 4.0f;
  scale.f32()[2] = 1.0f / 1024;
  ops::Linear lin{w.t(), scale.t(), 2, 100};
  for (int64_t n : {1, 2, 256}) {
    SCOPED_TRACE(fmt::format("n={}", n));
    Buffer x(DType::kF32, {n, 256}), y(DType::kF32, {n, 2});
    for (int64_t t = 0; t < n; ++t) x.f32()[t * 256 + (n == 256 ? t : 7 + 100 * t)] = 1.0f;
    ops::matmul(x, lin, y.t());
    for (int64_t t = 0; t < n; ++t) {
      const int64_t i = n == 256 ? t : 7 + 100 * t;
      for (int o = 0; o < 2; ++o) EXPECT_EQ(y.f32()[t * 2 + o], float(ops::ref::linear_at(lin, o, i))) << t;
    }
  }
  // And a dense x against the reference, so subnormal codes meet non-trivial sums.
  Buffer xd = random_tensor({3, 256}, 5);
  Buffer yd(DType::kF32, {3, 2}), yd_ref(DType::kF32, {3, 2});
  ops::matmul(xd, lin, yd.t());
  ops::ref::matmul(xd, lin, yd_ref.t());
  EXPECT_ALLCLOSE(yd.t(), yd_ref.t(), tol::kF32Reduce);
}

TEST(Matmul, SmallBatchRowsMatchSingleToken) {
  // Below the GEMM threshold a token's output has the same bits alone or inside a batch (the
  // tiles change which tokens share a weight load, never the arithmetic of one (row, token)).
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    OwnedLinear w = make_linear(dt, 37, 300, 21, 16, 48);
    Buffer x = random_tensor({31, 300}, 22);
    Buffer y(DType::kF32, {31, 37});
    ops::matmul(x, w.lin, y.t());
    for (int64_t n : {1, 2, 3, 5, 31}) {
      SCOPED_TRACE(fmt::format("{} batch of {}", dtype_name(dt), n));
      Buffer yn(DType::kF32, {n, 37});
      ops::matmul(x.t().rows_range(31 - n, 31), w.lin, yn.t());
      EXPECT_TRUE(bitwise_equal(yn.t(), y.t().rows_range(31 - n, 31)));
    }
  }
}

TEST(LinearDequantRows, ExactVsRef) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3}) {
    for (const auto& s : {std::array<int64_t, 4>{5, 3, 2, 2}, std::array<int64_t, 4>{67, 100, 48, 48},
                          std::array<int64_t, 4>{130, 257, 128, 128}}) {
      SCOPED_TRACE(fmt::format("{} W=[{}, {}] block={}x{}", dtype_name(dt), s[0], s[1], s[2], s[3]));
      OwnedLinear w = make_linear(dt, s[0], s[1], 3, int(s[2]), int(s[3]));
      const int64_t row0 = s[0] / 3, n_rows = s[0] - row0;
      Buffer out(DType::kF32, {n_rows, s[1]});
      ops::linear_dequant_rows(w.lin, row0, out.t());
      int64_t n_bad = 0;
      for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t i = 0; i < s[1]; ++i)
          n_bad += out.f32()[r * s[1] + i] != float(ops::ref::linear_at(w.lin, row0 + r, i));
      EXPECT_EQ(n_bad, 0);
    }
  }
}

}  // namespace
}  // namespace mmx::testing
