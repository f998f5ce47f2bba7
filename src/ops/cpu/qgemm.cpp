// Matmul on GGUF block-quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) for n >= kGemmMinN
// (prefill, large MoE expert batches): y[n, n_out] = x[n, n_in] · Wᵀ in int8 × int8, with the
// same arithmetic as qgemv.cpp, so every y element has the same bits it would get from the GEMV.
//
// What the GEMV computes for (row o, token t) — see qgemv.cpp for the per-type meaning of the
// weight levels l, the weight-side scale s_b and the offset terms:
//   per 32-wide x-block b (b = 8g + k, group g of 256 inputs, lane k of an f32 vector):
//     I_b = sum_i l_i q_i (exact, int32)       acc_k = fma(f32(I_b), s_b · d_b, acc_k)
//     (Q6_K: I_b -= 32 O_b, O_b = sc_2b S_2b + sc_2b+1 S_2b+1 from the activation's 16-run sums)
//   per group and lane j:                      off_j = fma(o_j, ds_j, off_j)  (Q4_0, Q4_K, Q5_K)
//   y = hsum(acc) (+ kOffMul · hsum(off) as one fma)
// The integer sums are exact in any order, and the f32 steps are per (row, token, lane k) and in
// group order, so they can be done in a different layout without changing a bit. This file uses
// the layout that suits many tokens:
//
//   panel    a task's 16 output rows ("columns" of y), unpacked once for all n tokens: for each
//            group, block k and quad q (4 inputs), one 32-byte vector holds the 4 levels of 8 rows
//            (row r in dword lane r), plus the per-row s_k, o_j (f32, row r in lane r) and Q6_K's
//            16-wide sub-block scales as s16 pairs (for the madd and for O_b). ~10 KiB per
//            group: the panel stays in L2.
//   micro    T tokens × 16 rows: per quad, a token's 4 activation bytes are broadcast and
//            maddubs'd with the two level vectors; no horizontal reductions. maddubs results are
//            summed in int16 as long as that cannot overflow (Q4: all 8 quads, Q5_K: 4, Q6_K: 2,
//            Q8_0: 1) before one madd to int32 (with ones, or Q6_K's sub-block scales).
//   f32      acc_k and off_j for (token, 8 rows) live in a small L1 array, one vector per lane k
//            of the GEMV (k = 0..7), updated per block / group in group order; the final hsum
//            over k is done vertically in hsum()'s order ((0+4)+(2+6)) + ((1+5)+(3+7)).
// Tasks (16-row panels × token blocks) are split over threads by a static schedule; results do not
// depend on the thread count or on which other tokens are in the batch.
//
// Not here: n < kGemmMinN (qgemv.cpp streams W for few tokens), unquantized weights (gemm.cpp).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "base/qblocks.h"
#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kXBlock = 32;  // activation block (QActs)
constexpr int kGroup = 8;    // x-blocks per group (256 inputs)
constexpr int kQuads = 8;    // 4-input quads per x-block
constexpr int kCols = 16;    // rows of W per panel (two 8-lane vectors)
constexpr int kTok = 3;      // tokens per micro-tile (measured: 3 beats 2 and 4 for every type)

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline int32_t ld32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float f16(const uint8_t* p) { return _cvtsh_ss(ld16(p)); }
inline __m256i ld256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// One group of a panel. lv[k][q][c] dword lane r: levels 32k + 4q .. +4 of panel row 8c + r
// (Q8_0: |w|, with the signed bytes in sg for the sign trick).
struct alignas(32) PGroup {
  __m256i lv[kGroup][kQuads][2];
  __m256i sg[kGroup][kQuads][2];  // Q8_0 only
  __m256 s[kGroup][2];            // s_k (weight-side factor of x-block k)
  __m256 o0[kGroup][2];            // offset / min factors
  __m256i pw[kGroup][2][2];       // Q6_K: [k][half][c] the 16-wide sub-block scale, as s16 pairs
  __m256i po[kGroup][2];          // Q6_K: [k][c] the s16 pair (sc_2k, sc_2k+1), for O_k
};

// One row's group unpacked: the 8 x-blocks' 32 levels, and the header scalars (bitwise the
// values qgemv.cpp's Group holds: products of an fp16 -> f32 scale and a small integer).
struct RowGroup {
  __m256i lv[kGroup];
  float s[kGroup], o0[kGroup];
  int8_t sc[16];  // Q6_K sub-block scales
};

// Per type: kType, kPerMadd (maddubs results summed in int16 before a madd: 2·l_max·127 per
// madd lane times kPerMadd must stay < 2^15), kSigned, kOffsets (0, 1 as in qgemv.cpp),
// kOffMul, kIntOffset (Q6_K's -32 in integers, as in qgemv.cpp), kRagged (rows may end in a
// partial group), kGroupBytes, unpack(p, nk, RowGroup*).
struct Q8_0Kern {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kPerMadd = 1, kOffsets = 0, kGroupBytes = kGroup * 34;
  static constexpr bool kSigned = true, kRagged = true;
  static constexpr float kOffMul = 0.0f;
  static constexpr bool kIntOffset = false;
  static void unpack(const uint8_t* p, int nk, RowGroup* g) {
    for (int k = 0; k < kGroup; ++k) {
      g->lv[k] = k < nk ? ld256(p + 34 * k + 2) : _mm256_setzero_si256();
      g->s[k] = k < nk ? f16(p + 34 * k) : 0.0f;
    }
  }
};

struct Q4_0Kern {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kPerMadd = 8, kOffsets = 1, kGroupBytes = kGroup * 18;
  static constexpr bool kSigned = false, kRagged = true;
  static constexpr float kOffMul = -8.0f;
  static constexpr bool kIntOffset = false;
  static void unpack(const uint8_t* p, int nk, RowGroup* g) {
    const __m128i m4 = _mm_set1_epi8(15);
    for (int k = 0; k < kGroup; ++k) {
      if (k >= nk) {
        g->lv[k] = _mm256_setzero_si256();
        g->s[k] = g->o0[k] = 0.0f;
        continue;
      }
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18 * k + 2));
      g->lv[k] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
      g->s[k] = g->o0[k] = f16(p + 18 * k);
    }
  }
};

// Q4_K / Q5_K header: s_k = d · sc_k, o_k = dmin · m_k.
inline void k4_header(const uint8_t* p, RowGroup* g) {
  const float d = f16(p), dmin = f16(p + 2);
  for (int k = 0; k < kGroup; ++k) {
    uint8_t sc, m;
    scale_min_k4(p + 4, k, &sc, &m);
    g->s[k] = d * float(sc);
    g->o0[k] = dmin * float(m);
  }
}

struct Q4KKern {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kPerMadd = 8, kOffsets = 1, kGroupBytes = sizeof(BlockQ4K);
  static constexpr bool kSigned = false, kRagged = false;
  static constexpr float kOffMul = -1.0f;
  static constexpr bool kIntOffset = false;
  static void unpack(const uint8_t* p, int, RowGroup* g) {
    k4_header(p, g);
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = ld256(p + offsetof(BlockQ4K, qs) + 32 * c);
      g->lv[2 * c] = _mm256_and_si256(v, m4);
      g->lv[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
  }
};

struct Q5KKern {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kPerMadd = 4, kOffsets = 1, kGroupBytes = sizeof(BlockQ5K);
  static constexpr bool kSigned = false, kRagged = false;
  static constexpr float kOffMul = -1.0f;
  static constexpr bool kIntOffset = false;
  static void unpack(const uint8_t* p, int, RowGroup* g) {
    k4_header(p, g);
    const __m256i m4 = _mm256_set1_epi8(15), h = ld256(p + offsetof(BlockQ5K, qh));
    for (int k = 0; k < kGroup; ++k) {
      const __m256i v = ld256(p + offsetof(BlockQ5K, qs) + 32 * (k / 2));
      const __m256i lo = _mm256_and_si256(k % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
      // bit k of each qh byte -> 16 (shift right by k within the byte, then to bit 4)
      const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(k)), _mm256_set1_epi8(1));
      g->lv[k] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
    }
  }
};

struct Q6KKern {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kPerMadd = 2, kOffsets = 0, kGroupBytes = sizeof(BlockQ6K);
  static constexpr bool kSigned = false, kRagged = false;
  static constexpr float kOffMul = 0.0f;
  static constexpr bool kIntOffset = true;
  static void unpack(const uint8_t* p, int, RowGroup* g) {
    const float d = f16(p + offsetof(BlockQ6K, d));
    std::memcpy(g->sc, p + offsetof(BlockQ6K, scales), 16);
    for (int j = 0; j < kGroup; ++j) g->s[j] = d, g->o0[j] = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int k = 0; k < kGroup; ++k) {  // x-block k = 4h + j (base/qblocks.h)
      const int h = k / 4, j = k % 4;
      const __m256i lo = ld256(p + offsetof(BlockQ6K, ql) + 64 * h + 32 * (j & 1));
      const __m256i hi = ld256(p + offsetof(BlockQ6K, qh) + 32 * h);
      const __m256i l4 = _mm256_and_si256(j < 2 ? lo : _mm256_srli_epi16(lo, 4), m4);
      const __m256i h2 = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * j)), m2);
      g->lv[k] = _mm256_or_si256(l4, _mm256_slli_epi16(h2, 4));
    }
  }
};

// panel[g] for rows o0 .. o0 + 16 (rows >= n_out: zeros, never stored to y).
template <class Q>
void pack_panel(const Linear& w, int64_t o0, int64_t n_groups, int64_t nb, PGroup* panel) {
  const int64_t n_out = w.n_out();
  const size_t row_bytes = dtype_row_bytes(Q::kType, w.n_in());
  const auto* base = static_cast<const uint8_t*>(w.w.data);
  for (int64_t g = 0; g < n_groups; ++g) {
    PGroup& P = panel[g];
    const int nk = int(std::min<int64_t>(kGroup, nb - g * kGroup));
    for (int c = 0; c < 2; ++c) {
      RowGroup rg[8];
      for (int r = 0; r < 8; ++r) {
        const int64_t o = o0 + 8 * c + r;
        if (o < n_out) {
          Q::unpack(base + size_t(o) * row_bytes + size_t(g) * Q::kGroupBytes, nk, &rg[r]);
        } else {
          for (auto& v : rg[r].lv) v = _mm256_setzero_si256();
          std::fill(std::begin(rg[r].s), std::end(rg[r].s), 0.0f);
          std::fill(std::begin(rg[r].o0), std::end(rg[r].o0), 0.0f);
          std::fill(std::begin(rg[r].sc), std::end(rg[r].sc), int8_t(0));
        }
      }
      for (int k = 0; k < kGroup; ++k) {
        __m256 v[8];
        for (int r = 0; r < 8; ++r) v[r] = _mm256_castsi256_ps(rg[r].lv[k]);
        transpose8(v);  // v[q] lane r = row r's dword q
        for (int q = 0; q < kQuads; ++q) {
          const __m256i wq = _mm256_castps_si256(v[q]);
          if constexpr (Q::kSigned) {
            P.lv[k][q][c] = _mm256_sign_epi8(wq, wq);  // |w| (-128 -> 128 as u8)
            P.sg[k][q][c] = wq;
          } else {
            P.lv[k][q][c] = wq;
          }
        }
      }
      __m256 s[8], o[8];
      for (int r = 0; r < 8; ++r) {
        s[r] = _mm256_loadu_ps(rg[r].s);
        o[r] = _mm256_loadu_ps(rg[r].o0);
      }
      transpose8(s);
      transpose8(o);
      for (int k = 0; k < kGroup; ++k) P.s[k][c] = s[k], P.o0[k][c] = o[k];
      if constexpr (Q::kIntOffset) {
        const auto pair = [](int32_t lo, int32_t hi) {
          return int32_t((uint32_t(lo) & 0xffffu) | (uint32_t(hi) << 16));
        };
        for (int k = 0; k < kGroup; ++k) {
          alignas(32) int32_t lane[3][8];
          for (int r = 0; r < 8; ++r) {
            const int32_t a = rg[r].sc[2 * k], b = rg[r].sc[2 * k + 1];
            lane[0][r] = pair(a, a), lane[1][r] = pair(b, b), lane[2][r] = pair(a, b);
          }
          P.pw[k][0][c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane[0]));
          P.pw[k][1][c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane[1]));
          P.po[k][c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane[2]));
        }
      }
    }
  }
}

// The f32 state of one micro-tile: acc[k][t][c], off[j][t][c] (lanes: the 8 rows of vector c).
template <int T>
struct Accs {
  __m256 acc[kGroup][T][2];
  __m256 off[kGroup][T][2];
};

// The integer dots of x-block k of group P for T tokens: I[t][c] lane r = I_b of (row 8c + r,
// token t). xq[t]: token t's activations at this group.
template <class Q, int T>
inline void block_dots(const PGroup& P, int k, const int8_t* const* xq, __m256i I[T][2]) {
  __m256i a16[T][2];
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int q = 0; q < kQuads; ++q) {
    const __m256i w0 = _mm256_load_si256(&P.lv[k][q][0]), w1 = _mm256_load_si256(&P.lv[k][q][1]);
    __m256i s0, s1;
    if constexpr (Q::kSigned) s0 = _mm256_load_si256(&P.sg[k][q][0]), s1 = _mm256_load_si256(&P.sg[k][q][1]);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i xb = _mm256_set1_epi32(ld32(xq[t] + kXBlock * k + 4 * q));
      __m256i p0, p1;
      if constexpr (Q::kSigned) {
        p0 = _mm256_maddubs_epi16(w0, _mm256_sign_epi8(xb, s0));
        p1 = _mm256_maddubs_epi16(w1, _mm256_sign_epi8(xb, s1));
      } else {
        p0 = _mm256_maddubs_epi16(w0, xb);
        p1 = _mm256_maddubs_epi16(w1, xb);
      }
      if (q % Q::kPerMadd == 0) {
        a16[t][0] = p0, a16[t][1] = p1;
      } else {
        a16[t][0] = _mm256_add_epi16(a16[t][0], p0);
        a16[t][1] = _mm256_add_epi16(a16[t][1], p1);
      }
      if (q % Q::kPerMadd == Q::kPerMadd - 1) {
        __m256i m0, m1;
        if constexpr (Q::kIntOffset) {
          m0 = _mm256_madd_epi16(a16[t][0], _mm256_load_si256(&P.pw[k][q / 4][0]));
          m1 = _mm256_madd_epi16(a16[t][1], _mm256_load_si256(&P.pw[k][q / 4][1]));
        } else {
          m0 = _mm256_madd_epi16(a16[t][0], ones);
          m1 = _mm256_madd_epi16(a16[t][1], ones);
        }
        if (q == Q::kPerMadd - 1) {
          I[t][0] = m0, I[t][1] = m1;
        } else {
          I[t][0] = _mm256_add_epi32(I[t][0], m0);
          I[t][1] = _mm256_add_epi32(I[t][1], m1);
        }
      }
    }
  }
}

// y[t0 .. t0 + T, o0 .. o0 + 16) from the panel (T tokens; all groups).
template <class Q, int T>
void micro(const PGroup* panel, int64_t n_groups, const QActs* acts, int64_t t0, int64_t o0,
           int64_t n_out, float* y, Accs<T>* st) {
  for (int k = 0; k < kGroup; ++k)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < 2; ++c) st->acc[k][t][c] = st->off[k][t][c] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_groups; ++g) {
    const PGroup& P = panel[g];
    const int8_t* xq[T];
    for (int t = 0; t < T; ++t) xq[t] = acts[t0 + t].q + g * kGroup * kXBlock;
#pragma GCC unroll 1
    for (int k = 0; k < kGroup; ++k) {
      __m256i I[T][2];
      block_dots<Q, T>(P, k, xq, I);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_broadcast_ss(acts[t0 + t].d + g * kGroup + k);
        if constexpr (Q::kIntOffset) {  // lane r: I -= 32 (sc_2k S_2k + sc_2k+1 S_2k+1)
          const __m256i sums = _mm256_set1_epi32(ld32(acts[t0 + t].sum16 + 2 * (g * kGroup + k)));
          for (int c = 0; c < 2; ++c)
            I[t][c] = _mm256_sub_epi32(I[t][c], _mm256_slli_epi32(_mm256_madd_epi16(P.po[k][c], sums), 5));
        }
#pragma GCC unroll 2
        for (int c = 0; c < 2; ++c) {
          const __m256 sd = _mm256_mul_ps(P.s[k][c], dx);
          st->acc[k][t][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[t][c]), sd, st->acc[k][t][c]);
        }
      }
    }
    if constexpr (Q::kOffsets > 0) {
      for (int t = 0; t < T; ++t) {
        const QActs& a = acts[t0 + t];
#pragma GCC unroll 8
        for (int j = 0; j < kGroup; ++j) {
          const __m256 ds = _mm256_broadcast_ss(a.ds + g * kGroup + j);
          for (int c = 0; c < 2; ++c) st->off[j][t][c] = _mm256_fmadd_ps(P.o0[j][c], ds, st->off[j][t][c]);
        }
      }
    }
  }
  // hsum over k in simd.h's hsum order, one vector of 8 rows at a time.
  const auto vsum = [](const __m256 (*v)[T][2], int t, int c) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0][t][c], v[4][t][c]), _mm256_add_ps(v[2][t][c], v[6][t][c])),
                         _mm256_add_ps(_mm256_add_ps(v[1][t][c], v[5][t][c]), _mm256_add_ps(v[3][t][c], v[7][t][c])));
  };
  const int cols = int(std::min<int64_t>(kCols, n_out - o0));
  for (int t = 0; t < T; ++t) {
    float* yr = y + (t0 + t) * n_out + o0;
    alignas(32) float out[kCols];
    for (int c = 0; c < 2; ++c) {
      __m256 r = vsum(st->acc, t, c);
      if constexpr (Q::kOffsets > 0) r = _mm256_fmadd_ps(_mm256_set1_ps(Q::kOffMul), vsum(st->off, t, c), r);
      if (cols == kCols) _mm256_storeu_ps(yr + 8 * c, r);
      else _mm256_store_ps(out + 8 * c, r);
    }
    if (cols < kCols) std::memcpy(yr, out, size_t(cols) * sizeof(float));
  }
}

template <class Q>
void micro_tail(int tt, const PGroup* panel, int64_t n_groups, const QActs* acts, int64_t t0,
                int64_t o0, int64_t n_out, float* y, void* st) {
  static_assert(kTok == 3, "micro_tail handles 1 or 2 leftover tokens");
  if (tt == 1) micro<Q, 1>(panel, n_groups, acts, t0, o0, n_out, y, static_cast<Accs<1>*>(st));
  else micro<Q, 2>(panel, n_groups, acts, t0, o0, n_out, y, static_cast<Accs<2>*>(st));
}

template <class Q>
void qgemm_typed(const Tensor& x, const Linear& w, Tensor& y) {
  const int64_t n = x.dim(0), n_in = w.n_in(), n_out = w.n_out();
  const int64_t nb = n_in / kXBlock, n_groups = (nb + kGroup - 1) / kGroup;
  const int nt = threads();

  // Activations: quantized once per token, shared read-only by every task. The QActs headers
  // live after the token data in the calling thread's scratch slot 2 (tasks use slots 0 and 1).
  const size_t per = qacts_floats(n_in);
  const size_t hdr = (size_t(n) * sizeof(QActs) + sizeof(float) - 1) / sizeof(float);
  float* mem = scratch(2, per * size_t(n) + hdr + 16);
  auto* acts = reinterpret_cast<QActs*>(mem + per * size_t(n));
  const float* xp = x.f32();
  const bool par_q = n * n_in >= (int64_t(1) << 15);
#pragma omp parallel for schedule(static) num_threads(nt) if (par_q)
  for (int64_t t = 0; t < n; ++t) {
    acts[t] = qacts_view(mem + size_t(t) * per, n_in);
    quantize_acts(xp + t * n_in, n_in, acts[t]);
  }

  // Tasks: 16-row panels × token blocks. Tokens are split only when there are too few panels to
  // keep every thread busy (each token block unpacks its panel again).
  const int64_t n_panels = (n_out + kCols - 1) / kCols;
  int64_t n_tok_blocks = 1;
  if (n_panels < 2 * nt) n_tok_blocks = std::min<int64_t>((n + 31) / 32, (2 * nt + n_panels - 1) / n_panels);
  const int64_t tok_block = ((n + n_tok_blocks - 1) / n_tok_blocks + kTok - 1) / kTok * kTok;
  n_tok_blocks = (n + tok_block - 1) / tok_block;
  const int64_t n_tasks = n_panels * n_tok_blocks;
  float* yp = y.f32();
  const bool par = n_tasks > 1 && n * n_in * n_out >= (int64_t(1) << 17);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t o0 = (task / n_tok_blocks) * kCols;
    const int64_t t_begin = (task % n_tok_blocks) * tok_block, t_end = std::min(n, t_begin + tok_block);
    auto* panel = reinterpret_cast<PGroup*>(scratch(0, size_t(n_groups) * sizeof(PGroup) / sizeof(float)));
    void* st = scratch(1, sizeof(Accs<kTok>) / sizeof(float));
    pack_panel<Q>(w, o0, n_groups, nb, panel);
    int64_t t0 = t_begin;
    for (; t0 + kTok <= t_end; t0 += kTok)
      micro<Q, kTok>(panel, n_groups, acts, t0, o0, n_out, yp, static_cast<Accs<kTok>*>(st));
    if (t0 < t_end) micro_tail<Q>(int(t_end - t0), panel, n_groups, acts, t0, o0, n_out, yp, st);
  }
}

}  // namespace

void qgemm(const Tensor& x, const Linear& w, Tensor& y) {
  switch (w.w.dtype) {
    case DType::kQ8_0: return qgemm_typed<Q8_0Kern>(x, w, y);
    case DType::kQ4_0: return qgemm_typed<Q4_0Kern>(x, w, y);
    case DType::kQ4_K: return qgemm_typed<Q4KKern>(x, w, y);
    case DType::kQ5_K: return qgemm_typed<Q5KKern>(x, w, y);
    case DType::kQ6_K: return qgemm_typed<Q6KKern>(x, w, y);
    default: MMX_CHECK(false, "qgemm: {} is not block-quantized", dtype_name(w.w.dtype));
  }
}

}  // namespace mmx::ops::cpu
