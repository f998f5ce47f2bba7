// The quantized-weight GEMM (cpu/qgemm.cpp: GGUF weights, n >= 32 tokens, int8 activations),
// over a grid of every type, n (32, 33, 47, 100, 256: tails of every micro-tile), n_in (whole
// and, for Q8_0 / Q4_0, partial 256-groups) and odd n_out (partial 16-row panels):
//   (a) bitwise against the GEMV (cpu::qgemv, proven in qmatmul_test.cpp) token by token: the
//       GEMM keeps its arithmetic, so prefill and decode give the same bits;
//   (b) against the fp64 oracle ops::ref::matmul within the GEMV's bound (see qmatmul_test.cpp):
//       sum_i |W_i| d_x(i) (1/2 + 2^-16) for the activation rounding, plus gamma(nb + 8) ·
//       sum_i P_i |d_x q_i| for the f32 steps, P_i >= |weight part| + |offset part| of W_i;
//   (c) bitwise: 1 vs 2 threads, and the dispatch (ops::matmul) reaches this kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

// x: normal(0, 1) with each 32-block scaled by 2^u, u in [-6, 6] (blocks of very different d_x).
Buffer random_acts(int64_t n, int64_t n_in, uint64_t seed) {
  Buffer x = random_tensor({n, n_in}, seed);
  std::mt19937_64 rng(seed ^ 0x5bd1e995ull);
  for (int64_t b = 0; b < n * n_in / 32; ++b) {
    const float s = std::ldexp(1.0f, int(rng() % 13) - 6);
    for (int j = 0; j < 32; ++j) x.f32()[b * 32 + j] *= s;
  }
  return x;
}

void check_case(const Buffer& wb, const Buffer& xb) {
  const ops::Linear l = as_linear(wb);
  const DType t = wb.t().dtype;
  const int64_t n = xb.t().dim(0), n_in = l.n_in(), n_out = l.n_out(), nb = n_in / 32;
  ASSERT_GE(n, ops::cpu::kGemmMinN);
  SCOPED_TRACE(::testing::Message() << dtype_name(t) << " n_out=" << n_out << " n_in=" << n_in << " n=" << n);

  Buffer y(DType::kF32, {n, n_out}), y2(DType::kF32, {n, n_out}), yd(DType::kF32, {n, n_out});
  Buffer yr(DType::kF32, {n, n_out});
  ops::set_n_threads(1);
  ops::cpu::qgemm(xb.t(), l, y.t());
  ops::set_n_threads(2);
  ops::cpu::qgemm(xb.t(), l, y2.t());
  ops::matmul(xb.t(), l, yd.t());
  ops::set_n_threads(0);
  ops::ref::matmul(xb.t(), l, yr.t());
  EXPECT_TRUE(bitwise_equal(y.t(), y2.t())) << "1 vs 2 threads";
  EXPECT_TRUE(bitwise_equal(y.t(), yd.t())) << "ops::matmul does not reach qgemm";

  // (a) the GEMV on slices of < 32 tokens (its result does not depend on the batch).
  for (int64_t t0 = 0; t0 < n; t0 += 31) {
    const int64_t m = std::min<int64_t>(31, n - t0);
    Buffer xs(DType::kF32, {m, n_in}), ys(DType::kF32, {m, n_out});
    std::memcpy(xs.f32(), xb.f32() + t0 * n_in, size_t(m * n_in) * 4);
    ops::cpu::qgemv(xs.t(), l, ys.t());
    for (int64_t i = 0; i < m; ++i)
      EXPECT_EQ(std::memcmp(ys.f32() + i * n_out, y.f32() + (t0 + i) * n_out, size_t(n_out) * 4), 0)
          << "token " << t0 + i << " differs from the GEMV";
  }

  // (b) the oracle, with the bound from the data.
  const int64_t blk = dtype_block(t);
  const size_t row_bytes = dtype_row_bytes(t, n_in), bb = dtype_block_bytes(t);
  const auto* wp = static_cast<const uint8_t*>(l.w.data);
  const double k = double(nb + 8), gamma = k * kU / (1 - k * kU);
  std::vector<double> w(static_cast<size_t>(n_in)), pb(static_cast<size_t>(n_in));
  std::vector<double> dq(static_cast<size_t>(n * n_in)), dx(static_cast<size_t>(n * nb));
  for (int64_t tok = 0; tok < n; ++tok)  // the activations' int8 form by its definition
    for (int64_t b = 0; b < nb; ++b) {
      const float* xs = xb.f32() + tok * n_in + b * 32;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xs[j]));
      const float d = amax / 127.0f;
      dx[size_t(tok * nb + b)] = d;
      for (int j = 0; j < 32; ++j)
        dq[size_t(tok * n_in + b * 32 + j)] =
            d == 0.0f ? 0.0 : double(d) * std::clamp(std::nearbyint(xs[j] / d), -127.0f, 127.0f);
    }
  int bad = 0;
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) {
      w[size_t(i)] = ops::ref::linear_at(l, o, i);
      pb[size_t(i)] = quant_part_bound(t, wp + size_t(o) * row_bytes + size_t(i / blk) * bb, i % blk);
    }
    for (int64_t tok = 0; tok < n; ++tok) {
      double m = 0, qerr = 0, wx = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        m += pb[size_t(i)] * std::fabs(dq[size_t(tok * n_in + i)]);
        qerr += std::fabs(w[size_t(i)]) * dx[size_t(tok * nb + i / 32)] * (0.5 + 1.0 / 65536);
        wx += std::fabs(w[size_t(i)] * xb.f32()[tok * n_in + i]);
      }
      const double got = y.f32()[tok * n_out + o], ref = yr.f32()[tok * n_out + o];
      const double tol = qerr + gamma * m + kU * std::fabs(ref) + 1e-13 * wx;
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "o=" << o << " tok=" << tok << " got " << got << " ref " << ref << " tol " << tol;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QGemm, GridVsGemvAndRef) {
  for (DType t : kQuantTypes) {
    const std::vector<int64_t> n_ins =
        dtype_block(t) == 32 ? std::vector<int64_t>{32, 96, 288, 768} : std::vector<int64_t>{256, 768};
    for (int64_t n_in : n_ins)
      for (int64_t n_out : {1, 17, 40})
        for (int64_t n : {32, 33, 47, 100, 256}) {
          if (n == 256 && n_in > 288) continue;  // keeps the fp64 oracle to a few seconds
          const uint64_t seed = uint64_t(n_out * 1000003 + n_in * 101 + n);
          check_case(random_qblocks(t, n_out, n_in, seed), random_acts(n, n_in, seed + 7));
        }
  }
}

TEST(QGemm, ManyPanelsTwoThreads) {
  // Several panels per thread, n_out not a multiple of 16, a group-ragged row for the 32-block types.
  for (DType t : kQuantTypes) {
    const int64_t n_in = dtype_block(t) == 32 ? 1056 : 1024;
    check_case(random_qblocks(t, 83, n_in, 51), random_acts(64, n_in, 52));
  }
}

TEST(QGemm, ZeroAndExtreme) {
  for (DType t : kQuantTypes) {
    const int64_t n_in = dtype_block(t) == 32 ? 288 : 768;
    check_case(random_qblocks(t, 17, n_in, 61, QScales::kSane, 3), random_acts(40, n_in, 62));  // zero blocks
    check_case(random_qblocks(t, 17, n_in, 63, QScales::kExtreme), random_acts(33, n_in, 64));
    Buffer x(DType::kF32, {35, n_in});
    std::memset(x.f32(), 0, size_t(35 * n_in) * 4);
    for (int64_t i = 0; i < 35 * n_in; ++i)
      if ((i / 32) % 3 == 0) x.f32()[i] = float(i % 7) - 3.0f;  // zero activation blocks among others
    check_case(random_qblocks(t, 9, n_in, 65), x);
  }
}

}  // namespace
}  // namespace mmx::testing
