// Matmul for n >= kGemmMinN (prefill, MoE expert batches): y[n, n_out] = x[n, n_in] · Wᵀ, for
// unquantized weights (F32/F16/BF16/F8E4M3; GGUF block-quantized ones go to qgemm.cpp).
//
// Blocking (BLIS-style, sized for a 32 KiB L1 / 512 KiB L2 core):
//   task     = kPanels·kNr = 64 output columns × a block of tokens; tasks are spread over threads;
//   k-chunk  = kKc input channels: W[64 cols, kKc] is dequantized to f32 and packed transposed,
//              [kKc][16] per 16-column panel (64 KiB, stays in L2);
//   micro    = kMr = 6 tokens × 16 columns: 12 __m256 accumulators; per k one packed load pair,
//              6 broadcasts of x, 12 FMAs.
// Every y element is one fp32 FMA chain over k inside a chunk, and the chunk partials are added to
// y in k order; nothing depends on the thread count or the token blocking (bitwise).
//
// Not here: n < kGemmMinN (gemv.cpp), activation quantization (we dequantize W, never x).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/cpu.h"
#include "ops/cpu/simd.h"

namespace mmx::ops::cpu {

namespace {

constexpr int kNr = 16;            // output columns per packed panel (two __m256)
constexpr int kMr = 6;             // tokens per microtile
constexpr int kPanels = 4;         // panels per task
constexpr int64_t kKc = 256;       // input channels per k-chunk
constexpr int kTaskCols = kNr * kPanels;

// packed[k][c] = W[o0 + c, k0 + k] for c < cols, 0 for cols <= c < 16; k < kc.
//   tmp: [kNr][kKc] scratch; packed: [kc][kNr].
void pack_panel(const Linear& w, int64_t o0, int cols, int64_t k0, int64_t kc, float* tmp,
                float* packed) {
  for (int c = 0; c < kNr; ++c) {
    if (c < cols) dequant_row_segment(w, o0 + c, k0, k0 + kc, tmp + c * kKc);
    else std::memset(tmp + c * kKc, 0, size_t(kc) * sizeof(float));
  }
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(tmp + (half * 8 + i) * kKc + k);
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_store_ps(packed + (k + i) * kNr + half * 8, r[i]);
    }
  }
  for (; k < kc; ++k)
    for (int c = 0; c < kNr; ++c) packed[k * kNr + c] = tmp[c * kKc + k];
}

// y[m, 0..cols) (+)= sum_k x[m, k] · packed[k, 0..cols) for m < MR.
//   x: MR rows at stride ldx; packed: [kc][16]; y: MR rows at stride ldy.
template <int MR>
void micro(const float* x, int64_t ldx, const float* packed, int64_t kc, float* y, int64_t ldy,
           int cols, bool accumulate) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) c0[m] = c1[m] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(packed + k * kNr), w1 = _mm256_load_ps(packed + k * kNr + 8);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m256 a = _mm256_broadcast_ss(x + m * ldx + k);
      c0[m] = _mm256_fmadd_ps(a, w0, c0[m]);
      c1[m] = _mm256_fmadd_ps(a, w1, c1[m]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    float* yr = y + m * ldy;
    if (cols == kNr) {
      if (accumulate) {
        c0[m] = _mm256_add_ps(_mm256_loadu_ps(yr), c0[m]);
        c1[m] = _mm256_add_ps(_mm256_loadu_ps(yr + 8), c1[m]);
      }
      _mm256_storeu_ps(yr, c0[m]);
      _mm256_storeu_ps(yr + 8, c1[m]);
    } else {
      alignas(32) float tmp[kNr];
      _mm256_store_ps(tmp, c0[m]);
      _mm256_store_ps(tmp + 8, c1[m]);
      for (int c = 0; c < cols; ++c) yr[c] = accumulate ? yr[c] + tmp[c] : tmp[c];
    }
  }
}

void micro_dispatch(int mr, const float* x, int64_t ldx, const float* packed, int64_t kc, float* y,
                    int64_t ldy, int cols, bool accumulate) {
  switch (mr) {
    case 6: return micro<6>(x, ldx, packed, kc, y, ldy, cols, accumulate);
    case 5: return micro<5>(x, ldx, packed, kc, y, ldy, cols, accumulate);
    case 4: return micro<4>(x, ldx, packed, kc, y, ldy, cols, accumulate);
    case 3: return micro<3>(x, ldx, packed, kc, y, ldy, cols, accumulate);
    case 2: return micro<2>(x, ldx, packed, kc, y, ldy, cols, accumulate);
    default: return micro<1>(x, ldx, packed, kc, y, ldy, cols, accumulate);
  }
}

}  // namespace

void gemm(const Tensor& x, const Linear& w, Tensor& y) {
  const int64_t n = x.dim(0), n_in = w.n_in(), n_out = w.n_out();
  const float* xp = x.f32();
  float* yp = y.f32();
  const int nt = threads();

  // Tasks: column blocks × token blocks. Split tokens only when there are too few column blocks
  // to keep every thread busy (each token block re-packs its W tiles).
  const int64_t n_col_tasks = (n_out + kTaskCols - 1) / kTaskCols;
  const int64_t n_micro = (n + kMr - 1) / kMr;
  int64_t n_tok_blocks = 1;
  if (n_col_tasks < 4 * nt) n_tok_blocks = std::min(n_micro, (4 * nt + n_col_tasks - 1) / n_col_tasks);
  const int64_t tok_block = (n_micro + n_tok_blocks - 1) / n_tok_blocks * kMr;
  n_tok_blocks = (n + tok_block - 1) / tok_block;
  const int64_t n_tasks = n_col_tasks * n_tok_blocks;

  const bool par = n_tasks > 1 && n * n_in * n_out >= (int64_t(1) << 17);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t o_base = (task / n_tok_blocks) * kTaskCols;
    const int64_t t_begin = (task % n_tok_blocks) * tok_block;
    const int64_t t_end = std::min(n, t_begin + tok_block);
    const int n_panels = int(std::min<int64_t>(kPanels, (n_out - o_base + kNr - 1) / kNr));
    float* tmp = scratch(0, size_t(kNr) * kKc);
    float* packed = scratch(1, size_t(kPanels) * kKc * kNr);

    for (int64_t k0 = 0; k0 < n_in; k0 += kKc) {
      const int64_t kc = std::min(kKc, n_in - k0);
      int cols[kPanels];
      for (int p = 0; p < n_panels; ++p) {
        const int64_t o0 = o_base + p * kNr;
        cols[p] = int(std::min<int64_t>(kNr, n_out - o0));
        pack_panel(w, o0, cols[p], k0, kc, tmp, packed + p * kKc * kNr);
      }
      for (int64_t t0 = t_begin; t0 < t_end; t0 += kMr) {
        const int mr = int(std::min<int64_t>(kMr, t_end - t0));
        for (int p = 0; p < n_panels; ++p)
          micro_dispatch(mr, xp + t0 * n_in + k0, n_in, packed + p * kKc * kNr, kc,
                         yp + t0 * n_out + o_base + p * kNr, n_out, cols[p], k0 > 0);
      }
    }
  }
}

}  // namespace mmx::ops::cpu
