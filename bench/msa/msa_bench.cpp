// MSA benchmark: the attention core of one MiniMax-M3 layer (64 query heads / 4 KV heads /
// head_dim 128, indexer 4 heads × 128, block 128, top-16 blocks) over a block-major paged F32 KV
// cache with a shuffled block table. Prints markdown tables; asserts nothing.
//   1. decode step (1 query at position T-1): MSA (msa_index_select + attention_block_sparse) vs
//      dense paged attention (attention_dense_paged), per context T; the indexer's share of MSA;
//   1b. dense paged decode at M2 (48/8 heads) and M3 (64/4) shapes, 8K..128K, each run started
//      with cold caches (as in a model's decode step, where the weights stream through between two
//      calls of a layer): ms, K+V GB/s and fp32 GFMA/s, to set against `mmx bench peak`;
//   2. chunked prefill: a chunk of C queries at T-C .. T-1 (the marginal cost per prompt token at
//      context T), MSA vs dense;
//   3. retrieval: random keys plus "needle" tokens planted far back whose index key and main keys
//      align with the queries; the indexer's needle-block recall, the selection recall against
//      the true top-16 blocks of full attention, and the attention-mass coverage
//      (msa_selection_stats), with a control run whose index queries ignore the needles.
// Every time is the median of `reps` runs after one warm-up run.
//
// Usage: msa_bench [reps=5] [max_context=131072] [threads=0 (all cores)] [clock=wall|cpu] [kv=f32|bf16]
//                  [ik=kv|f8]
// kv=bf16: the decode table (1.) reads BF16 copies of the pages (the KV cache's kv_dtype = kBF16:
// half the bytes); the other tables stay F32. ik=f8: the decode table's indexer reads E4M3 copies
// of the index keys (--index-key-dtype f8, the release's 128 B per token).
// On a loaded machine, threads=1 avoids measuring how long a parallel region waits for a
// descheduled worker (every op call here is one short region), and clock=cpu (threads=1 only)
// times the process's CPU time instead of wall time, i.e. leaves out the time the machine gave to
// other processes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace {

using mmx::Buffer;
using mmx::DType;
using mmx::Tensor;
namespace ops = mmx::ops;

constexpr int64_t kHeads = 64, kKvHeads = 4, kHeadDim = 128, kIndexDim = 128, kB = 128, kTopK = 16;

// Fast seeded fill: uniform in [-√3, √3] (unit variance), split over threads by fixed ranges.
void fill_unit(float* p, int64_t n, uint64_t seed) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < (n + 65535) / 65536; ++c) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + uint64_t(c) * 0xBF58476D1CE4E5B9ull + 1;
    for (int64_t e = c * 65536; e < std::min(n, (c + 1) * 65536); ++e) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      p[e] = (float(s >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
    }
  }
}

bool g_cpu_clock = false;

double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double median_ms(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Evicts the caches: reads a buffer several times the size of any last-level cache, as the
// weights streaming through a real decode step do between two calls of one layer's attention.
void evict_caches() {
  static std::vector<float> junk(size_t(64) << 20, 1.0f);  // 256 MiB
  static volatile float sink = 0;
  float a = 0;
#pragma omp parallel for reduction(+ : a) schedule(static)
  for (int64_t e = 0; e < int64_t(junk.size()); e += 16) a += junk[size_t(e)];
  sink = sink + a;
}

// Median of `reps` runs of f (after one warm-up run), each started with cold caches.
template <class F>
double cold_median_ms(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    evict_caches();
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Buffer positions(int64_t first, int64_t n) {
  Buffer b(DType::kI32, {n});
  for (int64_t i = 0; i < n; ++i) b.t().ptr<int32_t>()[i] = int32_t(first + i);
  return b;
}

std::string ctx(int64_t t) { return t % 1024 == 0 ? fmt::format("{}K", t / 1024) : fmt::format("{}", t); }

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const int64_t max_ctx = argc > 2 ? std::atoll(argv[2]) : 131072;
  if (argc > 3) ops::set_n_threads(std::max(0, std::atoi(argv[3])));
  g_cpu_clock = argc > 4 && std::string(argv[4]) == "cpu";
  const bool kv_bf16 = argc > 5 && std::string(argv[5]) == "bf16";
  const bool ik_f8 = argc > 6 && std::string(argv[6]) == "f8";
  if (g_cpu_clock && ops::n_threads() != 1) {
    fmt::print(stderr, "clock=cpu needs threads=1\n");
    return 1;
  }
  const float scale = float(1.0 / std::sqrt(double(kHeadDim)));

  // The pools for the longest context, pages in shuffled order.
  const int64_t n_pages = (max_ctx + kB - 1) / kB;
  Buffer k(DType::kF32, {n_pages, kB, kKvHeads, kHeadDim}), v(DType::kF32, {n_pages, kB, kKvHeads, kHeadDim});
  Buffer ik(DType::kF32, {n_pages, kB, kIndexDim});
  fill_unit(k.f32(), k.t().numel(), 1);
  fill_unit(v.f32(), v.t().numel(), 2);
  fill_unit(ik.f32(), ik.t().numel(), 3);
  Buffer bt(DType::kI32, {n_pages});
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(4));
  std::copy(perm.begin(), perm.end(), bt.t().ptr<int32_t>());
  // kv=bf16: the decode table's pages, rounded to bf16.
  Buffer kb, vb, ikb;
  if (kv_bf16) {
    kb = Buffer(DType::kBF16, {n_pages, kB, kKvHeads, kHeadDim});
    vb = Buffer(DType::kBF16, {n_pages, kB, kKvHeads, kHeadDim});
    ikb = Buffer(DType::kBF16, {n_pages, kB, kIndexDim});
    for (auto [src, dst] : {std::pair<const Buffer*, Buffer*>{&k, &kb}, {&v, &vb}, {&ik, &ikb}})
      for (int64_t e = 0; e < src->t().numel(); ++e)
        dst->t().ptr<uint16_t>()[e] = mmx::f32_to_bf16(src->f32()[e]);
  }

  Buffer ik8;  // ik=f8: the decode table's index keys, rounded to E4M3
  if (ik_f8) {
    ik8 = Buffer(DType::kF8E4M3, {n_pages, kB, kIndexDim});
    for (int64_t e = 0; e < ik.t().numel(); ++e) ik8.t().ptr<uint8_t>()[e] = mmx::f32_to_f8e4m3(ik.f32()[e]);
  }

  fmt::print("MSA attention core, M3 shapes: {} q heads / {} kv heads / head_dim {}, indexer {} x {}, "
             "B {}, top-{} blocks; F32 paged KV (decode table: {}{}) ({:.0f} MiB K+V + {:.0f} MiB index keys at {}); "
             "{} threads; median of {} runs, {} time\n\n",
             kHeads, kKvHeads, kHeadDim, kKvHeads, kIndexDim, kB, kTopK, kv_bf16 ? "BF16" : "F32",
             ik_f8 ? ", E4M3 index keys" : "",
             double(k.t().size_bytes() * 2) / (1 << 20), double(ik.t().size_bytes()) / (1 << 20),
             ctx(max_ctx), ops::n_threads(), reps, g_cpu_clock ? "process CPU" : "wall-clock");

  // ---- 1. decode ----
  {
    Buffer q(DType::kF32, {1, kHeads, kHeadDim}), iq(DType::kF32, {1, kKvHeads, kIndexDim});
    fill_unit(q.f32(), q.t().numel(), 5);
    fill_unit(iq.f32(), iq.t().numel(), 6);
    Buffer out(DType::kF32, {1, kHeads, kHeadDim}), sel(DType::kI32, {kKvHeads, 1, kTopK});
    const mmx::Tensor kd = kv_bf16 ? kb.t() : k.t(), vd = kv_bf16 ? vb.t() : v.t();
    const mmx::Tensor ikd = ik_f8 ? ik8.t() : kv_bf16 ? ikb.t() : ik.t();
    const int64_t esz = kv_bf16 ? 2 : 4, ik_esz = ik_f8 ? 1 : esz;  // bytes per cached value
    fmt::print("### Decode step (1 query at position T-1), ms per token, {} pages\n\n", kv_bf16 ? "BF16" : "F32");
    fmt::print("| context T | indexer | (index-key scan GB/s) | sparse attn | MSA total | dense paged | "
               "(K+V scan GB/s) | dense / MSA | indexer share |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|\n");
    double msa16 = 0;
    for (int64_t T : {int64_t(4096), int64_t(16384), int64_t(65536), int64_t(131072)}) {
      if (T > max_ctx) continue;
      Buffer pos = positions(T - 1, 1);
      const double t_idx = median_ms(reps, [&] { ops::msa_index_select(iq, ikd, bt, pos, T, sel.t()); });
      const double t_sp = median_ms(reps, [&] {
        ops::attention_block_sparse(q, kd, vd, bt, pos, T, sel, scale, out.t());
      });
      const double t_msa = median_ms(reps, [&] {
        ops::msa_index_select(iq, ikd, bt, pos, T, sel.t());
        ops::attention_block_sparse(q, kd, vd, bt, pos, T, sel, scale, out.t());
      });
      const double t_dense = median_ms(reps, [&] { ops::attention_dense_paged(q, kd, vd, bt, pos, T, scale, out.t()); });
      if (T == 16384) msa16 = t_msa;
      const double ik_gb = double(T * kIndexDim * ik_esz) / 1e6, kv_gb = double(T * kKvHeads * kHeadDim * 2 * esz) / 1e6;
      fmt::print("| {} | {:.3f} | {:.1f} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.1f}x | {:.0f}% |\n", ctx(T),
                 t_idx, ik_gb / t_idx, t_sp, t_msa, t_dense, kv_gb / t_dense, t_dense / t_msa,
                 100.0 * t_idx / t_msa);
    }
    if (msa16 > 0) fmt::print("\n(MSA total at 16K: {:.3f} ms; growth beyond it is the O(T) indexer scan.)\n", msa16);
    fmt::print("\n");
  }

  // ---- 1b. dense decode at M2 / M3 shapes (every full-attention layer runs this) ----
  // One query over T keys of one layer; pages in the decode table's dtype. GB/s counts the K+V
  // bytes read, GFMA/s the 2 · n_heads · head_dim fp32 FMAs per key (q·k and p·v).
  {
    struct Shape { const char* name; int64_t heads, kv_heads; };
    fmt::print("### Dense paged decode, one layer, {} pages: ms per token (K+V read GB/s, fp32 GFMA/s)\n\n",
               kv_bf16 ? "BF16" : "F32");
    fmt::print("| shape | 8K | 32K | 128K |\n|---|---|---|---|\n");
    for (const Shape& sh : {Shape{"M2 48/8 x 128", 48, 8}, Shape{"M3 64/4 x 128", 64, 4}}) {
      const int64_t esz = kv_bf16 ? 2 : 4;
      const int64_t T_max = std::min<int64_t>(max_ctx, 131072);
      const int64_t np = (T_max + kB - 1) / kB;
      Buffer k2(kv_bf16 ? DType::kBF16 : DType::kF32, {np, kB, sh.kv_heads, kHeadDim});
      Buffer v2(kv_bf16 ? DType::kBF16 : DType::kF32, {np, kB, sh.kv_heads, kHeadDim});
      std::vector<float> tmp(size_t(k2.t().numel()));
      for (Buffer* b : {&k2, &v2}) {
        fill_unit(tmp.data(), int64_t(tmp.size()), b == &k2 ? 21 : 22);
        for (size_t e = 0; e < tmp.size(); ++e) {
          if (kv_bf16) b->t().ptr<uint16_t>()[e] = mmx::f32_to_bf16(tmp[e]);
          else b->f32()[e] = tmp[e];
        }
      }
      Buffer bt2(DType::kI32, {np});
      std::vector<int32_t> pm(static_cast<size_t>(np));
      std::iota(pm.begin(), pm.end(), 0);
      std::shuffle(pm.begin(), pm.end(), std::mt19937_64(23));
      std::copy(pm.begin(), pm.end(), bt2.t().ptr<int32_t>());
      Buffer q(DType::kF32, {1, sh.heads, kHeadDim}), out(DType::kF32, {1, sh.heads, kHeadDim});
      fill_unit(q.f32(), q.t().numel(), 24);
      fmt::print("| {} |", sh.name);
      for (int64_t T : {int64_t(8192), int64_t(32768), int64_t(131072)}) {
        if (T > T_max) {
          fmt::print(" |");
          continue;
        }
        Buffer pos = positions(T - 1, 1);
        const double t = cold_median_ms(reps, [&] { ops::attention_dense_paged(q, k2, v2, bt2, pos, T, scale, out.t()); });
        const double bytes = double(T * sh.kv_heads * kHeadDim * 2 * esz);
        const double fmas = double(T * sh.heads * kHeadDim * 2);
        fmt::print(" {:.3f} ({:.1f} GB/s, {:.1f} GFMA/s) |", t, bytes / t / 1e6, fmas / t / 1e6);
      }
      fmt::print("\n");
    }
    fmt::print("\n");
  }

  // ---- 2. chunked prefill ----
  {
    const int64_t C = 64;
    Buffer q(DType::kF32, {C, kHeads, kHeadDim}), iq(DType::kF32, {C, kKvHeads, kIndexDim});
    fill_unit(q.f32(), q.t().numel(), 7);
    fill_unit(iq.f32(), iq.t().numel(), 8);
    Buffer out(DType::kF32, {C, kHeads, kHeadDim}), sel(DType::kI32, {kKvHeads, C, kTopK});
    const int preps = std::max(1, std::min(reps, 3));
    fmt::print("### Chunked prefill: {} queries at T-{} .. T-1, ms per prompt token (median of {})\n\n", C, C, preps);
    fmt::print("| context T | indexer | sparse attn | MSA total | dense paged | dense / MSA |\n");
    fmt::print("|---|---|---|---|---|---|\n");
    for (int64_t T : {int64_t(2048), int64_t(4096), int64_t(8192), int64_t(16384)}) {
      if (T > max_ctx) continue;
      Buffer pos = positions(T - C, C);
      const double t_idx = median_ms(preps, [&] { ops::msa_index_select(iq, ik, bt, pos, T, sel.t()); });
      const double t_sp = median_ms(preps, [&] {
        ops::attention_block_sparse(q, k, v, bt, pos, T, sel, scale, out.t());
      });
      const double t_dense = median_ms(preps, [&] { ops::attention_dense_paged(q, k, v, bt, pos, T, scale, out.t()); });
      fmt::print("| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.1f}x |\n", ctx(T), t_idx / C, t_sp / C,
                 (t_idx + t_sp) / C, t_dense / C, t_dense / (t_idx + t_sp));
    }
    fmt::print("\n");
  }

  // ---- 3. retrieval: needles planted far back (needs >= 32 blocks) ----
  if (std::min<int64_t>(65536, max_ctx) >= 32 * kB) {
    const int64_t T = std::min<int64_t>(65536, max_ctx), n_q = 4, n_needles = 8;
    const int64_t n_blocks = T / kB;
    std::mt19937_64 rng(9);
    // the needle tokens: one in each of n_needles distinct blocks among the oldest 3/4
    std::vector<int64_t> nb(size_t(n_blocks * 3 / 4));
    std::iota(nb.begin(), nb.end(), 0);
    std::shuffle(nb.begin(), nb.end(), rng);
    nb.resize(size_t(n_needles));
    std::sort(nb.begin(), nb.end());
    Buffer q(DType::kF32, {n_q, kHeads, kHeadDim}), iq(DType::kF32, {n_q, kKvHeads, kIndexDim});
    fill_unit(q.f32(), q.t().numel(), 10);
    fill_unit(iq.f32(), iq.t().numel(), 11);
    // index direction u (unit): iq_g = 3·u + noise for every query and group; needle ik = 6·u.
    std::vector<float> u(kIndexDim);
    fill_unit(u.data(), kIndexDim, 12);
    const double un = std::sqrt(std::inner_product(u.begin(), u.end(), u.begin(), 0.0));
    for (float& x : u) x = float(x / un);
    Buffer iq_aligned(DType::kF32, {n_q, kKvHeads, kIndexDim});
    for (int64_t r = 0; r < n_q * kKvHeads; ++r)
      for (int64_t c = 0; c < kIndexDim; ++c)
        iq_aligned.f32()[r * kIndexDim + c] = 3.0f * u[size_t(c)] + 0.3f * iq.f32()[r * kIndexDim + c];
    // main keys: each group g has a unit direction w_g; every query head of the group is
    // 0.5·random + 8·w_g, and the needle's key for KV head g is 16·w_g (logit ≈ 16·8/√128 ≈ 11.3
    // against N(0, ~0.9) for random keys), so full attention puts most of its mass on the needles.
    std::vector<float> w(size_t(kKvHeads * kHeadDim));
    fill_unit(w.data(), int64_t(w.size()), 13);
    for (int64_t g = 0; g < kKvHeads; ++g) {
      float* wg = w.data() + g * kHeadDim;
      const double n = std::sqrt(std::inner_product(wg, wg + kHeadDim, wg, 0.0));
      for (int64_t c = 0; c < kHeadDim; ++c) wg[c] = float(wg[c] / n);
    }
    for (int64_t i = 0; i < n_q; ++i)
      for (int64_t h = 0; h < kHeads; ++h) {
        float* qh = q.f32() + (i * kHeads + h) * kHeadDim;
        const float* wg = w.data() + (h / (kHeads / kKvHeads)) * kHeadDim;
        for (int64_t c = 0; c < kHeadDim; ++c) qh[c] = 0.5f * qh[c] + 8.0f * wg[c];
      }
    for (int64_t b : nb) {
      const int64_t j = b * kB + std::uniform_int_distribution<int64_t>(0, kB - 1)(rng);
      const int64_t page = bt.t().ptr<int32_t>()[b], row = j % kB;
      float* ikr = ik.f32() + (page * kB + row) * kIndexDim;
      for (int64_t c = 0; c < kIndexDim; ++c) ikr[c] = 6.0f * u[size_t(c)];
      for (int64_t g = 0; g < kKvHeads; ++g) {
        float* kr = k.f32() + ((page * kB + row) * kKvHeads + g) * kHeadDim;
        for (int64_t c = 0; c < kHeadDim; ++c) kr[c] = 16.0f * w[size_t(g * kHeadDim + c)];
      }
    }
    Buffer pos = positions(T - n_q, n_q);
    fmt::print("### Retrieval at T = {}: {} needle tokens in blocks {{", ctx(T), n_needles);
    for (size_t a = 0; a < nb.size(); ++a) fmt::print("{}{}", a ? ", " : "", nb[a]);
    fmt::print("}} of {}; {} decode queries (T-{} .. T-1) x {} groups\n\n", n_blocks, n_q, n_q, kKvHeads);
    fmt::print("| index queries | needle-block recall | recall vs true top-16 | mass coverage | "
               "full-attention mass on needle blocks |\n|---|---|---|---|---|\n");
    for (int variant = 0; variant < 2; ++variant) {
      const Buffer& iqv = variant == 0 ? iq_aligned : iq;
      Buffer sel(DType::kI32, {kKvHeads, n_q, kTopK});
      ops::msa_index_select(iqv, ik, bt, pos, T, sel.t());
      Buffer rec(DType::kF32, {kKvHeads, n_q}), cov(DType::kF32, {kKvHeads, n_q});
      ops::msa_selection_stats(q, k, bt, pos, T, sel, scale, 16, rec.t(), cov.t());
      // the needle blocks' full-attention mass: coverage of a selection made of exactly them
      Buffer needle_sel(DType::kI32, {kKvHeads, n_q, n_needles}), nrec(DType::kF32, {kKvHeads, n_q}),
          ncov(DType::kF32, {kKvHeads, n_q});
      for (int64_t r = 0; r < kKvHeads * n_q; ++r)
        for (int64_t a = 0; a < n_needles; ++a) needle_sel.t().ptr<int32_t>()[r * n_needles + a] = int32_t(nb[size_t(a)]);
      if (variant == 0) ops::msa_selection_stats(q, k, bt, pos, T, needle_sel, scale, 16, nrec.t(), ncov.t());
      double found = 0, r_sum = 0, c_sum = 0, n_sum = 0;
      for (int64_t r = 0; r < kKvHeads * n_q; ++r) {
        const int32_t* s = sel.t().ptr<int32_t>() + r * kTopK;
        for (int64_t b : nb) found += std::count(s, s + kTopK, int32_t(b)) > 0;
        r_sum += rec.f32()[r];
        c_sum += cov.f32()[r];
        n_sum += ncov.f32()[r];
      }
      const double rows = double(kKvHeads * n_q);
      fmt::print("| {} | {:.0f}% | {:.0f}% | {:.1f}% | {} |\n",
                 variant == 0 ? "aligned with the needles" : "random (control)",
                 100.0 * found / (rows * double(n_needles)), 100.0 * r_sum / rows, 100.0 * c_sum / rows,
                 variant == 0 ? fmt::format("{:.1f}%", 100.0 * n_sum / rows) : std::string("(same)"));
    }
    fmt::print("\nRecall vs the true top-16 counts all 16 highest-mass blocks of full attention; with {} "
               "needles the other {} are noise-level blocks of random keys that no indexer can predict, "
               "so recall against it is about {}% plus chance overlaps, while the needles carry most of the mass. "
               "A needle's index score (≈ 3·6 = 18) is ≈ 4σ of the random keys' scores (σ ≈ 4.5), so "
               "at long contexts a few random blocks' maxima outrank some needles: needle recall "
               "below 100% is the ranking working as specified, not a selection bug.\n",
               n_needles, 16 - n_needles, 100 * n_needles / 16);
  }
  return 0;
}
