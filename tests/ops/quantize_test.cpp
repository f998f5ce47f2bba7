// ops::quantize (F32 -> Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, BF16): hand-computed Q8_0 / Q4_0 blocks,
// then round trips through the fp64 decoder ops::ref::linear_at over a grid of shapes and
// distributions with per-element error bounds derived from each format, the K types' scale search
// against plain round-to-nearest, idempotence, thread-count independence and speed (printed).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/qblocks.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

constexpr DType kKTypes[] = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

Buffer quantized(DType t, const Tensor& x) {  // x: [rows, n] F32 -> [rows, n] t
  Buffer q(t, {x.dim(0), x.dim(1)});
  ops::quantize(x, q.t());
  return q;
}

enum class Dist { kGauss, kUniform, kHeavy, kPositive, kConstant, kZeros };
constexpr Dist kDists[] = {Dist::kGauss, Dist::kUniform, Dist::kHeavy, Dist::kPositive, Dist::kConstant, Dist::kZeros};
const char* dist_name(Dist d) {
  const char* names[] = {"gauss", "uniform", "heavy", "positive", "constant", "zeros"};
  return names[int(d)];
}

// [rows, n] F32: gauss N(0, 1); uniform U(-1, 1); heavy N(0, 1) with 1% outliers of ±U(10, 50);
// positive U(0.2, 3); constant 0.75 on even rows, -1.3 on odd rows; zeros.
Buffer make_x(Dist dist, int64_t rows, int64_t n, uint64_t seed) {
  Buffer b(DType::kF32, {rows, n});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  float* x = b.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      float v = 0.0f;
      switch (dist) {
        case Dist::kGauss: v = nd(rng); break;
        case Dist::kUniform: v = 2.0f * ud(rng) - 1.0f; break;
        case Dist::kHeavy:
          v = nd(rng);
          if (ud(rng) < 0.01f) v = (ud(rng) < 0.5f ? -1.0f : 1.0f) * (10.0f + 40.0f * ud(rng));
          break;
        case Dist::kPositive: v = 0.2f + 2.8f * ud(rng); break;
        case Dist::kConstant: v = r % 2 ? -1.3f : 0.75f; break;
        case Dist::kZeros: break;
      }
      x[r * n + i] = v;
    }
  return b;
}

double rms_rel_error(const Tensor& x, const Buffer& q) {  // rms(x - deq) / rms(x), fp64 decoder
  const ops::Linear l = as_linear(q);
  double se = 0.0, sx = 0.0;
  for (int64_t r = 0; r < x.dim(0); ++r)
    for (int64_t i = 0; i < x.dim(1); ++i) {
      const double v = x.f32()[r * x.dim(1) + i], e = v - ops::ref::linear_at(l, r, i);
      se += e * e;
      sx += v * v;
    }
  return std::sqrt(se / sx);
}

// ---- hand-computed blocks ----

TEST(Quantize, HandQ8_0) {
  // Block 0: amax = 127 -> d = 1 (fp16 0x3c00), id = 1, q = roundf(x): halves go away from zero.
  // Block 1: amax = 63.5 -> d = 0.5 (0x3800), id = 2, q = roundf(2x).
  // Block 2: amax = 1 -> d = 1/127 = 0.0078740157 (f32), stored as fp16 0x2008 = 1032/1024 · 2^-7
  //          = 0.00787353515625; q uses the unrounded d: 0.791335 · 127 = 100.4995 -> 100 (the
  //          fp16 d would give 100.5057 -> 101); 0.3 · 127 = 38.1 -> 38; -0.01 · 127 = -1.27 -> -1.
  Buffer x(DType::kF32, {1, 96});
  float* v = x.f32();
  const float b0[] = {127, 2.5f, -2.5f, 0.49f, -0.51f, 3, -127, 0};
  const int8_t q0[] = {127, 3, -3, 0, -1, 3, -127, 0};
  const float b1[] = {63.5f, -0.25f, 0.75f, 1.2f, -31, 0.2f};
  const int8_t q1[] = {127, -1, 2, 2, -62, 0};
  const float b2[] = {1.0f, 0.791335f, 0.3f, -0.01f, -1.0f};
  const int8_t q2[] = {127, 100, 38, -1, -127};
  std::memcpy(v, b0, sizeof(b0));
  std::memcpy(v + 32, b1, sizeof(b1));
  std::memcpy(v + 64, b2, sizeof(b2));
  Buffer q = quantized(DType::kQ8_0, x.t());
  const auto* blk = q.t().ptr<BlockQ8_0>();
  EXPECT_EQ(blk[0].d, 0x3c00);
  EXPECT_EQ(blk[1].d, 0x3800);
  EXPECT_EQ(blk[2].d, 0x2008);
  for (int j = 0; j < 32; ++j) {  // unlisted elements are 0 -> q 0
    EXPECT_EQ(blk[0].qs[j], j < 8 ? q0[j] : 0) << j;
    EXPECT_EQ(blk[1].qs[j], j < 6 ? q1[j] : 0) << j;
    EXPECT_EQ(blk[2].qs[j], j < 5 ? q2[j] : 0) << j;
  }
}

TEST(Quantize, HandQ4_0) {
  // Block 0: the largest magnitude is -8 -> d = -8 / -8 = 1 (0x3c00), id = 1, q = min(15, trunc(x +
  //   8.5)): -8 -> 0; 7.9 -> 16.4 -> 16 -> 15 (clamped: decodes 7); 0 -> 8; 2.5 -> 11 (decodes 3:
  //   halves go up); -2.5 -> 6 (decodes -2); 3.4 -> 11.9 -> 11; -0.6 -> 7.9 -> 7.
  // Block 1: the largest magnitude is +4 -> d = 4 / -8 = -0.5 (0xb800), id = -2: 4 -> -8 + 8.5 ->
  //   0 (decodes -0.5 · -8 = 4); -4 -> 16.5 -> 15 (decodes -3.5); 1 -> 6.5 -> 6; -1.25 -> 11;
  //   and a zero element -> 8.
  Buffer x(DType::kF32, {1, 64});
  float* v = x.f32();
  const float b0[] = {-8, 7.9f, 0, 2.5f, -2.5f, 3.4f, -0.6f};
  const int q0[] = {0, 15, 8, 11, 6, 11, 7};
  const float b1[] = {4, -4, 1, -1.25f};
  const int q1[] = {0, 15, 6, 11};
  for (int j = 0; j < 7; ++j) v[j] = b0[j];
  for (int j = 0; j < 4; ++j) v[32 + 16 + j] = b1[j];  // the high nibbles of block 1
  Buffer q = quantized(DType::kQ4_0, x.t());
  const auto* blk = q.t().ptr<BlockQ4_0>();
  EXPECT_EQ(blk[0].d, 0x3c00);
  EXPECT_EQ(blk[1].d, 0xb800);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(blk[0].qs[j], (j < 7 ? q0[j] : 8) | (8 << 4)) << j;
    EXPECT_EQ(blk[1].qs[j], 8 | ((j < 4 ? q1[j] : 8) << 4)) << j;
  }
}

// ---- round trip through the fp64 decoder, per-element bounds ----
//
// Notation: x an input element, deq = ref::linear_at of its encoding, "slack" a few f32 ulps of the
// magnitudes the encoder computes with (its products, sums and quotients are rounded to f32).
//
// Q8_0 (d = amax/127 unrounded, d16 its fp16, q = round(x/d)): |x - d·q| <= d/2, so
//   |x - deq| = |x - d16·q| <= d/2 + |d - d16|·|q|.
// Q4_0 (d = m/-8, t = x/d in [-8, 8], q - 8 = floor(t + 0.5) clamped to 7): |x - d·(q-8)| <= |d|/2,
//   except t > 7.5 (only the side opposite to m), clamped to 7: |d|·(t - 7) <= |d|. Plus |d - d16|·8.
// Q4_K / Q5_K (sub-block scale ds = d16·sc, min dm = dmin16·m, levels 0..nmax), Q6_K (ds = d16·sc,
//   levels -32..31): the levels are recomputed by rounding with the stored scales, so
//   (a) x inside the grid's span: |x - deq| <= |ds|/2; outside: deq is the span's nearest end.
//   (b) the scales are good, independent of (a): the search keeps a fit whose weighted error
//   sum_i w_i e_i^2 (w_i = rms + |x_i| >= rms, sum_i w_i <= 2n·rms since sum |x_i| <= n·rms) is at
//   most that of its first candidate, where every |e_i| <= E0; so any one |e_i| <= sqrt(2n)·E0.
//   Q4_K/Q5_K: the first candidate is the min/max grid, E0 = range/(2·nmax), range = max - min(0,
//   min x) over the sub-block, n = 32; quantizing s and m to 6 bits moves each by at most half a
//   step (s/d16 <= 63·(1 + 2^-11) < 63.5), so |x - deq| <= 8·E0 + nmax·d16/2 + dmin16/2.
//   Q6_K: the first candidate maps the largest |x| to -32, every |e_i| <= E0 = amax/32 (one level at
//   +32 -> 31), n = 16; |sc - s/d16| <= 1 + 2^-4 (s/d16 in ±128·(1 + 2^-11), clamped to 127), so
//   |x - deq| <= sqrt(32)·E0 + 32·(1 + 2^-4)·|d16|.
// (b) needs a normal fp16 d16 (for subnormal ones its rounding can exceed the half step); the data
// here is O(1), so d16 >= 2^-14 whenever it is nonzero.
void check_bounds(DType t, const Tensor& x, const Buffer& q, const char* what) {
  const ops::Linear lin = as_linear(q);
  const int64_t n = x.dim(1), B = dtype_block(t);
  const size_t row_bytes = dtype_row_bytes(t, n), bb = dtype_block_bytes(t);
  const double ulp = std::ldexp(1.0, -21);
  int failures = 0;
  auto expect_le = [&](double err, double bound, int64_t r, int64_t i, const char* which) {
    if (err <= bound || ++failures > 5) return;
    ADD_FAILURE() << dtype_name(t) << " " << what << " row " << r << " elem " << i << " (" << which
                  << "): x " << x.f32()[r * n + i] << " err " << err << " > bound " << bound;
  };
  for (int64_t r = 0; r < x.dim(0); ++r) {
    const float* xr = x.f32() + r * n;
    for (int64_t b0 = 0; b0 < n; b0 += B) {
      const uint8_t* blk = q.t().ptr<uint8_t>() + size_t(r) * row_bytes + size_t(b0 / B) * bb;
      const float* xb = xr + b0;
      auto deq = [&](int64_t j) { return ops::ref::linear_at(lin, r, b0 + j); };
      if (t == DType::kQ8_0 || t == DType::kQ4_0) {
        double amax = 0.0, m = 0.0;
        for (int j = 0; j < 32; ++j)
          if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), m = xb[j];
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const double d16 = f16_to_f32(h);
        for (int j = 0; j < 32; ++j) {
          const double err = std::fabs(xb[j] - deq(j)), slack = 4 * ulp * amax;
          if (t == DType::kQ8_0) {
            const double d = amax / 127, q8 = reinterpret_cast<const BlockQ8_0*>(blk)->qs[j];
            expect_le(err, d / 2 + std::fabs(d - d16) * std::fabs(q8) + slack, r, b0 + j, "q8_0");
          } else {
            const double d = m / -8, tt = d != 0 ? xb[j] / d : 0.0;
            const double step = tt > 7.5 ? tt - 7 : 0.5;
            expect_le(err, std::fabs(d) * step + std::fabs(d - d16) * 8 + slack, r, b0 + j, "q4_0");
          }
        }
        continue;
      }
      const int sub = t == DType::kQ6_K ? 16 : 32;
      for (int s = 0; s < 256 / sub; ++s) {
        const float* xs = xb + s * sub;
        double lo_x = 0.0, hi_x = xs[0], amax = 0.0;
        for (int i = 0; i < sub; ++i)
          lo_x = std::min<double>(lo_x, xs[i]), hi_x = std::max<double>(hi_x, xs[i]),
          amax = std::max<double>(amax, std::fabs(xs[i]));
        double ds, lo, hi, bound_b;
        if (t == DType::kQ6_K) {
          const auto* k = reinterpret_cast<const BlockQ6K*>(blk);
          const double d16 = f16_to_f32(k->d);
          ds = d16 * k->scales[s];
          lo = std::min(-32 * ds, 31 * ds), hi = std::max(-32 * ds, 31 * ds);
          bound_b = std::sqrt(32.0) * amax / 32 + 32 * (1 + 1.0 / 16) * std::fabs(d16);
        } else {
          const int nmax = t == DType::kQ4_K ? 15 : 31;
          const auto* k = reinterpret_cast<const BlockQ4K*>(blk);  // d, dmin, scales: same offsets in Q5_K
          const double d16 = f16_to_f32(k->d), dmin16 = f16_to_f32(k->dmin);
          uint8_t sc, mn;
          scale_min_k4(k->scales, s, &sc, &mn);
          ds = d16 * sc;
          const double dm = dmin16 * mn;
          lo = -dm, hi = nmax * ds - dm;
          bound_b = 8 * (hi_x - lo_x) / (2 * nmax) + nmax * d16 / 2 + dmin16 / 2;
        }
        for (int i = 0; i < sub; ++i) {
          const int64_t j = s * sub + i;
          const double v = xs[i], dv = deq(j), err = std::fabs(v - dv);
          const double slack = 4 * ulp * (std::fabs(v) + std::fabs(lo) + std::fabs(hi));
          if (v >= lo && v <= hi) expect_le(err, std::fabs(ds) / 2 + slack, r, b0 + j, "inside: half step");
          else expect_le(std::fabs(dv - (v < lo ? lo : hi)), slack, r, b0 + j, "outside: nearest end");
          expect_le(err, bound_b + slack, r, b0 + j, "scale quality");
        }
      }
    }
  }
}

TEST(Quantize, RoundTripBounds) {
  uint64_t seed = 1;
  for (DType t : kQuantTypes) {
    const bool k = dtype_block(t) == kQkBlock;
    const std::vector<int64_t> ns = k ? std::vector<int64_t>{256, 512, 3072} : std::vector<int64_t>{32, 64, 96};
    for (Dist dist : kDists)
      for (int64_t n : ns)
        for (int64_t rows = 1; rows <= 5; ++rows) {
          Buffer x = make_x(dist, rows, n, seed++);
          Buffer q = quantized(t, x.t());
          check_bounds(t, x.t(), q, fmt::format("{} [{}, {}]", dist_name(dist), rows, n).c_str());
          if (dist == Dist::kZeros) {  // zero scales, exact zeros
            const auto* p = q.t().ptr<uint8_t>();
            // Q4_0: d = 0 / -8 = -0 (fp16 0x8000, as llama.cpp's) and level 8 (value 0) in both nibbles.
            const auto zero_byte = [t](size_t i) {
              if (t != DType::kQ4_0) return uint8_t(0);
              return uint8_t(i % 18 == 0 ? 0x00 : i % 18 == 1 ? 0x80 : 0x88);
            };
            for (size_t i = 0; i < q.t().size_bytes(); ++i) EXPECT_EQ(p[i], zero_byte(i)) << dtype_name(t) << " " << i;
            const ops::Linear l = as_linear(q);
            for (int64_t i = 0; i < n; ++i) EXPECT_EQ(ops::ref::linear_at(l, rows - 1, i), 0.0);
          }
        }
  }
}

// ---- the K types' search beats plain round-to-nearest ----

// Plain RTN, decoded: per sub-block the min/max grid (Q4_K/Q5_K: s = (max - lo)/nmax, m = -lo,
// lo = min(0, min x)) or the absmax one (Q6_K: s = -mx/32, mx the signed x of largest magnitude),
// then the same super-block scale quantization as ops::quantize and round-to-nearest levels.
std::vector<float> plain_k(DType t, const float* x, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  auto rtn = [](double v, int lo, int hi) { return std::clamp(std::nearbyint(v), double(lo), double(hi)); };
  for (int64_t b0 = 0; b0 < n; b0 += 256) {
    const float* xb = x + b0;
    if (t == DType::kQ6_K) {
      float s[16], smax = 0.0f;
      for (int j = 0; j < 16; ++j) {
        float mx = 0.0f;
        for (int i = 0; i < 16; ++i)
          if (std::fabs(xb[16 * j + i]) > std::fabs(mx)) mx = xb[16 * j + i];
        s[j] = -mx / 32;
        if (std::fabs(s[j]) > std::fabs(smax)) smax = s[j];
      }
      const float d16 = f16_to_f32(f32_to_f16(-smax / 128));
      for (int j = 0; j < 16; ++j) {
        const double ds = d16 != 0 ? d16 * rtn(s[j] / d16, -128, 127) : 0.0;
        for (int i = 0; i < 16; ++i)
          y[size_t(b0 + 16 * j + i)] = float(ds != 0 ? ds * rtn(xb[16 * j + i] / ds, -32, 31) : 0.0);
      }
      continue;
    }
    const int nmax = t == DType::kQ4_K ? 15 : 31;
    float s[8], m[8], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; ++j) {
      float lo = 0.0f, hi = xb[32 * j];
      for (int i = 0; i < 32; ++i) lo = std::min(lo, xb[32 * j + i]), hi = std::max(hi, xb[32 * j + i]);
      s[j] = (hi - lo) / float(nmax), m[j] = -lo;
      smax = std::max(smax, s[j]), mmax = std::max(mmax, m[j]);
    }
    const float d16 = f16_to_f32(f32_to_f16(smax / 63)), dm16 = f16_to_f32(f32_to_f16(mmax / 63));
    for (int j = 0; j < 8; ++j) {
      const double ds = d16 != 0 ? d16 * rtn(s[j] / d16, 0, 63) : 0.0;
      const double dm = dm16 != 0 ? dm16 * rtn(m[j] / dm16, 0, 63) : 0.0;
      for (int i = 0; i < 32; ++i)
        y[size_t(b0 + 32 * j + i)] = float((ds != 0 ? ds * rtn((xb[32 * j + i] + dm) / ds, 0, nmax) : 0.0) - dm);
    }
  }
  return y;
}

TEST(Quantize, SearchBeatsPlainRtn) {
  const int64_t rows = 16, n = 3072;
  Buffer x = make_x(Dist::kGauss, rows, n, 77);
  for (DType t : kQuantTypes) {
    Buffer q = quantized(t, x.t());
    const double ours = rms_rel_error(x.t(), q);
    if (dtype_block(t) != kQkBlock) {
      fmt::print("rms relative error, gaussian [{}, {}]: {:<5} {:.5f}\n", rows, n, dtype_name(t), ours);
      continue;
    }
    double se = 0.0, sx = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * n;
      const std::vector<float> y = plain_k(t, xr, n);
      for (int64_t i = 0; i < n; ++i) {
        const double e = double(xr[i]) - y[size_t(i)];
        se += e * e, sx += double(xr[i]) * xr[i];
      }
    }
    const double plain = std::sqrt(se / sx);
    fmt::print("rms relative error, gaussian [{}, {}]: {:<5} {:.5f} (plain round-to-nearest {:.5f})\n", rows, n,
               dtype_name(t), ours, plain);
    EXPECT_LE(ours, plain) << dtype_name(t);
  }
}

// ---- idempotence, threads, F16 / BF16, checks, speed ----

// Q8_0 and Q4_0 re-encode their own decoding to the same bytes (blocks with a nonzero fp16 d): the
// decoded block's largest magnitude is 127·d16 (Q4_0: -8·d16, at the same place), so the new d is
// d16 exactly and x/d = q up to a few ulps, far from a rounding boundary. The K types need not: the
// decoded sub-block has new statistics (its own min, max and rms weights), so the search can settle
// on a different (s, m) and the 6-bit scales on a different grid; the share that does is printed.
TEST(Quantize, Idempotence) {
  Buffer x = make_x(Dist::kHeavy, 8, 3072, 5);
  for (DType t : kQuantTypes) {
    Buffer q1 = quantized(t, x.t());
    Buffer y(DType::kF32, {8, 3072});
    ops::linear_dequant_rows(as_linear(q1), 0, y.t());
    Buffer q2 = quantized(t, y.t());
    if (dtype_block(t) != kQkBlock) {
      EXPECT_TRUE(bitwise_equal(q1.t(), q2.t())) << dtype_name(t);
      continue;
    }
    const size_t bb = dtype_block_bytes(t), nb = q1.t().size_bytes() / bb;
    size_t same = 0;
    for (size_t b = 0; b < nb; ++b)
      same += std::memcmp(q1.t().ptr<uint8_t>() + b * bb, q2.t().ptr<uint8_t>() + b * bb, bb) == 0;
    fmt::print("{}: quantize(dequant(q)) == q for {}/{} blocks\n", dtype_name(t), same, nb);
  }
}

TEST(Quantize, ThreadCountIndependent) {
  Buffer x = make_x(Dist::kHeavy, 24, 1024, 9);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF16, DType::kBF16}) {
    ops::set_n_threads(1);
    Buffer a = quantized(t, x.t());
    ops::set_n_threads(2);
    Buffer b = quantized(t, x.t());
    EXPECT_TRUE(bitwise_equal(a.t(), b.t())) << dtype_name(t);
  }
  ops::set_n_threads(0);
}

TEST(Quantize, F16Bf16RoundToNearestEven) {
  // 3 rows of 37 (not a multiple of 8: the vector body and the scalar tail both run), 3-D.
  Buffer x(DType::kF32, {3, 1, 37});
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 10.0f);
  for (int64_t i = 0; i < x.t().numel(); ++i) x.f32()[i] = nd(rng);
  const float special[] = {0.0f, -0.0f, 1e-8f, -3e-6f, 65519.0f, 65520.0f, 1e30f, INFINITY, -INFINITY,
                           1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
                           1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), NAN};
  for (size_t i = 0; i < std::size(special); ++i) x.f32()[i] = x.f32()[40 + i] = special[i];
  Buffer h(DType::kF16, {3, 1, 37}), b(DType::kBF16, {3, 1, 37});
  ops::quantize(x.t(), h.t());
  ops::quantize(x.t(), b.t());
  for (int64_t i = 0; i < x.t().numel(); ++i) {
    const float v = x.f32()[i];
    const uint16_t hv = h.t().ptr<uint16_t>()[i], bv = b.t().ptr<uint16_t>()[i];
    EXPECT_EQ(bv, f32_to_bf16(v)) << i;
    if (std::isnan(v)) EXPECT_TRUE((hv & 0x7c00) == 0x7c00 && (hv & 0x3ff) != 0) << i;
    else EXPECT_EQ(hv, f32_to_f16(v)) << i << " " << v;
  }
}

TEST(QuantizeDeath, Checks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP workers are alive by now
  Buffer x(DType::kF32, {2, 64}), f(DType::kF32, {2, 64});
  Buffer q8(DType::kQ8_0, {2, 64}), q8b(DType::kQ8_0, {2, 32});
  Buffer x40(DType::kF32, {1, 40}), h40(DType::kF16, {1, 40});
  Tensor q40(h40.t().data, DType::kQ8_0, {1, 40});  // no Buffer holds a partial block
  EXPECT_DEATH(ops::quantize(x.t(), f.t()), "out dtype F32");
  EXPECT_DEATH(ops::quantize(x.t(), q8b.t()), "out \\[2, 32\\] for x \\[2, 64\\]");
  EXPECT_DEATH(ops::quantize(q8.t(), x.t()), "x is Q8_0");
  EXPECT_DEATH(ops::quantize(x40.t(), q40), "not whole blocks");
  Tensor alias(x.t().data, DType::kF16, {2, 64});
  EXPECT_DEATH(ops::quantize(x.t(), alias), "aliases");
  ops::quantize(x40.t(), h40.t());  // F16 has no block: any n
}

}  // namespace
}  // namespace mmx::testing
