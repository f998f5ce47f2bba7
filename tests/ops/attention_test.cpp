// attention_softmax: the reference proven by hand (one key returns v; known softmax weights;
// causality; the GQA head mapping), then the fast path against it over prefill, decode and
// chunked-prefill shapes, GQA ratios and head_dims with vector tails.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

TEST(AttentionRef, OneKeyReturnsV) {
  // With a single visible key the softmax weight is 1 whatever q is: out = v.
  Buffer q = random_tensor({1, 2, 5}, 1, 3.0f), k = random_tensor({1, 2, 5}, 2), v = random_tensor({1, 2, 5}, 3);
  Buffer out(DType::kF32, {1, 2, 5});
  ops::ref::attention_softmax(q, k, v, 0, 0.7f, out.t());
  EXPECT_TRUE(bitwise_equal(out.t(), v.t()));
  Buffer out_fast(DType::kF32, {1, 2, 5});
  ops::attention_softmax(q, k, v, 0, 0.7f, out_fast.t());
  EXPECT_ALLCLOSE(out_fast.t(), v.t(), tol::kF32);
}

TEST(AttentionRef, KnownWeights) {
  // head_dim 1, q = 1, keys 0 and ln 3, scale 1: weights e^0 : e^ln3 = 1 : 3 -> 1/4, 3/4.
  Buffer q = f32_tensor({1.0f}), k = f32_tensor({0.0f, float(std::log(3.0))}), v = f32_tensor({8.0f, -4.0f});
  Tensor qt = q.t().reshape({1, 1, 1}), kt = k.t().reshape({2, 1, 1}), vt = v.t().reshape({2, 1, 1});
  Buffer out(DType::kF32, {1, 1, 1});
  ops::ref::attention_softmax(qt, kt, vt, 1, 1.0f, out.t());  // query at position 1 sees both keys
  EXPECT_FLOAT_EQ(out.f32()[0], 0.25f * 8.0f + 0.75f * -4.0f);
}

TEST(AttentionRef, CausalAndGqaMapping) {
  // Prefill of 3 queries: query 0 sees only key 0, so out[0] = v[0] for every head.
  // 4 query heads over 2 KV heads: heads 0, 1 read KV head 0; heads 2, 3 read KV head 1.
  const int64_t d = 3;
  Buffer q = random_tensor({3, 4, d}, 5), k = random_tensor({3, 2, d}, 6), v = random_tensor({3, 2, d}, 7);
  Buffer out(DType::kF32, {3, 4, d});
  ops::ref::attention_softmax(q, k, v, 0, 0.5f, out.t());
  for (int h = 0; h < 4; ++h)
    for (int c = 0; c < d; ++c) EXPECT_EQ(out.f32()[h * d + c], v.f32()[(h / 2) * d + c]) << h;
  // Query 1 of head 0 and of head 2 differ only through the KV head they read: swapping KV
  // heads' contents swaps their outputs' dependence. Check directly: out[1, h] is a convex
  // combination of v[0, h/2] and v[1, h/2].
  for (int h = 0; h < 4; ++h)
    for (int c = 0; c < d; ++c) {
      const float a = v.f32()[(0 * 2 + h / 2) * d + c], b = v.f32()[(1 * 2 + h / 2) * d + c];
      const float o = out.f32()[(1 * 4 + h) * d + c];
      EXPECT_LE(o, std::max(a, b) + 1e-6f);
      EXPECT_GE(o, std::min(a, b) - 1e-6f);
    }
  // Future keys are invisible: changing key/value 2 does not change queries 0 and 1.
  Buffer k2 = copy_of(k), v2 = copy_of(v);
  for (int c = 0; c < 2 * d; ++c) k2.f32()[2 * 2 * d + c] = 100.0f, v2.f32()[2 * 2 * d + c] = -100.0f;
  Buffer out2(DType::kF32, {3, 4, d});
  ops::ref::attention_softmax(q, k2, v2, 0, 0.5f, out2.t());
  for (int i = 0; i < 2 * 4 * d; ++i) EXPECT_EQ(out.f32()[i], out2.f32()[i]);
}

struct AttnCase {
  int64_t n_q, n_kv, pos0, n_heads, n_kv_heads, head_dim;
  std::string name() const {
    return fmt::format("n_q={} n_kv={} pos0={} heads={}/{} head_dim={}", n_q, n_kv, pos0, n_heads,
                       n_kv_heads, head_dim);
  }
};

void check_attention(const AttnCase& c, uint64_t seed, float q_std = 1.0f) {
  SCOPED_TRACE(c.name());
  Buffer q = random_tensor({c.n_q, c.n_heads, c.head_dim}, seed, q_std);
  Buffer k = random_tensor({c.n_kv, c.n_kv_heads, c.head_dim}, seed + 1);
  Buffer v = random_tensor({c.n_kv, c.n_kv_heads, c.head_dim}, seed + 2);
  Buffer out(DType::kF32, {c.n_q, c.n_heads, c.head_dim}), out_ref(DType::kF32, {c.n_q, c.n_heads, c.head_dim});
  const float scale = float(1.0 / std::sqrt(double(c.head_dim)));
  ops::attention_softmax(q, k, v, c.pos0, scale, out.t());
  ops::ref::attention_softmax(q, k, v, c.pos0, scale, out_ref.t());
  EXPECT_ALLCLOSE(out.t(), out_ref.t(), tol::kF32Reduce);
}

TEST(Attention, FastVsRefGrid) {
  // (n_q, n_kv, pos0): decode, prefill, chunked prefill, a cache longer than needed.
  const int64_t qs[][3] = {{1, 1, 0}, {1, 17, 16}, {5, 5, 0}, {7, 40, 33}, {3, 100, 50}, {1, 130, 129}};
  const int64_t heads[][2] = {{1, 1}, {4, 1}, {6, 2}, {8, 8}, {12, 2}, {10, 2}};
  const int64_t dims[] = {1, 7, 8, 12, 32, 40, 64, 128};
  uint64_t seed = 100;
  for (const auto& s : qs)
    for (const auto& h : heads)
      for (int64_t d : dims) check_attention({s[0], s[1], s[2], h[0], h[1], d}, seed += 3);
}

TEST(Attention, LongerAndSharper) {
  // 300 keys (several V blocks), GQA 6 like MiniMax-M2, and large scores (q std 8) so the
  // softmax is peaked and the max subtraction matters.
  check_attention({64, 64, 0, 6, 1, 128}, 1);
  check_attention({1, 300, 299, 12, 2, 128}, 2);
  check_attention({4, 300, 200, 6, 1, 64}, 3, 8.0f);
  check_attention({16, 70, 54, 2, 2, 36}, 4, 8.0f);
}

TEST(Attention, LongContextKeyMajor) {
  // More than 4 MiB of V rows switches P·V to the key-major walk (decode from DRAM); queries on
  // both sides of the switch in one call, and tails of the 4-key steps.
  check_attention({1, 8203, 8202, 4, 2, 64}, 5);
  check_attention({3, 8200, 8190, 6, 1, 24}, 6);  // rows of 96 B: switch at 43691 keys -> tiled
  check_attention({2, 44000, 43689, 2, 1, 24}, 7);  // query 0: 43690 keys, tiled; query 1: key-major
}

TEST(Attention, ExactSizeAllocations) {
  // Operands in exactly sized heap blocks so AddressSanitizer sees any tail over-read.
  for (int64_t d : {3, 13, 37}) {
    SCOPED_TRACE(fmt::format("head_dim={}", d));
    const int64_t n_q = 3, n_kv = 7, heads = 6, kv_heads = 2;
    std::vector<float> q(size_t(n_q * heads * d)), k(size_t(n_kv * kv_heads * d)), v(k.size()),
        o(q.size());
    fill_random(q.data(), int64_t(q.size()), 1);
    fill_random(k.data(), int64_t(k.size()), 2);
    fill_random(v.data(), int64_t(v.size()), 3);
    Tensor qt(q.data(), DType::kF32, {n_q, heads, d}), kt(k.data(), DType::kF32, {n_kv, kv_heads, d}),
        vt(v.data(), DType::kF32, {n_kv, kv_heads, d}), ot(o.data(), DType::kF32, {n_q, heads, d});
    Buffer o_ref(DType::kF32, {n_q, heads, d});
    ops::attention_softmax(qt, kt, vt, 4, 0.3f, ot);
    ops::ref::attention_softmax(qt, kt, vt, 4, 0.3f, o_ref.t());
    EXPECT_ALLCLOSE(ot, o_ref.t(), tol::kF32Reduce);
  }
}

}  // namespace
}  // namespace mmx::testing
