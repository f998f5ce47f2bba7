// attention_lightning (spec §3.5): the fp64 reference proven by hand (head_dim 1 closed form with
// decay; λ = 1 is plain causal linear attention; the state after the call), then the fast op
// against it over chunk sizes, ragged lengths, head counts, head_dims and the real slope recipe
// at several layers, plus the consistency properties the model relies on: resume from a state,
// blockwise == token-by-token, chunked calls == one call, thread-count invariance, no NaN/Inf
// when the decay underflows.
//
// Tolerance: per head, max|fast - ref| <= kRel · max|ref| (over that head's outputs or state).
// Per head because heads with strong decay have outputs orders of magnitude smaller than heads
// with almost none; one global max would hide their errors. Every state element is an fp32 sum
// of up to a few hundred decayed k·v terms (n <= 300 here), every output an fp32 sum of head_dim
// (<= 128) products q_i·S_ij. Summing K same-sign terms in fp32 is off by at most ~K·2^-24
// relative (1.8e-5 for K = 300; typically ~√K·2^-24 ≈ 1e-6), and a fast-vs-fast comparison
// (blockwise vs recurrence, chunked vs whole) has two such paths: kRel = 4e-5 is that two-path
// worst case. Measured (printed by each test): <= 3.1e-6 fast vs ref, <= 7.7e-6 blockwise vs
// token-by-token, i.e. ~5x headroom. Each one-step mutation of the kernel's decay exponents
// (λ^i for λ^(i+1) on the query, λ^(m-1) for λ^m on the carried state, λ^(m-j) for λ^(m-1-j)
// on the keys, λ^(i-j+1) in the mask) fails dozens of cases here with errors of 1e-3 to 0.6
// (and the hand-derived tests outright), as do o = q·S_prev in decode and a leaky causal mask.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

constexpr double kRel = 4e-5;
constexpr int kLayers = 80;  // Text-01 / M1 num_hidden_layers

// s_h = 2^(-8(h+1)/H) · (1 - L/(N-1) + 1e-5)  (spec §3.5 step 2; H a power of two).
Buffer real_slopes(int64_t n_heads, int layer, int n_layers = kLayers) {
  Buffer s(DType::kF32, {n_heads});
  const double factor = 1.0 - double(layer) / double(n_layers - 1) + 1e-5;
  for (int64_t h = 0; h < n_heads; ++h)
    s.f32()[h] = float(std::exp2(-8.0 * double(h + 1) / double(n_heads)) * factor);
  return s;
}

// q, k, v as the model feeds them: silu of a normal projection (mostly positive, heavy right
// tail), or plain normal(0, 1) (signs cancel: harder for a relative tolerance).
Buffer make_qkv(int64_t n, int64_t n_heads, int64_t d, uint64_t seed, bool silu) {
  Buffer x = random_tensor({n, n_heads, 3, d}, seed);
  if (silu) ops::ref::silu(x.t());
  return x;
}

struct Result {
  Buffer out, state;
};

// Runs ops::attention_lightning (fast) or ops::ref::attention_lightning on a copy of state0.
Result run(bool fast, const Tensor& qkv, const Tensor& slopes, int block, const Tensor& state0) {
  const int64_t n = qkv.dim(0), h = qkv.dim(1), d = qkv.dim(3);
  Result r{Buffer(DType::kF32, {n, h, d}), copy_of(state0)};
  r.state.t() = r.state.t().reshape({h, d, d});
  if (fast) ops::attention_lightning(qkv, slopes, block, r.state.t(), r.out.t());
  else ops::ref::attention_lightning(qkv, slopes, block, r.state.t(), r.out.t());
  return r;
}

// Max over heads of max|got - want| / max|want| within the head, for tensors [..., H, X] viewed
// as rows of `inner` floats per head: got/want have `outer` × H × inner elements.
double worst_head_rel(const Tensor& got, const Tensor& want, int64_t outer, int64_t n_heads,
                      int64_t inner) {
  double worst = 0;
  for (int64_t h = 0; h < n_heads; ++h) {
    double err = 0, mag = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t i = (o * n_heads + h) * inner + c;
        const double g = got.f32()[i], w = want.f32()[i];
        if (!std::isfinite(g)) return INFINITY;
        err = std::max(err, std::abs(g - w));
        mag = std::max(mag, std::abs(w));
      }
    worst = std::max(worst, mag > 0 ? err / mag : err);
  }
  return worst;
}

// The largest relative errors seen so far (printed by the tests, to recalibrate kRel).
double g_worst_out = 0, g_worst_state = 0;

// out [n, H, d] and state [H, d, d] of `got` within kRel (per head) of `want`.
void expect_close(const Result& got, const Result& want, double rel = kRel) {
  const int64_t n = got.out.t().dim(0), h = got.out.t().dim(1), d = got.out.t().dim(2);
  const double e_out = worst_head_rel(got.out, want.out, n, h, d);
  const double e_state = worst_head_rel(got.state, want.state, 1, h, d * d);
  EXPECT_LE(e_out, rel) << "output";
  EXPECT_LE(e_state, rel) << "state";
  g_worst_out = std::max(g_worst_out, e_out);
  g_worst_state = std::max(g_worst_state, e_state);
}

// Prints and resets the worst errors of the test that just ran.
class LightningTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::printf("  worst per-head relative error: output %.2e, state %.2e\n", g_worst_out, g_worst_state);
    g_worst_out = g_worst_state = 0;
  }
};

Buffer zero_state(int64_t n_heads, int64_t d) { return Buffer(DType::kF32, {n_heads, d, d}); }

// ---- the reference, by hand ----

TEST(LightningRef, HeadDim1ClosedForm) {
  // d = 1: S(t) = λ^(t+1) S0 + Σ_{j<=t} λ^(t-j) k_j v_j and o(t) = q_t S(t), so
  //   o(t) = q_t (λ^(t+1) S0 + Σ_{j<=t} λ^(t-j) k_j v_j).
  // Two heads with different decay, a non-zero starting state.
  const int64_t n = 9, H = 2;
  Buffer qkv = random_tensor({n, H, 3, 1}, 11);
  Buffer slopes = f32_tensor({0.3f, 1.7f});
  Buffer s0 = f32_tensor({0.8f, -2.5f});
  s0.t() = s0.t().reshape({H, 1, 1});
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    for (int block : {1, 4}) {
      const Result r = run(fast, qkv, slopes, block, s0);
      for (int64_t h = 0; h < H; ++h) {
        const double lambda = std::exp(-double(slopes.f32()[h]));
        auto at = [&](int64_t t, int w) { return double(qkv.f32()[(t * H + h) * 3 + w]); };
        double state = 0;
        for (int64_t t = 0; t < n; ++t) {
          double sum = std::pow(lambda, double(t + 1)) * s0.f32()[h];
          for (int64_t j = 0; j <= t; ++j) sum += std::pow(lambda, double(t - j)) * at(j, 1) * at(j, 2);
          EXPECT_NEAR(r.out.f32()[t * H + h], at(t, 0) * sum, 1e-5 * (1 + std::abs(at(t, 0) * sum)))
              << "t=" << t << " h=" << h << " block=" << block;
          state = sum;
        }
        EXPECT_NEAR(r.state.f32()[h], state, 1e-5 * (1 + std::abs(state))) << h;
      }
    }
  }
}

TEST(LightningRef, NoDecayIsCausalLinearAttention) {
  // slope 0 → λ = 1: o_t = Σ_{j<=t} (q_t·k_j) v_j, plain causal linear attention (no softmax,
  // no normalisation), and the final state is Σ_j k_jᵀ v_j.
  const int64_t n = 7, H = 1, d = 5;
  Buffer qkv = random_tensor({n, H, 3, d}, 12);
  Buffer slopes = f32_tensor({0.0f});
  const float* x = qkv.f32();
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "ref");
    for (int block : {1, 3, 64}) {
      const Result r = run(fast, qkv, slopes, block, zero_state(H, d));
      for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < d; ++c) {
          double want = 0;
          for (int64_t j = 0; j <= t; ++j) {
            double qk = 0;
            for (int64_t i = 0; i < d; ++i) qk += double(x[t * 3 * d + i]) * x[j * 3 * d + d + i];
            want += qk * x[j * 3 * d + 2 * d + c];
          }
          EXPECT_NEAR(r.out.f32()[t * d + c], want, 1e-5 * (1 + std::abs(want))) << t << "," << c;
        }
      for (int64_t i = 0; i < d; ++i)
        for (int64_t c = 0; c < d; ++c) {
          double want = 0;
          for (int64_t j = 0; j < n; ++j) want += double(x[j * 3 * d + d + i]) * x[j * 3 * d + 2 * d + c];
          EXPECT_NEAR(r.state.f32()[i * d + c], want, 1e-5 * (1 + std::abs(want)));
        }
    }
  }
}

TEST(LightningRef, FutureTokensAreInvisible) {
  // Changing token 4 leaves outputs 0..3 unchanged (bitwise, in both implementations).
  const int64_t n = 6, H = 2, d = 8;
  Buffer qkv = random_tensor({n, H, 3, d}, 13);
  Buffer qkv2 = copy_of(qkv);
  qkv2.t() = qkv2.t().reshape({n, H, 3, d});
  for (int64_t i = 0; i < H * 3 * d; ++i) qkv2.f32()[4 * H * 3 * d + i] = 50.0f;
  Buffer slopes = real_slopes(H, 3);
  for (bool fast : {false, true})
    for (int block : {1, 6}) {
      const Result a = run(fast, qkv, slopes, block, zero_state(H, d));
      const Result b = run(fast, qkv2, slopes, block, zero_state(H, d));
      for (int64_t i = 0; i < 4 * H * d; ++i) EXPECT_EQ(a.out.f32()[i], b.out.f32()[i]) << i;
    }
}

// ---- fast vs reference ----

struct Case {
  int64_t n, heads, d;
  int block, layer;
  bool resume, silu;
  std::string name() const {
    return fmt::format("n={} heads={} d={} block={} layer={} resume={} silu={}", n, heads, d, block,
                       layer, resume, silu);
  }
};

void check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  Buffer qkv = make_qkv(c.n, c.heads, c.d, seed, c.silu);
  Buffer slopes = real_slopes(c.heads, c.layer);
  // A resumed state has the magnitude of a real one: a sum of many k·v products.
  Buffer s0 = c.resume ? random_tensor({c.heads, c.d, c.d}, seed + 1, 8.0f) : zero_state(c.heads, c.d);
  s0.t() = s0.t().reshape({c.heads, c.d, c.d});
  expect_close(run(true, qkv, slopes, c.block, s0), run(false, qkv, slopes, c.block, s0));
}

TEST_F(LightningTest, FastVsRefGrid) {
  // Every (block, length, head_dim); heads, layer (slope recipe), resume and input kind rotate
  // with the case index so each value meets every other dimension somewhere.
  const int blocks[] = {1, 3, 64, 256};
  const int64_t lengths[] = {1, 5, 63, 257, 300};
  const int64_t dims[] = {16, 64, 128};
  const int64_t heads[] = {1, 4, 8};
  const int layers[] = {0, 40, 79};  // strongest decay, middle, last (factor ~1e-5: almost none)
  uint64_t seed = 1000;
  int idx = 0;
  for (int b : blocks)
    for (int64_t n : lengths)
      for (int64_t d : dims) {
        const Case c{n, heads[idx % 3], d, b, layers[(idx / 3) % 3], idx % 2 == 1, (idx / 2) % 2 == 0};
        check_case(c, seed += 7);
        ++idx;
      }
}

TEST_F(LightningTest, EveryLayerFactor) {
  // The real recipe at 8 heads for layers across the stack, blockwise and decode, resumed.
  for (int layer : {0, 1, 7, 20, 50, 78, 79})
    for (int block : {1, 64}) check_case({130, 8, 64, block, layer, true, true}, 2000 + layer);
}

TEST_F(LightningTest, OddHeadDims) {
  // head_dim with vector tails (d % 8 != 0, d % 16 != 0) in both paths.
  for (int64_t d : {1, 7, 13, 24, 40})
    for (int block : {1, 5, 64}) check_case({37, 3, d, block, 10, true, false}, 3000 + d);
}

TEST_F(LightningTest, RealWidth) {
  // Text-01: 64 heads × 128, chunk 256, one and a bit blocks, strongest and weakest layers.
  for (int layer : {0, 79}) check_case({257, 64, 128, 256, layer, layer == 79, true}, 4000 + layer);
}

TEST_F(LightningTest, StrongDecayUnderflowsWithoutNaN) {
  // s = 20, 90: λ^m underflows to 0 in fp32 within a block (and λ^1 = e^-90 is subnormal/0);
  // nothing may become NaN/Inf and the result is still the reference one.
  const int64_t n = 300, H = 4, d = 32;
  Buffer qkv = make_qkv(n, H, d, 5000, true);
  Buffer slopes = f32_tensor({20.0f, 90.0f, 200.0f, 0.5f});
  Buffer s0 = random_tensor({H, d, d}, 5001, 8.0f);
  s0.t() = s0.t().reshape({H, d, d});
  for (int block : {1, 64, 256}) {
    SCOPED_TRACE(block);
    const Result f = run(true, qkv, slopes, block, s0), r = run(false, qkv, slopes, block, s0);
    for (int64_t i = 0; i < f.out.t().numel(); ++i) ASSERT_TRUE(std::isfinite(f.out.f32()[i])) << i;
    for (int64_t i = 0; i < f.state.t().numel(); ++i) ASSERT_TRUE(std::isfinite(f.state.f32()[i])) << i;
    expect_close(f, r);
  }
}

TEST_F(LightningTest, EmptyInputLeavesStateAlone) {
  Buffer qkv(DType::kF32, {0, 2, 3, 4});
  Buffer slopes = real_slopes(2, 0);
  Buffer s0 = random_tensor({2, 4, 4}, 6000);
  s0.t() = s0.t().reshape({2, 4, 4});
  const Result r = run(true, qkv, slopes, 64, s0);
  EXPECT_TRUE(bitwise_equal(r.state.t(), s0.t()));
}

TEST_F(LightningTest, ExactSizeAllocations) {
  // Operands in exactly sized heap blocks (odd head_dim, partial last block) so AddressSanitizer
  // sees any over-read or over-write, in both paths.
  const int64_t n = 11, H = 3, d = 13;
  std::vector<float> x(static_cast<size_t>(n * H * 3 * d)), sl(static_cast<size_t>(H)),
      s(static_cast<size_t>(H * d * d)), o(static_cast<size_t>(n * H * d));
  fill_random(x.data(), int64_t(x.size()), 1);
  fill_random(s.data(), int64_t(s.size()), 2);
  for (int64_t h = 0; h < H; ++h) sl[size_t(h)] = 0.1f * float(h + 1);
  const Tensor qkv(x.data(), DType::kF32, {n, H, 3, d}), slopes(sl.data(), DType::kF32, {H});
  for (int block : {1, 4, 64}) {
    SCOPED_TRACE(block);
    std::vector<float> s1 = s;
    Tensor st(s1.data(), DType::kF32, {H, d, d}), ot(o.data(), DType::kF32, {n, H, d});
    ops::attention_lightning(qkv, slopes, block, st, ot);
    Buffer s0(DType::kF32, {H, d, d});
    std::copy(s.begin(), s.end(), s0.f32());
    const Result want = run(false, qkv, slopes, block, s0);
    Result got{Buffer(DType::kF32, {n, H, d}), Buffer(DType::kF32, {H, d, d})};
    std::copy(o.begin(), o.end(), got.out.f32());
    std::copy(s1.begin(), s1.end(), got.state.f32());
    expect_close(got, want);
  }
}

// ---- consistency ----

TEST_F(LightningTest, BlockwiseEqualsTokenByToken) {
  // The same op, chunk 1 (recurrence) vs 64 / 256 (blockwise), from zero and from a state.
  const int64_t n = 300, H = 8, d = 128;
  Buffer qkv = make_qkv(n, H, d, 7000, true);
  for (int layer : {0, 79}) {
    Buffer slopes = real_slopes(H, layer);
    for (bool resume : {false, true}) {
      SCOPED_TRACE(fmt::format("layer={} resume={}", layer, resume));
      Buffer s0 = resume ? random_tensor({H, d, d}, 7001, 8.0f) : zero_state(H, d);
      s0.t() = s0.t().reshape({H, d, d});
      const Result tok = run(true, qkv, slopes, 1, s0);
      for (int block : {64, 256}) expect_close(run(true, qkv, slopes, block, s0), tok);
    }
  }
}

TEST_F(LightningTest, ChunkedCallsEqualOneCall) {
  // Splitting the sequence into arbitrary pieces, passing the state along, equals one call —
  // for the blockwise path (block 64; pieces shorter and longer than a block, and a single
  // token in the middle, which takes the decode path) and for the recurrence.
  const int64_t H = 4, d = 64;
  const std::vector<int64_t> pieces = {1, 7, 64, 100, 1, 128, 30};
  int64_t n = 0;
  for (int64_t p : pieces) n += p;
  Buffer qkv = make_qkv(n, H, d, 8000, true);
  Buffer slopes = real_slopes(H, 20);
  for (int block : {1, 64}) {
    SCOPED_TRACE(block);
    const Result whole = run(true, qkv, slopes, block, zero_state(H, d));
    Buffer state = zero_state(H, d);
    Buffer out(DType::kF32, {n, H, d});
    int64_t t0 = 0;
    for (int64_t p : pieces) {
      const Tensor part(qkv.f32() + t0 * H * 3 * d, DType::kF32, {p, H, 3, d});
      Tensor part_out(out.f32() + t0 * H * d, DType::kF32, {p, H, d});
      ops::attention_lightning(part, slopes, block, state.t(), part_out);
      t0 += p;
    }
    Result chunked{std::move(out), std::move(state)};
    expect_close(chunked, whole);
    expect_close(chunked, run(false, qkv, slopes, block, zero_state(H, d)));
  }
}

TEST_F(LightningTest, ThreadCountInvariance) {
  // Bitwise identical outputs and states with 1, 2 and 3 threads, both paths.
  const int64_t n = 150, H = 8, d = 64;
  Buffer qkv = make_qkv(n, H, d, 9000, false);
  Buffer slopes = real_slopes(H, 5);
  Buffer s0 = random_tensor({H, d, d}, 9001, 4.0f);
  s0.t() = s0.t().reshape({H, d, d});
  for (int block : {1, 64}) {
    SCOPED_TRACE(block);
    std::vector<Result> results;
    for (int nt : {1, 2, 3}) {
      ops::set_n_threads(nt);
      results.push_back(run(true, qkv, slopes, block, s0));
    }
    ops::set_n_threads(0);
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(results[0].out.t(), results[i].out.t())) << "threads " << i + 1;
      EXPECT_TRUE(bitwise_equal(results[0].state.t(), results[i].state.t())) << "threads " << i + 1;
    }
  }
}

}  // namespace
}  // namespace mmx::testing
