// Block layouts of the GGUF quantized types (byte-compatible with llama.cpp's ggml files).
//
// A row of n weights is n / block consecutive blocks; the layouts below are the file format
// (little-endian, packed, fp16 scales as raw IEEE half bits). What each element decodes to:
//
//   Q8_0  (32, 34 B)   w[j] = d · qs[j]                         qs int8
//   Q4_0  (32, 18 B)   w[j] = d · ((qs[j] & 15) - 8),  w[j+16] = d · ((qs[j] >> 4) - 8),  j < 16
//   Q4_K  (256, 144 B) 8 sub-blocks of 32 with a 6-bit scale sc_s and 6-bit min m_s each
//                      (scale_min_k4), super scales d and dmin:  w = d·sc_s · q - dmin·m_s.
//                      q (4 bits): element 64c + l (l < 32) is qs[32c + l] & 15 (sub-block 2c),
//                      element 64c + 32 + l is qs[32c + l] >> 4 (sub-block 2c + 1).
//   Q5_K  (256, 176 B) as Q4_K with a fifth bit: element 64c + l adds 16 if qh[l] bit 2c is set,
//                      element 64c + 32 + l adds 16 if qh[l] bit 2c + 1 is set (q in 0..31).
//   Q6_K  (256, 210 B) 16 sub-blocks of 16 with int8 scales, one fp16 d:  w = d · sc[s] · (q - 32).
//                      Halves h = 0, 1 of 128 elements; within a half, for l < 32:
//                        e = 128h + l      : q = (ql[64h + l] & 15)      | ((qh[32h + l] >> 0) & 3) << 4
//                        e = 128h + 32 + l : q = (ql[64h + 32 + l] & 15) | ((qh[32h + l] >> 2) & 3) << 4
//                        e = 128h + 64 + l : q = (ql[64h + l] >> 4)      | ((qh[32h + l] >> 4) & 3) << 4
//                        e = 128h + 96 + l : q = (ql[64h + 32 + l] >> 4) | ((qh[32h + l] >> 6) & 3) << 4
//                      and sub-block s = e / 16.
#pragma once

#include <cstdint>

namespace mmx {

inline constexpr int kQ8_0Block = 32;
inline constexpr int kQ4_0Block = 32;
inline constexpr int kQkBlock = 256;  // super-block of the K types

struct BlockQ8_0 {
  uint16_t d;  // fp16
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[16];
};
struct BlockQ4K {
  uint16_t d;     // fp16, scale of the 6-bit sub-block scales
  uint16_t dmin;  // fp16, scale of the 6-bit sub-block mins
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4K) == 144 &&
                  sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210,
              "GGUF block layouts must be packed");

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K / Q5_K block: sub-blocks 0..3 keep
// theirs in the low 6 bits of scales[s] and scales[s + 4]; sub-blocks 4..7 keep the low 4 bits
// in scales[s + 4] (scale: low nibble, min: high nibble) and the high 2 bits in the top bits of
// scales[s - 4] (scale) and scales[s] (min).
inline void scale_min_k4(const uint8_t* q, int s, uint8_t* sc, uint8_t* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = uint8_t((q[s + 4] & 15) | ((q[s - 4] >> 6) << 4));
    *m = uint8_t((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
  }
}

// The inverse: packs 8 scales and 8 mins (each < 64) into scales[12].
inline void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  for (int s = 0; s < 4; ++s) {
    q[s] = uint8_t((sc[s] & 63) | ((sc[s + 4] >> 4) << 6));
    q[s + 4] = uint8_t((m[s] & 63) | ((m[s + 4] >> 4) << 6));
    q[s + 8] = uint8_t((sc[s + 4] & 15) | ((m[s + 4] & 15) << 4));
  }
}

}  // namespace mmx
