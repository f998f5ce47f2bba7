// base/dtype: exhaustive checks of the scalar storage conversions against independent oracles.
//   fp8 e4m3fn: all 256 bytes decoded vs the format's formula evaluated in double; encode of every
//     finite code round-trips; encode vs a brute-force nearest-code search (ties -> even code) on
//     every midpoint, its float neighbours and 50k random values; saturation at ±448.
//   f16: all 65536 patterns decoded vs the F16C hardware instruction; encode vs F16C on every
//     midpoint, its neighbours and 1M random bit patterns.
//   bf16: all 65536 patterns round-trip; encode vs a nearest-value search in double.
//   names/sizes round-trip.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/dtype.h"

namespace mmx {
namespace {

float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool same_float(float a, float b) {  // equal bits, or both NaN
  return (std::isnan(a) && std::isnan(b)) || f32_bits(a) == f32_bits(b);
}

// ---- fp8 e4m3fn ----

// The format's definition, in double: sign s, exponent e (bias 7), mantissa m (3 bits);
// e = 15, m = 7 is NaN; no infinities.
double e4m3_formula(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

bool is_f8_nan(uint8_t b) { return (b & 0x7f) == 0x7f; }

TEST(DtypeF8, DecodeAll256) {
  for (int b = 0; b < 256; ++b) {
    const double want = e4m3_formula(uint8_t(b));
    const float got = f8e4m3_to_f32(uint8_t(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(double(got), want) << "byte " << b;
      EXPECT_EQ(std::signbit(got), b >= 128) << b;  // including -0 for 0x80
    }
  }
  // Landmarks by hand.
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(f8e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0x3c), 1.5f);
}

TEST(DtypeF8, RoundTripAllFiniteCodes) {
  for (int b = 0; b < 256; ++b) {
    if (is_f8_nan(uint8_t(b))) continue;
    EXPECT_EQ(f32_to_f8e4m3(f8e4m3_to_f32(uint8_t(b))), b) << b;
  }
  EXPECT_TRUE(is_f8_nan(f32_to_f8e4m3(std::numeric_limits<float>::quiet_NaN())));
}

// Nearest finite e4m3 code to x by exhaustive search; ties -> even code; |x| beyond 448
// saturates (e4m3fn has no infinity).
uint8_t f8_nearest(float x) {
  if (std::fabs(x) >= 448.0f) return std::signbit(x) ? 0xfe : 0x7e;
  int best = -1;
  double best_d = 0;
  for (int b = 0; b < 256; ++b) {
    if (is_f8_nan(uint8_t(b)) || (b >= 128) != bool(std::signbit(x))) continue;
    const double d = std::fabs(double(x) - e4m3_formula(uint8_t(b)));
    if (best < 0 || d < best_d || (d == best_d && (b & 1) == 0)) best = b, best_d = d;
  }
  return uint8_t(best);
}

TEST(DtypeF8, EncodeMatchesNearestSearch) {
  std::vector<float> xs;
  // Every midpoint between adjacent codes of one sign, and the floats right beside it.
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = f8e4m3_to_f32(uint8_t(b)), hi = f8e4m3_to_f32(uint8_t(b + 1));
    const float mid = (lo + hi) / 2;  // exact: both have few significant bits
    ASSERT_EQ(double(mid), (double(lo) + double(hi)) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi})
      xs.push_back(v), xs.push_back(-v);
  }
  for (float v : {0.0f, -0.0f, 447.9f, 448.0f, 449.0f, 463.9f, 464.0f, 480.0f, 1e6f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                  std::ldexp(1.0f, -10), std::ldexp(1.0f, -11)})
    xs.push_back(v), xs.push_back(-v);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> log_mag(-14.0f, 9.5f);
  for (int i = 0; i < 50000; ++i) xs.push_back((rng() & 1 ? -1.0f : 1.0f) * std::exp2(log_mag(rng)));
  int n_bad = 0;
  for (float x : xs) {
    const uint8_t got = f32_to_f8e4m3(x), want = f8_nearest(x);
    if (got != want && n_bad++ < 10) ADD_FAILURE() << "x=" << x << " got " << int(got) << " want " << int(want);
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(DtypeF8, RoundToNearestEvenByHand) {
  // 1 + 1/16 is halfway between 1 (0x38, even) and 1.125 (0x39): goes to 0x38.
  EXPECT_EQ(f32_to_f8e4m3(1.0625f), 0x38);
  // 1.125 + 1/16 is halfway between 0x39 and 1.25 (0x3a, even): goes to 0x3a.
  EXPECT_EQ(f32_to_f8e4m3(1.1875f), 0x3a);
  // 2^-10 is halfway between 0 and the smallest subnormal 2^-9: goes to 0.
  EXPECT_EQ(f32_to_f8e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  // Saturation: everything at or above 448, including inf, encodes as ±448.
  EXPECT_EQ(f32_to_f8e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(500.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_f8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
}

// ---- f16 (oracle: the F16C instructions) ----

TEST(DtypeF16, DecodeAllMatchesF16C) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_TRUE(same_float(f16_to_f32(uint16_t(h)), _cvtsh_ss(uint16_t(h)))) << h;
  }
}

TEST(DtypeF16, RoundTripAllFinite) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(DtypeF16, EncodeMatchesF16C) {
  auto hw = [](float x) { return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); };
  std::vector<float> xs;
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // midpoints between adjacent positive finite values
    const double lo = _cvtsh_ss(uint16_t(h)), hi = h + 1 == 0x7c00 ? 65536.0 : _cvtsh_ss(uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) xs.push_back(v), xs.push_back(-v);
  }
  for (float v : {0.0f, 65504.0f, 65519.0f, 65520.0f, 1e10f, std::numeric_limits<float>::infinity(),
                  std::ldexp(1.0f, -25), std::ldexp(1.0f, -26), std::numeric_limits<float>::denorm_min()})
    xs.push_back(v), xs.push_back(-v);
  std::mt19937 rng(2);
  for (int i = 0; i < 1000000; ++i) xs.push_back(bits_f32(rng()));
  int n_bad = 0;
  for (float x : xs) {
    const uint16_t got = f32_to_f16(x), want = hw(x);
    const bool ok = std::isnan(x) ? ((got & 0x7c00) == 0x7c00 && (got & 0x3ff)) : got == want;
    if (!ok && n_bad++ < 10) ADD_FAILURE() << "x=" << x << " got " << got << " want " << want;
  }
  EXPECT_EQ(n_bad, 0);
}

// ---- bf16 ----

TEST(DtypeBf16, RoundTripAll) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(uint16_t(h));
    EXPECT_EQ(f32_bits(f), h << 16);
    if (std::isnan(f)) EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << h;
    else ASSERT_EQ(f32_to_bf16(f), h) << h;
  }
}

// Nearest bf16 by comparing the two candidates (truncation and the next pattern up) in double;
// the pattern after the largest finite one stands for 2^128 (overflow to inf); ties -> even.
uint16_t bf16_nearest(float x) {
  const uint32_t u = f32_bits(x);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  auto value = [](uint16_t h) {
    return (h & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), double(bf16_to_f32(h)))
                                  : double(bf16_to_f32(h));
  };
  const double dl = std::fabs(double(x) - value(lo)), dh = std::fabs(double(x) - value(hi));
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(DtypeBf16, EncodeMatchesNearest) {
  std::mt19937 rng(3);
  std::vector<uint32_t> us;
  for (int i = 0; i < 1000000; ++i) us.push_back(rng());
  for (uint32_t hi16 : {0x3f80u, 0x3f81u, 0x0000u, 0x0001u, 0x7f7fu, 0x807fu, 0xff7fu})
    for (uint32_t lo16 : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) us.push_back(hi16 << 16 | lo16);
  int n_bad = 0;
  for (uint32_t u : us) {
    const float x = bits_f32(u);
    if (std::isnan(x) || std::isinf(x)) continue;
    const uint16_t got = f32_to_bf16(x), want = bf16_nearest(x);
    if (got != want && n_bad++ < 10) ADD_FAILURE() << "bits " << u << " got " << got << " want " << want;
  }
  EXPECT_EQ(n_bad, 0);
  // By hand: 1 + 2^-8 is halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_f32(0x7f800001u)))));  // sNaN stays NaN
}

// ---- names / sizes ----

TEST(Dtype, NamesAndSizes) {
  const DType all[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI32, DType::kI64, DType::kU8};
  const size_t sizes[] = {4, 2, 2, 1, 4, 8, 1};
  for (int i = 0; i < 7; ++i) {
    DType t;
    ASSERT_TRUE(dtype_from_name(dtype_name(all[i]), &t));
    EXPECT_EQ(t, all[i]);
    EXPECT_EQ(dtype_size(all[i]), sizes[i]);
  }
  DType t;
  EXPECT_FALSE(dtype_from_name("F8_E5M2", &t));
  EXPECT_FALSE(dtype_from_name("f32", &t));
}

}  // namespace
}  // namespace mmx
