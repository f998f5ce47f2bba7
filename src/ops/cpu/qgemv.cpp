// Matmul on GGUF block-quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; layouts in
// base/qblocks.h) for small n (decode, small expert batches: n < kGemmMinN). The llama.cpp idea
// in our own code: the activations are quantized to int8 once per call and token (QActs in
// cpu.h: blocks of 32 with an f32 scale d and the block sums), and each weight block is dotted
// with them in integer arithmetic, straight from its packed bits. No dequantized copy of a weight
// row ever exists, in memory or in registers.
//
// Per 32-wide x-block b of a row (x-block = 32 consecutive inputs = one Q8_0/Q4_0 block, one
// Q4_K/Q5_K sub-block, two Q6_K sub-blocks), with l the unsigned level of each weight:
//   I_b = sum_j l_j * q_j                    maddubs (u8 x s8 -> s16 pairs) then madd (-> s32)
//   y  += (s_b * d_b) * I_b                  cvt to f32 (exact, |lane| < 2^24) and one FMA
// and once per group of 8 x-blocks an FMA of the offset / min terms with the block sums:
//   Q8_0  l = w (signed: |w| x sign(w) q)  s_b = d                     no offset
//   Q4_0  l = nibble (0..15)              s_b = d                     - 8 * d * ds_b
//   Q4_K  l = nibble (0..15)              s_b = d * sc_b              - dmin * m_b * ds_b
//   Q5_K  l = nibble | 16 * qh bit        s_b = d * sc_b              - dmin * m_b * ds_b
//   Q6_K  l = 6 bits (0..63)              s_b = d, and madd by the two 16-wide scales of the
//                                         x-block (I_b = sc_2b I_lo + sc_2b+1 I_hi), the -32
//                                         offset folded into I_b in integers (below)
// (s_b · d_b: d·sc and dmin·m are exact in f32, so each term carries one rounding before the
// FMA.) maddubs never saturates: a pair is at most 2·63·127 (Q6_K) or 2·128·127 (Q8_0) < 2^15.
// Q6_K's offset is exact in integers: O_b = sc_2b S_2b + sc_2b+1 S_2b+1 (S: the int16 sums of
// the activation's two 16-runs, one madd for the 8 x-blocks of a group), I_b -= 32 O_b, so
// |I_b| <= 32·32·127·128 < 2^24 and the cvt stays exact. (Measured against the float offset
// FMA with ds16 it replaced, on the cache-hot [3072, 1536] Q6_K expert at 1 thread, medians of
// 6 alternating quant_bench runs: 19.9 against 19.1 GB/s, 1.04x.)
//
// Tiling as in gemv.cpp: a tile is R rows × T tokens; each unpacked weight vector serves T
// tokens, each activation vector R rows. Threads split the output rows in fixed groups of kRows
// (static schedule) and prefetch their next group one row-group ahead; within a group the tokens
// go in tiles of up to kGemvMaxT (cpu.h: gemv_tiles). Every (row, token) output is the same sequence of operations
// whatever the tile shape, the thread count or the other tokens in the batch, so y is bitwise
// independent of the thread count and a token's row of y has the same bits alone or in a batch.
//
// Not here: n >= kGemmMinN (gemm.cpp dequantizes tiles into its packed fp32 GEMM), unquantized
// weights (gemv.cpp), AVX-512 / VNNI (the floor is AVX2 + FMA + F16C).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kXBlock = 32;  // activation block (QActs)
constexpr int kGroup = 8;    // x-blocks per group: 256 inputs = one K super-block
constexpr int kRows = kGemvRows;  // output rows per thread-level group (cpu.h: gemv_tiles)

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline __m256i ld256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The fp16 scales of nk (<= 8) blocks kStride bytes apart -> 8 floats, zero past nk.
template <int kStride>
inline __m256 f16_scales(const uint8_t* p, int nk) {
  if (nk == kGroup)
    return _mm256_cvtph_ps(_mm_setr_epi16(
        short(ld16(p)), short(ld16(p + kStride)), short(ld16(p + 2 * kStride)),
        short(ld16(p + 3 * kStride)), short(ld16(p + 4 * kStride)), short(ld16(p + 5 * kStride)),
        short(ld16(p + 6 * kStride)), short(ld16(p + 7 * kStride))));
  alignas(16) uint16_t h[kGroup] = {};
  for (int k = 0; k < nk; ++k) h[k] = ld16(p + k * kStride);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// One row's decoded group header (a group: 8 x-blocks = 256 weights).
struct Group {
  __m256 scale;   // lane k: s_k, the weight-side factor of x-block k (multiplied by d_x later)
  __m256 off;     // the offset / min vector, dotted with ds
  __m256i aux;    // Q5_K: the 32 qh bytes; Q6_K: the 16 sub-block scales as s16 (evens | odds)
  __m256i sc16;   // Q6_K: the 16 sub-block scales as s16 in order (for the offset O_b)
};

// Per type: kGroupBytes (bytes of 256 weights), kRagged (a row may end in a partial group),
// kSigned (levels are signed weights), kOffsets (0, 1: off·ds), kOffMul (its factor),
// kIntOffset (Q6_K: I -= 32 O in integers);
// begin() decodes a group header; levels(k) the 32 levels of x-block k; pairs(k) the madd
// multiplier (ones, or Q6_K's sub-block scales). k is a compile-time constant on full groups.
struct Q8_0Kern {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kGroupBytes = kGroup * 34;
  static constexpr bool kRagged = true;  // a row may end in a partial group
  static constexpr bool kSigned = true;
  static constexpr int kOffsets = 0;
  static constexpr float kOffMul = 0.0f;
  static constexpr bool kIntOffset = false;
  static void begin(const uint8_t* p, int nk, Group* g) { g->scale = f16_scales<34>(p, nk); }
  template <class K>
  static __m256i levels(const uint8_t* p, const Group&, K k) { return ld256(p + 34 * int(k) + 2); }
  template <class K>
  static __m256i pairs(const Group&, K) { return _mm256_set1_epi16(1); }
};

struct Q4_0Kern {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kGroupBytes = kGroup * 18;
  static constexpr bool kRagged = true;
  static constexpr bool kSigned = false;
  static constexpr int kOffsets = 1;
  static constexpr float kOffMul = -8.0f;
  static constexpr bool kIntOffset = false;
  static void begin(const uint8_t* p, int nk, Group* g) {
    g->scale = f16_scales<18>(p, nk);
    g->off = g->scale;
  }
  // Elements 0..15 are the low nibbles of qs[0..16), 16..31 the high ones: the same 16 bytes in
  // both halves, the upper half shifted right by 4.
  template <class K>
  static __m256i levels(const uint8_t* p, const Group&, K k) {
    const __m256i b = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18 * int(k) + 2)));
    return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(15));
  }
  template <class K>
  static __m256i pairs(const Group&, K) { return _mm256_set1_epi16(1); }
};

// Q4_K / Q5_K header: d, dmin (fp16), scales[12] -> s = d·sc_k, off = dmin·m_k (exact in f32).
// scale_min_k4 for all 8 sub-blocks at once, in SSE (measured 1.03x on Q4_K / Q5_K against the
// same in scalar 32-bit words): the 16 header bytes are [d, dmin | a | b | c]; sc_j = a_j & 63,
// m_j = b_j & 63, sc_4+j = (c_j & 15) | (a_j >> 6) << 4, m_4+j = (c_j >> 4) | (b_j >> 6) << 4 for
// j < 4, built as the byte vector [sc_0..7 | m_0..7] (epi16 shifts; the masks drop the bits that
// come from the neighbouring byte).
inline void k4_header(const uint8_t* p, Group* g) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128 dd = _mm_cvtph_ps(raw);  // [d, dmin, ., .]
  const __m128i acbc =  // [a | c | b | c]
      _mm_shuffle_epi8(raw, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m128i za0b =  // [0 | a | 0 | b]
      _mm_shuffle_epi8(raw, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
  const __m128i low =
      _mm_and_si128(acbc, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i c_hi = _mm_and_si128(_mm_srli_epi16(acbc, 4), _mm_setr_epi32(0, 0, 0, 0x0f0f0f0f));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(za0b, 2), _mm_set1_epi8(0x30));
  const __m128i v = _mm_or_si128(_mm_or_si128(low, c_hi), top);
  g->scale = _mm256_mul_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)));
  g->off = _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
                            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))));
}

// Sub-block 2c is the low nibbles of qs[32c..32c+32), 2c + 1 the high ones.
template <class K>
inline __m256i k4_nibbles(const uint8_t* qs, K k) {
  const __m256i v = ld256(qs + 32 * (int(k) / 2));
  return _mm256_and_si256(int(k) % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15));
}

struct Q4KKern {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kGroupBytes = sizeof(BlockQ4K);
  static constexpr bool kRagged = false;
  static constexpr bool kSigned = false;
  static constexpr int kOffsets = 1;
  static constexpr float kOffMul = -1.0f;
  static constexpr bool kIntOffset = false;
  static void begin(const uint8_t* p, int, Group* g) { k4_header(p, g); }
  template <class K>
  static __m256i levels(const uint8_t* p, const Group&, K k) {
    return k4_nibbles(p + offsetof(BlockQ4K, qs), k);
  }
  template <class K>
  static __m256i pairs(const Group&, K) { return _mm256_set1_epi16(1); }
};

struct Q5KKern {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kGroupBytes = sizeof(BlockQ5K);
  static constexpr bool kRagged = false;
  static constexpr bool kSigned = false;
  static constexpr int kOffsets = 1;
  static constexpr float kOffMul = -1.0f;
  static constexpr bool kIntOffset = false;
  static void begin(const uint8_t* p, int, Group* g) {
    k4_header(p, g);
    g->aux = ld256(p + offsetof(BlockQ5K, qh));
  }
  // Sub-block k adds 16 where bit k of qh[l] is set: mask bit k of each byte, move it to bit 4.
  template <class K>
  static __m256i levels(const uint8_t* p, const Group& g, K k) {
    const int s = int(k);
    const __m256i h = _mm256_and_si256(g.aux, _mm256_set1_epi8(char(1 << s)));
    const __m256i h16 = s < 4 ? _mm256_slli_epi16(h, 4 - s) : _mm256_srli_epi16(h, s - 4);
    return _mm256_or_si256(k4_nibbles(p + offsetof(BlockQ5K, qs), k), h16);
  }
  template <class K>
  static __m256i pairs(const Group&, K) { return _mm256_set1_epi16(1); }
};

struct Q6KKern {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kGroupBytes = sizeof(BlockQ6K);
  static constexpr bool kRagged = false;
  static constexpr bool kSigned = false;
  static constexpr int kOffsets = 0;
  static constexpr float kOffMul = 0.0f;
  static constexpr bool kIntOffset = true;
  static void begin(const uint8_t* p, int, Group* g) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ6K, scales)));
    g->scale = _mm256_set1_ps(_cvtsh_ss(ld16(p + offsetof(BlockQ6K, d))));
    g->sc16 = _mm256_cvtepi8_epi16(s);
    g->aux = _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(s, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
  }
  // x-block k = 4h + j of half h (base/qblocks.h): low 4 bits from ql[64h + 32(j & 1) + l]
  // (j < 2: low nibble, else high), high 2 bits from bits 2j, 2j + 1 of qh[32h + l].
  template <class K>
  static __m256i levels(const uint8_t* p, const Group&, K k) {
    const int h = int(k) / 4, j = int(k) % 4;
    const __m256i lo = ld256(p + offsetof(BlockQ6K, ql) + 64 * h + 32 * (j & 1));
    const __m256i hi = ld256(p + offsetof(BlockQ6K, qh) + 32 * h);
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i l4 = _mm256_and_si256(j < 2 ? lo : _mm256_srli_epi16(lo, 4), m4);
    const __m256i h2 = _mm256_and_si256(hi, _mm256_set1_epi8(char(3 << (2 * j))));
    const __m256i h2at4 = j == 0   ? _mm256_slli_epi16(h2, 4)
                          : j == 1 ? _mm256_slli_epi16(h2, 2)
                          : j == 2 ? h2
                                   : _mm256_srli_epi16(h2, 2);
    return _mm256_or_si256(l4, h2at4);
  }
  // s16 lanes 0..7 (elements 0..15 of the x-block) times sc[2k], lanes 8..15 times sc[2k + 1].
  template <class K>
  static __m256i pairs(const Group& g, K k) {
    const int e = 2 * int(k);
    return _mm256_shuffle_epi8(g.aux, _mm256_set1_epi16(int16_t(((e + 1) << 8) | e)));
  }
};

// v[t] = the s32 products of x-block k with token t's activations (8 lanes whose sum is I_k).
template <class Q, int T, class K>
inline void xblock(const uint8_t* gp, const Group& g, const int8_t* const* xq, K k, __m256i* v) {
  const __m256i wv = Q::levels(gp, g, k);
  const __m256i pw = Q::pairs(g, k);
  const __m256i uw = Q::kSigned ? _mm256_sign_epi8(wv, wv) : wv;  // |w| (-128 -> 128 as u8)
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256i xv = ld256(xq[t] + kXBlock * int(k));
    const __m256i sx = Q::kSigned ? _mm256_sign_epi8(xv, wv) : xv;
    v[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, sx), pw);
  }
}

// Lane sums of four vectors -> per 128-bit half [sum a, sum b, sum c, sum d] (of that half).
// (Tried: the same by unpack + add, 0.88-0.94x on Zen 5.)
inline __m256i hadd4(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}

// I[t] lane k = I_k, the integer dot of x-block k (k in K...; 0 for the other lanes) for each
// token: the eight lane sums are reduced together (two hadd levels, then the two 128-bit halves),
// so a group costs one cvt and one FMA per token instead of one per x-block. K... is 0..7 for a
// full group and 0..nk-1 for the last, partial group of a Q8_0 / Q4_0 row (compile-time either
// way, so every x-block is unrolled). (Tried: summing the maddubs outputs of 2-4 x-blocks first
// with hadd_epi16, which fits in s16 for the 4-6 bit types, then one madd per 2-4 x-blocks:
// fewer instructions, but 0.84-0.92x on Zen 5 for Q5_K / Q6_K, no gain for Q4_K.)
template <class Q, int T, int... K>
inline void group_dots(const uint8_t* gp, const Group& g, const int8_t* const* xq, __m256i* I,
                       std::integer_sequence<int, K...>) {
  __m256i v[kGroup][T];
  for (int k = int(sizeof...(K)); k < kGroup; ++k)
    for (int t = 0; t < T; ++t) v[k][t] = _mm256_setzero_si256();
  (xblock<Q, T>(gp, g, xq, std::integral_constant<int, K>{}, v[K]), ...);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256i lo = hadd4(v[0][t], v[1][t], v[2][t], v[3][t]);
    const __m256i hi = hadd4(v[4][t], v[5][t], v[6][t], v[7][t]);
    I[t] = _mm256_add_epi32(_mm256_blend_epi32(lo, hi, 0xf0), _mm256_permute2x128_si256(lo, hi, 0x21));
  }
}
template <class Q, int T>
inline void tail_dots(const uint8_t* gp, const Group& g, const int8_t* const* xq, int nk, __m256i* I) {
  switch (nk) {
    case 1: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 1>{});
    case 2: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 2>{});
    case 3: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 3>{});
    case 4: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 4>{});
    case 5: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 5>{});
    case 6: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 6>{});
    default: return group_dots<Q, T>(gp, g, xq, I, std::make_integer_sequence<int, 7>{});
  }
}

// y[t0 + t, o0 + r] for r < R, t < T.  acts: [n] QActs; y: [n, n_out].
// Per group and (row, token): acc += cvt(I) · (s · d_x) (lane k: x-block k; cvt is exact, |I_k| <
// 2^24) and off += off_row · ds; y = hsum(acc) + kOffMul · hsum(off).
template <class Q, int R, int T>
void tile_kernel(const Linear& w, int64_t o0, const QActs* acts, int64_t t0, float* y) {
  const int64_t n_in = w.n_in(), n_out = w.n_out(), nb = n_in / kXBlock;
  const size_t row_bytes = dtype_row_bytes(Q::kType, n_in);
  const int64_t pf = kRows * int64_t(row_bytes);  // this thread's next row group
  const uint8_t* rows[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = static_cast<const uint8_t*>(w.w.data) + size_t(o0 + r) * row_bytes;
  __m256 acc[R][T], off[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps(), off[r][t] = _mm256_setzero_ps();

  const int64_t n_groups = (nb + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < n_groups; ++g) {
    const int nk = int(std::min<int64_t>(kGroup, nb - g * kGroup));
    const int8_t* xq[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xq[t] = acts[t0 + t].q + g * kGroup * kXBlock;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* gp = rows[r] + g * Q::kGroupBytes;
      // Rows are short streams the hardware prefetchers pick up late (see gemv.cpp).
#pragma GCC unroll 8
      for (int b = 0; b < Q::kGroupBytes; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(gp + pf + b), _MM_HINT_T0);
      Group gr;
      Q::begin(gp, nk, &gr);
      __m256i I[T];
      if constexpr (Q::kRagged) {
        if (nk == kGroup) group_dots<Q, T>(gp, gr, xq, I, std::make_integer_sequence<int, kGroup>{});
        else tail_dots<Q, T>(gp, gr, xq, nk, I);  // the last group of a row not a multiple of 256
      } else {
        group_dots<Q, T>(gp, gr, xq, I, std::make_integer_sequence<int, kGroup>{});
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const QActs& a = acts[t0 + t];
        if constexpr (Q::kIntOffset) {  // lane k: O_k = sc_2k S_2k + sc_2k+1 S_2k+1
          const __m256i o = _mm256_madd_epi16(gr.sc16, ld256(a.sum16 + 2 * g * kGroup));
          I[t] = _mm256_sub_epi32(I[t], _mm256_slli_epi32(o, 5));
        }
        const __m256 sd = _mm256_mul_ps(gr.scale, _mm256_load_ps(a.d + g * kGroup));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[t]), sd, acc[r][t]);
        if constexpr (Q::kOffsets == 1)
          off[r][t] = _mm256_fmadd_ps(gr.off, _mm256_load_ps(a.ds + g * kGroup), off[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float a = hsum(acc[r][t]);
      y[(t0 + t) * n_out + o0 + r] = Q::kOffsets ? std::fma(Q::kOffMul, hsum(off[r][t]), a) : a;
    }
}

using TileFn = void (*)(const Linear&, int64_t, const QActs*, int64_t, float*);

// kTiles<Q>[R - 1][T - 1]; kMaxRows[T - 1] picks R for T tokens (R·T <= 8 accumulators plus as
// many offset accumulators).
template <class Q>
constexpr TileFn kTiles[4][4] = {
    {tile_kernel<Q, 1, 1>, tile_kernel<Q, 1, 2>, tile_kernel<Q, 1, 3>, tile_kernel<Q, 1, 4>},
    {tile_kernel<Q, 2, 1>, tile_kernel<Q, 2, 2>, tile_kernel<Q, 2, 3>, tile_kernel<Q, 2, 4>},
    {tile_kernel<Q, 3, 1>, tile_kernel<Q, 3, 2>, nullptr, nullptr},
    {tile_kernel<Q, 4, 1>, tile_kernel<Q, 4, 2>, nullptr, nullptr},
};
constexpr int kMaxRows[4] = {4, 4, 2, 2};

template <class Q>
void qgemv_typed(const Tensor& x, const Linear& w, Tensor& y) {
  const int64_t n = x.dim(0), n_in = w.n_in(), n_out = w.n_out();
  // Quantize each token's activations once (shared by all threads, read-only below).
  const size_t per = qacts_floats(n_in);
  float* mem = scratch(2, per * size_t(n));
  QActs acts[kGemmMinN];
  for (int64_t t = 0; t < n; ++t) {
    acts[t] = qacts_view(mem + size_t(t) * per, n_in);
    quantize_acts(x.f32() + t * n_in, n_in, acts[t]);
  }
  float* yp = y.f32();
  gemv_tiles(n, n_out, n_in, kMaxRows, [&](int64_t o0, int rr, int64_t t0, int tt) {
    kTiles<Q>[rr - 1][tt - 1](w, o0, acts, t0, yp);
  });
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

int64_t qacts_padded_blocks(int64_t n_in) {
  const int64_t nb = n_in / kXBlock;
  return (nb + kGroup - 1) / kGroup * kGroup;
}

// Layout of one token (np = padded blocks, a multiple of 8, so every array starts 32-byte aligned):
// q [32 np] bytes | d [np] | ds [np] f32 | sum16 [2 np] int16.
size_t qacts_floats(int64_t n_in) { return size_t(11 * qacts_padded_blocks(n_in)); }

QActs qacts_view(float* mem, int64_t n_in) {
  const int64_t np = qacts_padded_blocks(n_in);
  QActs a;
  a.q = reinterpret_cast<int8_t*>(mem);
  a.d = mem + 8 * np;
  a.ds = a.d + np;
  a.sum16 = reinterpret_cast<int16_t*>(a.ds + np);
  return a;
}

void quantize_acts(const float* x, int64_t n_in, const QActs& out) {
  const int64_t nb = n_in / kXBlock, np = qacts_padded_blocks(n_in);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kXBlock;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                   _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float d = hmax(m) / 127.0f;
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) {
      // x / d (a division, not x · (1/d): exactly the definition), rounded to nearest even.
      qi[i] = d == 0.0f ? _mm256_setzero_si256()
                        : _mm256_cvtps_epi32(_mm256_div_ps(v[i], _mm256_set1_ps(d)));
      qi[i] = _mm256_max_epi32(_mm256_min_epi32(qi[i], lim), nlim);
    }
    // s32 -> s8: packs work per 128-bit lane, the permute restores element order.
    const __m256i q16a = _mm256_packs_epi32(qi[0], qi[1]), q16b = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + b * kXBlock), q8);
    const int32_t s0 = hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
    const int32_t s1 = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
    out.d[b] = d;
    out.sum16[2 * b] = int16_t(s0);
    out.sum16[2 * b + 1] = int16_t(s1);
    out.ds[b] = d * float(s0 + s1);
  }
  for (int64_t b = nb; b < np; ++b) {
    std::memset(out.q + b * kXBlock, 0, kXBlock);
    out.d[b] = out.ds[b] = 0.0f;
    out.sum16[2 * b] = out.sum16[2 * b + 1] = 0;
  }
}

void qgemv(const Tensor& x, const Linear& w, Tensor& y) {
  switch (w.w.dtype) {
    case DType::kQ8_0: return qgemv_typed<Q8_0Kern>(x, w, y);
    case DType::kQ4_0: return qgemv_typed<Q4_0Kern>(x, w, y);
    case DType::kQ4_K: return qgemv_typed<Q4KKern>(x, w, y);
    case DType::kQ5_K: return qgemv_typed<Q5KKern>(x, w, y);
    case DType::kQ6_K: return qgemv_typed<Q6KKern>(x, w, y);
    default: MMX_CHECK(false, "qgemv: {} is not block-quantized", dtype_name(w.w.dtype));
  }
}

}  // namespace mmx::ops::cpu
