// The quantized-weight GEMV (cpu/qgemv.cpp: GGUF weights, n < 32, int8 activations), proven three
// ways over a grid of every type, n_out, n_in and n, plus zero / extreme cases:
//   (a) against the fp64 oracle ops::ref::matmul, within a bound derived from the data: the
//       activation quantization moves each x_i by at most d_x/2 (d_x of its block), so
//       |y - y_ref| <= sum_i |W_oi| d_x(i) (1/2 + 2^-16) + the f32 accumulation term below;
//   (b) tight: against fp64 sums over the same int8 activations (the definition, computed here
//       and proven equal to cpu::quantize_acts), where only the f32 accumulation term remains;
//   (c) bitwise: 1 vs 2 threads, and each row of a batch vs the same token alone.
// The f32 accumulation term: every product term of the kernel (the weight part, or its offset /
// min part, times d_x q_x) reaches y through at most nb + 8 roundings (nb = n_in / 32: the scale
// product, one FMA per x-block in its lane, the 3-level horizontal sum, the final combination),
// so it is gamma(nb + 8) · M, gamma(k) = k u / (1 - k u), u = 2^-24, with
//   M = sum_i P_i |d_x q_x,i|,  P_i >= |weight part| + |offset part| of W_oi from its block header
// (Q8_0 |d| 128; Q4_0 |d| (15 + 8); Q4_K |d| sc 15 + |dmin| m; Q5_K |d| sc 31 + |dmin| m;
// Q6_K |d| |sc| (63 + 32)).
// Weight blocks are random bytes with fp16 scales set in a chosen range (no quantizer needed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

// The activation format by its definition (cpu.h), scalar: d = amax / 127 in f32, q = clamp(
// round-to-nearest-even(x / d), -127, 127) (0 when d == 0).
struct DefActs {
  std::vector<float> d;  // [nb]
  std::vector<int> q;    // [n_in]
};
DefActs def_quantize(const float* x, int64_t n_in) {
  DefActs a;
  const int64_t nb = n_in / 32;
  a.d.resize(size_t(nb));
  a.q.resize(size_t(n_in));
  for (int64_t b = 0; b < nb; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    a.d[size_t(b)] = d;
    for (int j = 0; j < 32; ++j) {
      const float r = d == 0.0f ? 0.0f : std::nearbyint(x[b * 32 + j] / d);
      a.q[size_t(b * 32 + j)] = int(std::clamp(r, -127.0f, 127.0f));
    }
  }
  return a;
}

// x: [n, n_in] normal(0, 1), each 32-block scaled by 2^u, u uniform in [-6, 6] (so blocks have
// very different d_x), times `mag`.
Buffer random_acts(int64_t n, int64_t n_in, uint64_t seed, float mag = 1.0f) {
  Buffer x = random_tensor({n, n_in}, seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (int64_t b = 0; b < n * n_in / 32; ++b) {
    const float s = std::ldexp(mag, int(rng() % 13) - 6);
    for (int j = 0; j < 32; ++j) x.f32()[b * 32 + j] *= s;
  }
  return x;
}

struct Stats {
  double worst_a = 0, worst_b = 0;  // max |err| / bound seen in (a) and (b)
};

// Runs (a), (b), (c) for one weight and x; returns the worst ratios to the bounds.
void check_case(const Buffer& wb, const Buffer& xb, const char* what, Stats* st) {
  const ops::Linear l = as_linear(wb);
  const DType t = wb.t().dtype;
  const int64_t n = xb.t().dim(0), n_in = l.n_in(), n_out = l.n_out(), nb = n_in / 32;
  const int64_t blk = dtype_block(t);
  const size_t row_bytes = dtype_row_bytes(t, n_in), bb = dtype_block_bytes(t);
  const auto* wp = static_cast<const uint8_t*>(l.w.data);
  SCOPED_TRACE(::testing::Message() << what << " " << dtype_name(t) << " n_out=" << n_out
                                    << " n_in=" << n_in << " n=" << n);

  Buffer y(DType::kF32, {n, n_out}), y2(DType::kF32, {n, n_out}), yr(DType::kF32, {n, n_out});
  ops::set_n_threads(1);
  ops::matmul(xb.t(), l, y.t());
  ops::set_n_threads(2);
  ops::matmul(xb.t(), l, y2.t());
  ops::set_n_threads(0);
  ops::ref::matmul(xb.t(), l, yr.t());

  // (c) bitwise: threads, and each token alone.
  EXPECT_TRUE(bitwise_equal(y.t(), y2.t())) << "1 vs 2 threads";
  if (n > 1)
    for (int64_t tok = 0; tok < n; ++tok) {
      Buffer x1(DType::kF32, {1, n_in}), y1(DType::kF32, {1, n_out});
      std::memcpy(x1.f32(), xb.f32() + tok * n_in, size_t(n_in) * 4);
      ops::matmul(x1.t(), l, y1.t());
      EXPECT_EQ(std::memcmp(y1.f32(), y.f32() + tok * n_out, size_t(n_out) * 4), 0) << "token " << tok;
    }

  // W in fp64 (exact) and the per-element part bounds, row by row.
  std::vector<double> w(static_cast<size_t>(n_in)), pb(static_cast<size_t>(n_in));
  const double k = double(nb + 8), gamma = k * kU / (1 - k * kU);
  std::vector<DefActs> acts;
  for (int64_t tok = 0; tok < n; ++tok) acts.push_back(def_quantize(xb.f32() + tok * n_in, n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) {
      w[size_t(i)] = ops::ref::linear_at(l, o, i);
      pb[size_t(i)] = quant_part_bound(t, wp + size_t(o) * row_bytes + size_t(i / blk) * bb, i % blk);
    }
    for (int64_t tok = 0; tok < n; ++tok) {
      const float* x = xb.f32() + tok * n_in;
      const DefActs& a = acts[size_t(tok)];
      double tight = 0, m = 0, qerr = 0, wx = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double dx = a.d[size_t(i / 32)], xq = dx * a.q[size_t(i)];
        tight += w[size_t(i)] * xq;
        m += pb[size_t(i)] * std::fabs(xq);
        qerr += std::fabs(w[size_t(i)]) * dx * (0.5 + 1.0 / 65536);
        wx += std::fabs(w[size_t(i)] * x[i]);
      }
      const double got = y.f32()[tok * n_out + o], ref = yr.f32()[tok * n_out + o];
      // (a) vs the oracle: activation error + f32 term + the oracle's own f32 rounding.
      const double tol_a = qerr + gamma * m + kU * std::fabs(ref) + 1e-13 * wx;
      EXPECT_LE(std::fabs(got - ref), tol_a) << "(a) o=" << o << " tok=" << tok << " ref=" << ref;
      // (b) vs the same int8 activations in fp64: the f32 term only.
      const double tol_b = gamma * m;
      EXPECT_LE(std::fabs(got - tight), tol_b) << "(b) o=" << o << " tok=" << tok << " tight=" << tight;
      if (tol_a > 0) st->worst_a = std::max(st->worst_a, std::fabs(got - ref) / tol_a);
      if (tol_b > 0) st->worst_b = std::max(st->worst_b, std::fabs(got - tight) / tol_b);
      if (tol_b == 0) {
        EXPECT_EQ(got, 0.0);
      }
    }
  }
}

// ---- the activation quantizer against its definition ----

void expect_acts_match(const float* x, int64_t n_in) {
  const int64_t np = ops::cpu::qacts_padded_blocks(n_in), nb = n_in / 32;
  std::vector<float> mem(ops::cpu::qacts_floats(n_in) + 8);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(mem.data()) + 31) / 32 * 32);
  std::memset(base, 0x5a, ops::cpu::qacts_floats(n_in) * 4);  // garbage: padding must be cleared
  const ops::cpu::QActs qa = ops::cpu::qacts_view(base, n_in);
  ops::cpu::quantize_acts(x, n_in, qa);
  const DefActs a = def_quantize(x, n_in);
  for (int64_t b = 0; b < np; ++b) {
    const bool real = b < nb;
    const float d = real ? a.d[size_t(b)] : 0.0f;
    EXPECT_EQ(qa.d[b], d) << "block " << b;
    int s[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      const int q = real ? a.q[size_t(b * 32 + j)] : 0;
      EXPECT_EQ(int(qa.q[b * 32 + j]), q) << "i=" << b * 32 + j;
      EXPECT_LE(std::abs(int(qa.q[b * 32 + j])), 127);
      s[j / 16] += q;
      if (real && d > 0) {  // the claimed error: |x - d q| <= d/2 (+ the rounding of x / d)
        EXPECT_LE(std::fabs(double(x[b * 32 + j]) - double(d) * q), double(d) * (0.5 + 1.0 / 65536));
      }
    }
    EXPECT_EQ(qa.sum16[2 * b], s[0]);
    EXPECT_EQ(qa.sum16[2 * b + 1], s[1]);
    EXPECT_EQ(qa.ds[b], d * float(s[0] + s[1]));
  }
}

TEST(QActs, MatchesDefinition) {
  for (int64_t n_in : {32, 96, 256, 288, 3072}) {
    Buffer x = random_acts(1, n_in, 5 + uint64_t(n_in));
    expect_acts_match(x.f32(), n_in);
    // a zero block, a block of one nonzero, tiny and huge magnitudes
    std::memset(x.f32(), 0, 32 * 4);
    if (n_in >= 96) {
      std::memset(x.f32() + 32, 0, 32 * 4);
      x.f32()[40] = -3.0f;
      for (int j = 64; j < 96; ++j) x.f32()[j] *= (j % 2) ? 1e-30f : 1e30f;
    }
    expect_acts_match(x.f32(), n_in);
  }
}

TEST(QActs, HandRounding) {
  // amax 127 -> d = 1 exactly: halves round to even, the maximum to 127.
  std::vector<float> x(32, 0.0f);
  const float v[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.49f, 126.6f, -127.0f};
  const int want[] = {127, 2, 4, -2, 0, 0, 127, -127};
  std::copy(std::begin(v), std::end(v), x.begin());
  std::vector<float> mem(ops::cpu::qacts_floats(32) + 8);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(mem.data()) + 31) / 32 * 32);
  const ops::cpu::QActs qa = ops::cpu::qacts_view(base, 32);
  ops::cpu::quantize_acts(x.data(), 32, qa);
  EXPECT_EQ(qa.d[0], 1.0f);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(int(qa.q[j]), want[j]) << j;
  EXPECT_EQ(qa.sum16[0], 127 + 2 + 4 - 2 + 127 - 127);
  EXPECT_EQ(qa.sum16[1], 0);
}

// ---- the GEMV ----

std::vector<int64_t> n_in_grid(DType t) {
  if (dtype_block(t) == 32) return {32, 96, 288, 3072};  // one block, several, one group + 1, long
  return {256, 768, 3072};
}

TEST(QMatmul, GridVsRefTightAndBitwise) {
  for (DType t : kQuantTypes) {
    Stats st;
    for (int64_t n_out : {1, 3, 8, 17, 64})
      for (int64_t n_in : n_in_grid(t))
        for (int64_t n : {1, 2, 3, 5, 8, 31}) {
          const uint64_t seed = uint64_t(n_out * 1000003 + n_in * 101 + n);
          Buffer w = random_qblocks(t, n_out, n_in, seed);
          Buffer x = random_acts(n, n_in, seed + 7);
          check_case(w, x, "grid", &st);
        }
    std::printf("%-5s worst |err|/bound: (a) %.3g  (b) %.3g\n", std::string(dtype_name(t)).c_str(),
                st.worst_a, st.worst_b);
  }
}

TEST(QMatmul, ThreadsSplitLargeRows) {
  // Big enough for the parallel path and for several row groups per thread.
  for (DType t : kQuantTypes) {
    Stats st;
    Buffer w = random_qblocks(t, 67, 3072, 11);
    for (int64_t n : {1, 4, 9}) check_case(w, random_acts(n, 3072, 12 + uint64_t(n)), "threads", &st);
  }
}

TEST(QMatmul, ZeroActivations) {
  for (DType t : kQuantTypes) {
    const int64_t n_in = dtype_block(t) * 3;
    Buffer w = random_qblocks(t, 9, n_in, 21);
    Buffer x(DType::kF32, {3, n_in});
    std::memset(x.f32(), 0, size_t(3 * n_in) * 4);
    Buffer y(DType::kF32, {3, 9});
    ops::matmul(x.t(), as_linear(w), y.t());
    for (int64_t i = 0; i < 27; ++i) EXPECT_EQ(y.f32()[i], 0.0f) << dtype_name(t) << " " << i;
    Stats st;
    // and a few zero blocks among nonzero ones
    for (int64_t i = 0; i < n_in; ++i) x.f32()[i] = (i / 32) % 2 ? 0.0f : float(i % 7) - 3.0f;
    check_case(w, x, "zero x blocks", &st);
  }
}

TEST(QMatmul, ZeroWeightBlocks) {
  for (DType t : kQuantTypes) {
    Stats st;
    const int64_t n_in = dtype_block(t) == 32 ? 288 : 768;
    Buffer w = random_qblocks(t, 17, n_in, 31, QScales::kSane, 3);  // every third block all zero
    check_case(w, random_acts(5, n_in, 32), "zero w blocks", &st);
    Buffer z = random_qblocks(t, 4, n_in, 33, QScales::kSane, 1);  // all zero
    Buffer x = random_acts(2, n_in, 34);
    Buffer y(DType::kF32, {2, 4});
    ops::matmul(x.t(), as_linear(z), y.t());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y.f32()[i], 0.0f) << dtype_name(t);
  }
}

TEST(QMatmul, ExtremeScales) {
  for (DType t : kQuantTypes) {
    Stats st;
    const int64_t n_in = dtype_block(t) == 32 ? 288 : 768;
    check_case(random_qblocks(t, 17, n_in, 41, QScales::kExtreme), random_acts(3, n_in, 42), "extreme w", &st);
    check_case(random_qblocks(t, 8, n_in, 43), random_acts(2, n_in, 44, 1e-20f), "tiny x", &st);
    check_case(random_qblocks(t, 8, n_in, 45), random_acts(2, n_in, 46, 1e20f), "huge x", &st);
  }
}

}  // namespace
}  // namespace mmx::testing
