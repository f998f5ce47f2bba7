// Private: the fast CPU implementations behind mmx::ops::* (AVX2/FMA/F16C + OpenMP).
//
// src/ops/ops.cpp validates shapes and dtypes, then calls these; they assume valid arguments.
// Contracts are those of ops.h. Every function here is deterministic and its result does not
// depend on the thread count: work is split over independent outputs (rows, heads, column
// blocks), never inside one reduction.
//
// Not here: the reference implementations (src/ops/ref), argument checking.
#pragma once

#include <algorithm>

#include <cstddef>
#include <cstdint>

#include "ops/ops.h"

namespace mmx::ops::cpu {

// ---- threads / scratch (threads.cpp) ----
// Resolved thread count for OpenMP regions (>= 1).
int threads();
// A per-thread, 64-byte aligned float buffer of at least n floats, reused across calls; `slot`
// (0..kScratchSlots-1) selects one of several independent buffers. Grows, never shrinks.
inline constexpr int kScratchSlots = 3;
float* scratch(int slot, size_t n);

// ---- dequant.cpp ----
// out[0, k1-k0) = W[o, k0..k1) as f32 (block scale applied for F8E4M3).
void dequant_row_segment(const Linear& w, int64_t o, int64_t k0, int64_t k1, float* out);
void linear_dequant_rows(const Linear& w, int64_t row0, Tensor& out);  // out: [n_rows, n_in]
void to_f32(const Tensor& x, Tensor& out);                             // out: same numel, F32
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);  // out: [n, d]

// ---- matmul: gemv.cpp (small n, streams W once per call) / gemm.cpp (packed, n >= kGemmMinN) ----
// Crossover measured single-threaded on [n x 3072] x [3072 x 1536]: the GEMV tiles win below
// ~32 tokens (fp8 n = 16: 43 vs 32 GFLOP/s), the packed GEMM above (n = 64: 50 vs 41).
inline constexpr int64_t kGemmMinN = 32;
void gemv(const Tensor& x, const Linear& w, Tensor& y);  // x: [n, n_in]; y: [n, n_out]
void gemm(const Tensor& x, const Linear& w, Tensor& y);  // x: [n, n_in]; y: [n, n_out]

// ---- the tile walk shared by gemv.cpp and qgemv.cpp ----
// Output rows in fixed groups of kGemvRows, split over threads by a static schedule (each
// thread's groups are contiguous, so it can prefetch its next group); within a group the tokens
// go in tiles of up to kGemvMaxT and the rows in tiles of max_rows[tt - 1] for tt tokens:
// tile(o0, rr, t0, tt) computes y[t0 .. t0 + tt, o0 .. o0 + rr). Parallel only when
// n_out · n_in · n >= 2^15 (tiny outputs are not worth waking threads for).
inline constexpr int kGemvRows = 4;
inline constexpr int kGemvMaxT = 4;
template <class Tile>
void gemv_tiles(int64_t n, int64_t n_out, int64_t n_in, const int* max_rows, const Tile& tile) {
  const int64_t n_groups = (n_out + kGemvRows - 1) / kGemvRows;
  const bool par = n_out * n_in * n >= (int64_t(1) << 15);
#pragma omp parallel for schedule(static) num_threads(threads()) if (par)
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t o_begin = g * kGemvRows, o_end = std::min(n_out, o_begin + kGemvRows);
    for (int64_t t0 = 0; t0 < n; t0 += kGemvMaxT) {
      const int tt = int(std::min<int64_t>(kGemvMaxT, n - t0));
      const int r_max = max_rows[tt - 1];
      for (int64_t o0 = o_begin; o0 < o_end; o0 += r_max) tile(o0, int(std::min<int64_t>(r_max, o_end - o0)), t0, tt);
    }
  }
}

// ---- qgemv.cpp: GGUF block-quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), n < kGemmMinN ----
// x is quantized once per call and token to QActs, then dotted in int8 with the weight blocks.
// QActs, one token's row of n_in (a multiple of 32) activations in blocks of 32; nb = n_in / 32,
// every array zero-padded to a multiple of 8 blocks (np = qacts_padded_blocks(n_in)):
//   d[b]      f32   max_{i in b} |x[i]| / 127                       [np]
//   q[i]      int8  clamp(rne(x[i] / d[b]), -127, 127), 0 if d[b] == 0   [32 np]
//   sum16[h]  int16 sum of q over the h-th run of 16 (block b = runs 2b, 2b + 1; Q6_K's -32
//                   offset, in integers)   [2 np]
//   ds[b]     f32   d[b] * (sum16[2b] + sum16[2b + 1])  (Q4_0's -8 offset, the K-type mins)   [np]
// So x[i] = d[b] * q[i] + e with |e| <= d[b] / 2 (plus the rounding of x[i] / d[b]).
struct QActs {
  int8_t* q;
  float* d;
  int16_t* sum16;
  float* ds;
};
int64_t qacts_padded_blocks(int64_t n_in);
size_t qacts_floats(int64_t n_in);           // floats one token's QActs occupies
QActs qacts_view(float* mem, int64_t n_in);  // mem: 32-byte aligned, qacts_floats(n_in) floats
void quantize_acts(const float* x, int64_t n_in, const QActs& out);
void qgemv(const Tensor& x, const Linear& w, Tensor& y);  // x: [n < kGemmMinN, n_in] F32; y: [n, n_out]
// ---- qgemm.cpp: the same types for n >= kGemmMinN: int8 panels unpacked once for all tokens;
// every y element has the bits qgemv would give it (same QActs, same f32 steps per output).
void qgemm(const Tensor& x, const Linear& w, Tensor& y);  // x: [n, n_in] F32; y: [n, n_out]

// ---- elementwise.cpp ----
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y);
void add(Tensor& x, const Tensor& y);
void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out);
void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out);
void silu(Tensor& x);
void mul_sigmoid(Tensor& x, const Tensor& gate);
void scale_add(Tensor& x, float a, const Tensor& y, float b);

// ---- rope.cpp / attention.cpp / moe.cpp / rows.cpp ----
void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta);
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out);
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights);
void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights);  // moe_softmax.cpp
void attention_lightning(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
                         Tensor& out);  // lightning.cpp
void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst);
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst);

}  // namespace mmx::ops::cpu
