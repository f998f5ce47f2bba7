// The memory verbs speculation and RL will use (memory/paged_memory.h), on real tiny models of
// every family through the shared page pool, as the engine drives it (reserve, fused forward,
// commit):
//   rollback to any earlier length, then continuing == never having gone past it (lightning:
//     between checkpoints, at one, before the first);
//   a fork at a position, continued == a fresh sequence with the same prefix (and the source,
//     continued after the fork, is unchanged by it);
// with the pool's integrity checked after every operation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memory/paged_memory.h"
#include "testing/allclose.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

constexpr testing::Tol kTol{1e-4, 1e-4, 1e-10};  // chunk boundaries differ: rounding only

struct Pool {
  std::unique_ptr<Model> model;
  std::unique_ptr<PagedMemory> mem;
  explicit Pool(const std::string& arch) {
    model = load_model(testing::tiny_dir(arch, "f32", 17));
    PagedMemoryOptions o;
    o.page = model->config().kv_page();
    o.n_pages = 4096 / o.page;
    o.checkpoint_every = o.page * (16 / o.page > 0 ? 16 / o.page : 1);  // every 16 tokens (M3: every block)
    o.max_checkpoints = 8;
    mem = std::make_unique<PagedMemory>(model->cache_specs(), o);
  }
  // Feeds tokens [s.n_past(), upto) in the chunks memory allows; returns the last logits row.
  std::vector<float> feed(SeqMemory& s, const std::vector<int32_t>& toks, int64_t upto,
                          std::vector<const SeqMemory*> live = {}) {
    const int64_t V = model->config().vocab_size;
    Buffer logits(DType::kF32, {1, V});
    EXPECT_LT(s.n_past(), upto);
    while (s.n_past() < upto) {
      const int64_t n = s.kv->max_chunk(upto - s.n_past());
      mem->reserve(s, n);
      const SeqChunk c{0, n, s.kv.get()};
      std::vector<int32_t> t(toks.begin() + s.n_past(), toks.begin() + s.n_past() + n);
      model->forward_multi(Tensor(t.data(), DType::kI32, {n}), {&c, 1}, logits.t());
      mem->commit(s, toks);
    }
    live.push_back(&s);
    mem->check_integrity(live);
    return std::vector<float>(logits.f32(), logits.f32() + V);
  }
  std::vector<float> fresh(const std::vector<int32_t>& toks, int64_t upto) {
    SeqMemory s;
    mem->open(s, std::vector<int32_t>{toks[0]});  // one token: nothing served from the cache
    auto out = feed(s, toks, upto);
    mem->release(s);
    return out;
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  const Tensor g(const_cast<float*>(got.data()), DType::kF32, {int64_t(got.size())});
  const Tensor w(const_cast<float*>(want.data()), DType::kF32, {int64_t(want.size())});
  EXPECT_ALLCLOSE(g, w, kTol);
}

class MemoryVerbs : public ::testing::TestWithParam<std::string> {};

TEST_P(MemoryVerbs, RollbackThenContinueEqualsNeverPastIt) {
  Pool p(GetParam());
  const std::vector<int32_t> a = testing::random_ids(70, 500, 3);
  for (int64_t len : {int64_t(1), int64_t(10), int64_t(16), int64_t(17), int64_t(32), int64_t(40), int64_t(55)}) {
    SCOPED_TRACE(fmt::format("rollback to {}", len));
    // The continuation after `len` differs from what was fed (a rejected draft).
    std::vector<int32_t> b = a;
    for (size_t i = size_t(len); i < b.size(); ++i) b[i] = int32_t((b[i] * 7 + 3) % 500);
    SeqMemory s;
    p.mem->open(s, std::vector<int32_t>{a[0]});
    p.feed(s, a, 60);
    const int64_t r = p.mem->rollback(s, len);
    EXPECT_LE(r, len);
    if (!s.kv->has_states()) {
      EXPECT_EQ(r, len);
    }
    p.mem->check_integrity(std::vector<const SeqMemory*>{&s});
    const std::vector<float> got = p.feed(s, b, 68);  // re-feeds b[r, len) (== a there), then b's own
    p.mem->release(s);
    expect_close(got, p.fresh(b, 68));
  }
}

TEST_P(MemoryVerbs, ForkContinuedEqualsAFreshSequence) {
  Pool p(GetParam());
  const std::vector<int32_t> a = testing::random_ids(60, 500, 5);
  for (int64_t pos : {int64_t(9), int64_t(16), int64_t(25), int64_t(40)}) {
    SCOPED_TRACE(fmt::format("fork at {}", pos));
    std::vector<int32_t> b = a;
    for (size_t i = size_t(pos); i < b.size(); ++i) b[i] = int32_t((b[i] * 11 + 5) % 500);
    SeqMemory src, dst;
    p.mem->open(src, std::vector<int32_t>{a[0]});
    p.feed(src, a, 40);
    const int64_t r = p.mem->fork(src, pos, dst);
    EXPECT_LE(r, pos);
    if (!src.kv->has_states() || pos == 40) {
      EXPECT_EQ(r, pos);
    }
    p.mem->check_integrity(std::vector<const SeqMemory*>{&src, &dst});
    const std::vector<float> forked = p.feed(dst, b, 52, {&src});
    const std::vector<float> source = p.feed(src, a, 52, {&dst});  // writes after the fork: its own pages
    p.mem->release(dst);
    p.mem->release(src);
    p.mem->check_integrity(std::vector<const SeqMemory*>{});
    expect_close(forked, p.fresh(b, 52));
    expect_close(source, p.fresh(a, 52));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, MemoryVerbs, ::testing::Values("minimax_m2", "minimax_text01", "minimax_m3"));

}  // namespace
}  // namespace mmx
