// Model::forward_multi (continuous batching's fused forward) on fresh seeded tiny checkpoints:
// 8 sequences of mixed shapes (decode tokens, short and long prefill chunks, different n_past) in
// one call == one forward() per sequence; caches advanced; the next decode identical; invalid
// input (a bad token id in one chunk, a shared cache, a full cache, bad tiling) throws before any
// cache is touched (a logits buffer of the wrong shape is a programming error: MMX_CHECK aborts).
// M2, M3 (MSA block 4, top-3: contexts of 40-70 tokens select 3 of 10-18 blocks, so the sparse
// path is active) and Text-01 (lightning recurrence per sequence) run the fused pass; a step in
// which a chunk crosses a lightning-state checkpoint runs in fused rounds split there.
//
// What equality holds (ops/ops.h, cpu/gemv.cpp, cpu/gemm.cpp): every row-wise op gives a row the
// same bits whatever else is in the batch, EXCEPT that matmul switches kernel at n = 32 rows
// (GEMV below, packed GEMM from there; each is row-independent but the two round differently).
// Attention runs per sequence with the same op calls either way. So:
//   * 8 decode tokens (8 rows, every matmul — MoE experts included — below 32 on both sides):
//     bitwise equal, asserted exactly;
//   * mixed lengths (100 rows): rows of short chunks go through GEMM fused but GEMV alone, and MoE
//     experts see different row counts, so equal to rounding: kPathTol below;
//   * Text-01 with kMixed (checkpoints every 16 tokens: chunks cross them): fused rounds, each
//     chunk split at its checkpoints (kPathTol); kWithinCheckpoints runs in one round and saves
//     the checkpoints where chunks end on them.
//
// Speed (fused vs separate decode) is measured by `mmx bench batch`, not here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "model/model.h"
#include "model/phase_times.h"
#include "tiny/tiny.h"
#include "testing/allclose.h"
#include "testing/tiny_models.h"

namespace mmx {
namespace {

// Same weights, fp32 on both sides; the paths differ in summation order only (GEMV vs GEMM).
// Logits are O(1..10); measured differences are ~1e-6, so 1e-4 leaves ~100x headroom while a
// wrong position, a foreign cache or a mixed-up row moves logits by >1e-2.
constexpr testing::Tol kPathTol{1e-4, 1e-4, 1e-10};
constexpr testing::Tol kExact{0, 0, 0};

using testing::feed;
using testing::random_ids;

struct SeqSpec {
  int64_t past, n;  // cached tokens before the fused step, tokens in it
};

// Decode tokens, short and long prefill chunks (33 and 40 rows: GEMM alone too), different n_past.
const std::vector<SeqSpec> kMixed = {{37, 1}, {0, 5}, {12, 1}, {0, 40}, {50, 3}, {20, 33}, {64, 1}, {5, 16}};
// Eight decode tokens at different context lengths (M3: 1 .. 61 keys, sparse from 13 on).
const std::vector<SeqSpec> kDecode = {{3, 1}, {17, 1}, {40, 1}, {0, 1}, {25, 1}, {60, 1}, {8, 1}, {33, 1}};

constexpr int64_t kCapacity = 96;

// Two identical sets of sequences: `a` takes the fused step, `b` one forward() per sequence.
struct Fixture {
  std::unique_ptr<Model> model;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<int32_t>> ids;  // per sequence: past + n + 2 tokens
  std::vector<KvCache> a, b;

  Fixture(const std::string& dir, const std::vector<SeqSpec>& s, uint64_t seed) : model(load_model(dir)), specs(s) {
    const int vocab = int(model->config().vocab_size);
    for (size_t i = 0; i < specs.size(); ++i) {
      ids.push_back(random_ids(int(specs[i].past + specs[i].n + 2), vocab, seed * 100 + i));
      // Text-01: a state checkpoint every 16 tokens, so the per-chunk forwards split there.
      a.push_back(model->make_cache(kCapacity, 16));
      b.push_back(model->make_cache(kCapacity, 16));
      if (specs[i].past > 0) {
        feed(*model, a.back(), ids[i], 0, specs[i].past);
        feed(*model, b.back(), ids[i], 0, specs[i].past);
      }
    }
  }

  // The concatenated tokens of the fused step and its chunks over caches `a`.
  std::vector<int32_t> step_tokens(std::vector<SeqChunk>& chunks) {
    std::vector<int32_t> tok;
    chunks.clear();
    for (size_t i = 0; i < specs.size(); ++i) {
      chunks.push_back({int64_t(tok.size()), specs[i].n, &a[i]});
      tok.insert(tok.end(), ids[i].begin() + specs[i].past, ids[i].begin() + specs[i].past + specs[i].n);
    }
    return tok;
  }

  // skip[i]: chunk i asks for no logits (its row comes back NaN).
  Buffer fused_step(const std::vector<bool>& skip = {}) {
    std::vector<SeqChunk> chunks;
    std::vector<int32_t> tok = step_tokens(chunks);
    for (size_t i = 0; i < skip.size(); ++i) chunks[i].n_logits = skip[i] ? 0 : 1;
    Buffer logits(DType::kF32, {int64_t(chunks.size()), model->config().vocab_size});
    Tensor lt = logits.t();
    model->forward_multi(Tensor(tok.data(), DType::kI32, {int64_t(tok.size())}), chunks, lt);
    return logits;
  }

  // Sequence i's step through forward() on cache b[i], logits of its last token only (as the
  // engine asks for them): [1, vocab].
  Buffer single_step(size_t i) {
    const SeqSpec& s = specs[i];
    std::vector<int32_t> tok(ids[i].begin() + s.past, ids[i].begin() + s.past + s.n), pos(static_cast<size_t>(s.n));
    for (int64_t t = 0; t < s.n; ++t) pos[size_t(t)] = int32_t(s.past + t);
    ForwardBatch fb;
    fb.tokens = Tensor(tok.data(), DType::kI32, {s.n});
    fb.positions = Tensor(pos.data(), DType::kI32, {s.n});
    fb.pos0 = s.past;
    Buffer last(DType::kF32, {1, model->config().vocab_size});
    Tensor lt = last.t();
    model->forward(fb, b[i], lt);
    return last;
  }
};

double max_abs_diff(const Tensor& x, const Tensor& y) {
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, double(std::abs(x.f32()[i] - y.f32()[i])));
  return m;
}

// Fused step == per-sequence steps (tol); n_past advanced; then one more decode token per
// sequence through forward() on both sets of caches gives the same logits (tol).
void check_fused_equals_single(const std::string& dir, const std::vector<SeqSpec>& specs, testing::Tol tol,
                               uint64_t seed) {
  Fixture f(dir, specs, seed);
  const Buffer fused = f.fused_step();
  double worst = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(fmt::format("sequence {} (past {}, n {})", i, specs[i].past, specs[i].n));
    const Buffer one = f.single_step(i);
    const Tensor row = fused.t().rows_range(int64_t(i), int64_t(i) + 1);
    EXPECT_ALLCLOSE(row, one.t(), tol);
    worst = std::max(worst, max_abs_diff(row, one.t()));
    EXPECT_EQ(f.a[i].n_past(), specs[i].past + specs[i].n);
    EXPECT_EQ(f.b[i].n_past(), specs[i].past + specs[i].n);
  }
  // The caches the fused step wrote serve the next decode like the per-sequence ones.
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(fmt::format("next decode, sequence {}", i));
    const int64_t p = specs[i].past + specs[i].n;
    const Buffer na = feed(*f.model, f.a[i], f.ids[i], p, p + 1);
    const Buffer nb = feed(*f.model, f.b[i], f.ids[i], p, p + 1);
    EXPECT_ALLCLOSE(na.t(), nb.t(), tol);
    worst = std::max(worst, max_abs_diff(na.t(), nb.t()));
    EXPECT_EQ(f.a[i].n_past(), p + 1);
  }
  std::printf("[ info ] %s: %zu sequences, max |fused - single| = %.3g\n", dir.c_str(), specs.size(), worst);
}

// The bytes of everything a forward may write in a cache: K/V (+ index keys) pages of the
// attention layers, lightning states, and n_past.
std::vector<uint8_t> cache_bytes(const KvCache& kv) {
  std::vector<uint8_t> out;
  auto put = [&out](const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    out.insert(out.end(), p, p + t.size_bytes());
  };
  for (int il = 0; il < kv.n_layers(); ++il) {
    if (kv.spec(il).kind == LayerCacheSpec::kLinearState) {
      put(kv.state(il));
    } else {
      put(kv.k_pages(il));
      put(kv.v_pages(il));
      if (kv.spec(il).index_dim > 0) put(kv.ik_pages(il));
    }
  }
  const int64_t n = kv.n_past();
  const auto* np = reinterpret_cast<const uint8_t*>(&n);
  out.insert(out.end(), np, np + sizeof(n));
  return out;
}

// Each invalid call throws mmx::Error and leaves every cache byte-identical.
void check_errors_modify_nothing(const std::string& dir) {
  Fixture f(dir, kMixed, 7);
  std::vector<std::vector<uint8_t>> before;
  for (const KvCache& kv : f.a) before.push_back(cache_bytes(kv));
  std::vector<SeqChunk> chunks;
  std::vector<int32_t> tok = f.step_tokens(chunks);
  const int64_t vocab = f.model->config().vocab_size;
  Buffer logits(DType::kF32, {int64_t(chunks.size()), vocab});
  Tensor lt = logits.t();
  auto run = [&](std::vector<int32_t> t, std::vector<SeqChunk> c) {
    f.model->forward_multi(Tensor(t.data(), DType::kI32, {int64_t(t.size())}), c, lt);
  };
  auto unchanged = [&](const char* what) {
    for (size_t i = 0; i < f.a.size(); ++i)
      EXPECT_TRUE(cache_bytes(f.a[i]) == before[i]) << what << ": cache " << i << " was modified";
  };

  {  // an invalid token id in the LAST chunk: earlier chunks must not have run
    std::vector<int32_t> t = tok;
    t.back() = int32_t(vocab);
    EXPECT_THROW(run(t, chunks), Error);
    unchanged("bad token id");
    t.back() = -1;
    EXPECT_THROW(run(t, chunks), Error);
    unchanged("negative token id");
  }
  {  // two chunks on one cache
    std::vector<SeqChunk> c = chunks;
    c[5].kv = c[2].kv;
    EXPECT_THROW(run(tok, c), Error);
    unchanged("shared cache");
  }
  {  // a middle chunk (40 tokens) overflows its cache (capacity 8, at most one 16-token page)
    KvCache small = f.model->make_cache(8);
    std::vector<SeqChunk> c = chunks;
    c[3].kv = &small;
    EXPECT_THROW(run(tok, c), Error);
    unchanged("full cache");
    EXPECT_EQ(small.n_past(), 0);
  }
  {  // chunks that do not tile the tokens
    std::vector<SeqChunk> c = chunks;
    c.back().n -= 1;
    EXPECT_THROW(run(tok, c), Error);
    c = chunks;
    c[3].begin += 1;
    EXPECT_THROW(run(tok, c), Error);
    unchanged("bad tiling");
  }
  // And the caches still work: a valid fused step afterwards == the per-sequence steps.
  const Buffer fused = f.fused_step();
  for (size_t i = 0; i < kMixed.size(); ++i)
    EXPECT_ALLCLOSE(fused.t().rows_range(int64_t(i), int64_t(i) + 1), f.single_step(i).t(), kPathTol) << i;
}

// ---- per family ----------------------------------------------------------------------------

struct Case {
  std::string arch, dtype;
};
std::string case_name(const ::testing::TestParamInfo<Case>& i) { return i.param.arch + "_" + i.param.dtype; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << " " << c.dtype; }

class ForwardMulti : public ::testing::TestWithParam<Case> {
 protected:
  std::string dir() const { return testing::tiny_dir(GetParam().arch, GetParam().dtype, 31); }
};

TEST_P(ForwardMulti, MixedLengthsEqualPerSequenceForwards) {
  // Every family fuses (Text-01 in rounds where chunks cross a checkpoint): equal to rounding.
  check_fused_equals_single(dir(), kMixed, kPathTol, 1);
}

TEST_P(ForwardMulti, EightDecodeTokensAreBitwiseEqual) {
  check_fused_equals_single(dir(), kDecode, kExact, 2);
}

TEST_P(ForwardMulti, ErrorsModifyNoCache) { check_errors_modify_nothing(dir()); }

// Text-01: no chunk crosses a checkpoint (every 16), so the lightning layers run fused; the
// chunks ending at 32 and 16 leave a checkpoint there, like the per-sequence forwards do.
TEST(ForwardMultiText01, FusedWithinCheckpointsSavesThem) {
  const std::vector<SeqSpec> within = {{37, 1}, {0, 5}, {16, 16}, {50, 3}, {20, 12}, {64, 1}, {5, 11}, {0, 16}};
  const std::string dir = testing::tiny_dir("minimax_text01", "f32", 31);
  check_fused_equals_single(dir, within, kPathTol, 4);
  Fixture f(dir, within, 5);
  f.fused_step();
  for (size_t i = 0; i < within.size(); ++i) {
    f.single_step(i);
    EXPECT_EQ(f.a[i].checkpoint_positions(), f.b[i].checkpoint_positions()) << "sequence " << i;
  }
  EXPECT_EQ(f.a[2].checkpoint_positions().back(), 32);
  EXPECT_EQ(f.a[7].checkpoint_positions().back(), 16);
}

// Chunks that ask for no logits (prompt chunks that do not end their prompt): their rows are NaN,
// every other row has the bits of the step that computed all of them (the lm_head GEMV gives a
// row the same bits at any row count below 32), and the caches advance alike. kMixed runs Text-01
// in rounds split at its checkpoints, where a chunk's flag holds for the round it ends in.
TEST_P(ForwardMulti, SkippedLogitsAreNaNTheRestUnchanged) {
  for (const auto* spec : {&kMixed, &kDecode}) {
    Fixture all(dir(), *spec, 11), some(dir(), *spec, 11);
    const std::vector<bool> skip = {false, true, false, true, true, false, false, true};
    const Buffer ref = all.fused_step(), got = some.fused_step(skip);
    const int64_t V = ref.t().dim(1);
    for (size_t i = 0; i < skip.size(); ++i) {
      const Tensor r = ref.t().rows_range(int64_t(i), int64_t(i) + 1), g = got.t().rows_range(int64_t(i), int64_t(i) + 1);
      if (skip[i]) {
        EXPECT_TRUE(std::all_of(g.f32(), g.f32() + V, [](float v) { return std::isnan(v); })) << "chunk " << i;
      } else {
        EXPECT_ALLCLOSE(g, r, kExact);
      }
      EXPECT_EQ(all.a[i].n_past(), some.a[i].n_past());
    }
    // The next decode (all logits) is bitwise the same: the skipped rows changed no state.
    for (size_t i = 0; i < spec->size(); ++i) all.specs[i] = some.specs[i] = {all.a[i].n_past(), 1};
    EXPECT_ALLCLOSE(some.fused_step().t(), all.fused_step().t(), kExact);
  }
}

// Speculative verification's forward: a chunk asks for the logits (and final-normed hidden
// rows) of its last n_logits rows. Three sequences in one call — a drafted chunk of 5 with all 5
// rows, a prompt chunk with none (its one row NaN), a chunk of 3 with its last 2 — equal the same
// tokens fed one at a time (kPathTol), row for row; the caches then serve the next decode alike.
// Text-01 (checkpoints every 16 tokens): the first two chunks cross a checkpoint, so their rows
// come from two fused rounds.
TEST_P(ForwardMulti, VerificationRowsEqualOneTokenSteps) {
  const std::vector<SeqSpec> specs = {{14, 5}, {30, 4}, {7, 3}};
  const std::vector<int64_t> n_logits = {5, 0, 2};
  Fixture f(dir(), specs, 11);
  const int64_t V = f.model->config().vocab_size, d = f.model->config().d_model;
  std::vector<SeqChunk> chunks;
  std::vector<int32_t> tok = f.step_tokens(chunks);
  for (size_t i = 0; i < chunks.size(); ++i) chunks[i].n_logits = n_logits[i];
  ASSERT_EQ(logit_rows(chunks), 5 + 1 + 2);
  Buffer logits(DType::kF32, {8, V}), hidden(DType::kF32, {8, d});
  Tensor lt = logits.t(), ht = hidden.t();
  f.model->forward_multi(Tensor(tok.data(), DType::kI32, {int64_t(tok.size())}), chunks, lt, &ht);
  int64_t row = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(fmt::format("sequence {}", i));
    EXPECT_EQ(f.a[i].n_past(), specs[i].past + specs[i].n);
    if (n_logits[i] == 0) {
      EXPECT_TRUE(std::isnan(lt.f32()[row * V]) && std::isnan(ht.f32()[row * d])) << "its one row is NaN";
      ++row;
    }
    for (int64_t t = 0; t < specs[i].n; ++t) {  // the same tokens one at a time on cache b
      const int64_t p = specs[i].past + t;
      SeqChunk one{0, 1, &f.b[i], 1};
      Buffer l1(DType::kF32, {1, V}), h1(DType::kF32, {1, d});
      Tensor l1t = l1.t(), h1t = h1.t();
      f.model->forward_multi(Tensor(f.ids[i].data() + p, DType::kI32, {1}), {&one, 1}, l1t, &h1t);
      if (t < specs[i].n - n_logits[i]) continue;
      EXPECT_ALLCLOSE(lt.rows_range(row, row + 1), l1t, kPathTol) << "logits row of token " << t;
      EXPECT_ALLCLOSE(ht.rows_range(row, row + 1), h1t, kPathTol) << "hidden row of token " << t;
      ++row;
    }
  }
  EXPECT_EQ(row, 8);
  for (size_t i = 0; i < specs.size(); ++i) {
    const int64_t p = specs[i].past + specs[i].n;
    EXPECT_ALLCLOSE(feed(*f.model, f.a[i], f.ids[i], p, p + 1).t(), feed(*f.model, f.b[i], f.ids[i], p, p + 1).t(),
                    kPathTol);
  }
  // n_logits outside [0, n] is refused before anything runs.
  chunks[2].n_logits = 4;
  EXPECT_THROW(f.model->forward_multi(Tensor(tok.data(), DType::kI32, {int64_t(tok.size())}), chunks, lt, &ht), Error);
}

// One chunk through forward_multi == forward() without all_logits (the last row), bitwise.
TEST_P(ForwardMulti, OneChunkEqualsForward) {
  Fixture f(dir(), {{20, 12}}, 3);
  const Buffer fused = f.fused_step();
  EXPECT_ALLCLOSE(fused.t(), f.single_step(0).t(), kExact);
}

// No chunks (an idle engine step): nothing runs — no phase of a forward is entered — and nothing
// changes: the next fused step equals, bitwise, the one of a model that never saw the empty call.
// No chunks over a non-empty token list is refused (the chunks must tile the tokens).
TEST_P(ForwardMulti, NoChunksIsANoOp) {
  Fixture used(dir(), kDecode, 7), fresh(dir(), kDecode, 7);
  Model& model = *used.model;
  Buffer logits(DType::kF32, {0, model.config().vocab_size});
  Tensor lt = logits.t();
  int32_t none = 0;
  PhaseTimes phases;
  model.set_phase_times(&phases);
  model.forward_multi(Tensor(&none, DType::kI32, {0}), {}, lt);
  model.set_phase_times(nullptr);
  for (int p = 0; p < int(Phase::kCount); ++p) EXPECT_EQ(phases.seconds[p], 0.0) << "phase " << p << " ran";
  EXPECT_ALLCLOSE(used.fused_step().t(), fresh.fused_step().t(), kExact);
  EXPECT_THROW(model.forward_multi(Tensor(&none, DType::kI32, {1}), {}, lt), Error);
}

INSTANTIATE_TEST_SUITE_P(Families, ForwardMulti,
                         ::testing::Values(Case{"minimax_m2", "f32"}, Case{"minimax_m2", "bf16"},
                                           Case{"minimax_m2", "fp8"}, Case{"minimax_m3", "f32"},
                                           Case{"minimax_m3", "mxfp8"}, Case{"minimax_text01", "f32"}),
                         case_name);

// M3: the fused step really exercises sparse selection (contexts beyond K·B = 12 keys).
TEST(ForwardMultiM3, SparseSelectionIsActive) {
  auto model = load_model(testing::tiny_dir("minimax_m3", "f32", 31));
  const ModelConfig& c = model->config();
  ASSERT_GT(c.count_layers(LayerKind::kSparse), 0);
  const int64_t kb = int64_t(c.msa.topk) * c.msa.block;
  int beyond = 0;
  for (const SeqSpec& s : kMixed) beyond += s.past + s.n > kb;
  EXPECT_GE(beyond, 5);
}

}  // namespace
}  // namespace mmx
