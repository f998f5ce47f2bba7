// The whole training graph on tiny seeded checkpoints (real HF layout), MiniMax-M2 and
// Text-01 (lightning + softmax layers, post-norm α/β residual, softmax router):
//   * its forward is the inference forward (same logits as Model::forward through KV caches);
//   * the double graph's parameter gradients equal central finite differences of its loss;
//   * splitting a batch into micro-batches (global token normaliser) leaves the gradient unchanged;
//   * a tree-packed batch (shared prefix, two branches, visibility mask + positions) has the loss
//     and gradients of the branches run as separate sequences;
//   * the visibility forms: random prefix trees as parent links give bitwise the gradients of
//     the same trees as dense masks; the converters round-trip;
//   * the three steps (forward, loss, backward) are forward_backward bitwise, per-token loss
//     weights scale exactly, and forward's target log-probabilities are the loss step's;
//   * determinism: the same bits twice, and for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/generate.h"
#include "model/config.h"
#include "model/model.h"
#include "testing/tiny_models.h"
#include "train/graph.h"
#include "train/kernels.h"
#include "train/loss.h"
#include "train/params.h"
#include "train/visibility.h"
#include "tree_batch.h"

namespace mmx::train {
namespace {

// A small M2 (2 layers, hidden 32, 4/2 heads of 8, rotary 4, 4 experts of 16, top-2).
void small_m2(TinyOptions& o) {
  o.n_layers = 2, o.d_model = 32, o.n_heads = 4, o.n_kv_heads = 2, o.head_dim = 8, o.rotary_dim = 4;
  o.ffn_dim = 16, o.n_experts = 4, o.n_experts_active = 2, o.vocab_size = 300;
}
// A small Text-01 (4 layers: lightning, softmax, lightning, softmax; post-norm α/β; softmax top-2).
void small_text01(TinyOptions& o) {
  small_m2(o);
  o.n_layers = 4, o.full_attn_interval = 2;
}
std::string small_dir() { return testing::tiny_dir("minimax_m2", "f32", 5, "_small", small_m2); }
std::string small_text01_dir() { return testing::tiny_dir("minimax_text01", "f32", 6, "_small", small_text01); }
// Both families of the MoE graph, for the tests that loop over them.
std::vector<std::string> small_dirs() { return {small_dir(), small_text01_dir()}; }

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = int32_t(rng() % uint64_t(vocab));
  return v;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(TrainGraph, ForwardEqualsInferenceForward) {
  for (const std::string& dir : {testing::tiny_dir("minimax_m2", "f32", 3), testing::tiny_dir("minimax_text01", "f32", 3)}) {
  SCOPED_TRACE(dir);
  ModelConfig cfg = load_config(dir);
  auto model = load_model(dir);
  cfg.lightning_block = 16;  // the training graph's lightning crosses blocks (inference: one block of 40)
  const int64_t T = 40;
  const std::vector<int32_t> ids = random_ids(T, cfg.vocab_size, 1);
  const Buffer want = prefill_logits(*model, ids, 0);  // [T, V]
  std::vector<int32_t> targets(ids.size(), -1);

  ParamSet<float> P(param_layout(cfg));
  load_params(dir, P);
  auto g = make_graph<float>(cfg, P, 1, T);
  std::vector<float> got(static_cast<size_t>(T * cfg.vocab_size));
  g->forward_loss(TrainBatch{1, T, ids.data(), targets.data(), nullptr, nullptr}, got.data());

  ParamSet<double> Pd(param_layout(cfg));
  load_params(dir, Pd);
  auto gd = make_graph<double>(cfg, Pd, 1, T);
  std::vector<double> gotd(got.size());
  gd->forward_loss(TrainBatch{1, T, ids.data(), targets.data(), nullptr, nullptr}, gotd.data());

  double mx = 0, d32 = 0, d64 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mx = std::max(mx, std::fabs(double(want.t().f32()[i])));
    d32 = std::max(d32, std::fabs(double(got[i]) - want.t().f32()[i]));
    d64 = std::max(d64, std::fabs(gotd[i] - want.t().f32()[i]));
  }
  // The inference forward is fp32 with its own kernels: 1e-4·max|logit| is the model-level
  // tolerance of docs/numerics.md (measured here: ~1e-6 relative).
  EXPECT_LE(d32, 1e-4 * mx) << "float training forward vs inference: " << d32 << " (max |logit| " << mx << ")";
  EXPECT_LE(d64, 1e-4 * mx) << "double training forward vs inference: " << d64;
  }
}

// Loss of the double graph (Σ CE / scored) for the current parameter values.
double loss_of(Graph<double>& g, const TrainBatch& b, double scored) { return g.forward_loss(b) / scored; }

TEST(TrainGraph, ModelGradientsMatchFiniteDifferences) {
  for (const std::string& dir : small_dirs()) {
  SCOPED_TRACE(dir);
  ModelConfig cfg = load_config(dir);
  cfg.lightning_block = 4;  // Text-01: the blockwise lightning crosses a block boundary (6 = 4 + 2)
  ParamSet<double> P(param_layout(cfg));
  load_params(dir, P);
  const int64_t B = 2, T = 6;
  const std::vector<int32_t> tok = random_ids(B * T, cfg.vocab_size, 7);
  std::vector<int32_t> tgt = random_ids(B * T, cfg.vocab_size, 8);
  tgt[3] = -1;  // one unscored position
  const double scored = double(B * T - 1);
  const TrainBatch b{B, T, tok.data(), tgt.data(), nullptr, nullptr};
  auto g = make_graph<double>(cfg, P, B, T);
  P.zero_grad();
  g->forward_backward(b, 1.0 / scored);
  const std::vector<double> grad = P.grad;
  // Every tensor: 3 seeded elements (plus the largest-gradient one), h = 1e-5.
  std::mt19937_64 rng(9);
  int checked = 0;
  for (const ParamInfo& info : P.infos) {
    if (!info.trainable) continue;
    std::vector<int64_t> idx;
    for (int r = 0; r < 3; ++r) idx.push_back(int64_t(rng() % uint64_t(info.numel)));
    int64_t big = 0;
    for (int64_t i = 1; i < info.numel; ++i)
      if (std::fabs(grad[size_t(info.offset + i)]) > std::fabs(grad[size_t(info.offset + big)])) big = i;
    idx.push_back(big);
    std::vector<double> tg(grad.begin() + info.offset, grad.begin() + info.offset + info.numel);
    const double scale = std::max(max_abs(tg), 1e-6);
    for (int64_t i : idx) {
      double& w = P.value[size_t(info.offset + i)];
      const double w0 = w, h = 1e-5;
      w = w0 + h;
      const double lp = loss_of(*g, b, scored);
      w = w0 - h;
      const double lm = loss_of(*g, b, scored);
      w = w0;
      const double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(grad[size_t(info.offset + i)], fd, 1e-6 * scale + 1e-9) << info.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
  }
}

// Gradients of `rows` sequences of batch (tok, tgt) split into micro-batches of `micro`.
template <class T>
std::vector<T> grads_split(const std::string& dir, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt,
                           int64_t rows, int64_t seq, int64_t micro) {
  const ModelConfig cfg = load_config(dir);
  ParamSet<T> P(param_layout(cfg));
  load_params(dir, P);
  auto g = make_graph<T>(cfg, P, micro, seq);
  P.zero_grad();
  for (int64_t r = 0; r < rows; r += micro)
    g->forward_backward(TrainBatch{micro, seq, tok.data() + r * seq, tgt.data() + r * seq, nullptr, nullptr},
                        1.0 / double(rows * seq));
  return P.grad;
}

TEST(TrainGraph, MicroBatchSplitLeavesGradientUnchanged) {
  for (const std::string& dir : small_dirs()) {
  SCOPED_TRACE(dir);
  const int64_t B = 4, T = 8;
  const std::vector<int32_t> tok = random_ids(B * T, 300, 11), tgt = random_ids(B * T, 300, 12);
  const auto d1 = grads_split<double>(dir, tok, tgt, B, T, 4), d2 = grads_split<double>(dir, tok, tgt, B, T, 2),
             d4 = grads_split<double>(dir, tok, tgt, B, T, 1);
  const double s = max_abs(d1);
  for (size_t i = 0; i < d1.size(); ++i) {
    ASSERT_NEAR(d2[i], d1[i], 1e-13 * s) << i;
    ASSERT_NEAR(d4[i], d1[i], 1e-13 * s) << i;
  }
  const auto f1 = grads_split<float>(dir, tok, tgt, B, T, 4), f2 = grads_split<float>(dir, tok, tgt, B, T, 2);
  for (size_t i = 0; i < f1.size(); ++i) ASSERT_NEAR(f2[i], f1[i], 2e-6 * s) << i;  // fp32 summation order
  for (size_t i = 0; i < f1.size(); ++i) ASSERT_NEAR(double(f1[i]), d1[i], 1e-4 * s) << i;
  }
}

// Prefix p0 p1 p2, branch A = a3 a4, branch B = b3 b4. Packed: [p0 p1 p2 a3 a4 b3 b4] with a tree
// mask and positions 0 1 2 3 4 3 4. Separate: A = p + a, B = p + b. The packed row p2 can carry one
// target (a3), so B leaves its prefix targets (p0→p1, p1→p2, p2→b3) unscored: every scored target
// then appears once on both sides, with the same context.
TEST(TrainGraph, TreePackedBatchEqualsSeparateSequences) {
  for (const std::string& dir : small_dirs()) {
  SCOPED_TRACE(dir);
  ModelConfig cfg = load_config(dir);
  // Text-01: the separate sequences run lightning blockwise (blocks of 2 over 5 tokens), the packed
  // tree its masked one-block form, so this also checks the two forms against each other.
  cfg.lightning_block = 2;
  const std::vector<int32_t> p = {5, 17, 42}, a = {100, 7}, bb = {250, 9};
  std::vector<int32_t> sep_tok = {p[0], p[1], p[2], a[0], a[1], p[0], p[1], p[2], bb[0], bb[1]};
  std::vector<int32_t> sep_tgt = {17, 42, 100, 7, 61, -1, -1, -1, 9, 88};
  ParamSet<double> P1(param_layout(cfg));
  load_params(dir, P1);
  auto g1 = make_graph<double>(cfg, P1, 2, 5);
  P1.zero_grad();
  const double l1 = g1->forward_backward(TrainBatch{2, 5, sep_tok.data(), sep_tgt.data(), nullptr, nullptr}, 1.0);
  std::vector<int32_t> pk_tok = {p[0], p[1], p[2], a[0], a[1], bb[0], bb[1]};
  std::vector<int32_t> pk_tgt = {17, 42, 100, 7, 61, 9, 88};
  std::vector<int32_t> pk_pos = {0, 1, 2, 3, 4, 3, 4};
  const std::vector<int> parent = {-1, 0, 1, 2, 3, 2, 5};
  std::vector<uint8_t> vis(49, 0);
  for (int i = 0; i < 7; ++i)
    for (int j = i; j >= 0; j = parent[size_t(j)]) vis[size_t(i * 7 + j)] = 1;
  ParamSet<double> P2(param_layout(cfg));
  load_params(dir, P2);
  auto g2 = make_graph<double>(cfg, P2, 1, 7);
  P2.zero_grad();
  const double l2 = g2->forward_backward(TrainBatch{1, 7, pk_tok.data(), pk_tgt.data(), pk_pos.data(), vis.data()}, 1.0);
  EXPECT_NEAR(l2, l1, 1e-12 * std::fabs(l1));
  const double s = max_abs(P1.grad);
  for (size_t i = 0; i < P1.grad.size(); ++i) ASSERT_NEAR(P2.grad[i], P1.grad[i], 1e-12 * s) << i;
  }
}

// Activation recomputation of the softmax probabilities changes memory only: the gradients are
// bitwise those of the saving graph, causal and with a tree mask.
TEST(TrainGraph, RecomputedAttentionEqualsSavedBitwise) {
  for (const std::string& dir : small_dirs()) {
  SCOPED_TRACE(dir);
  const ModelConfig cfg = load_config(dir);
  const int64_t B = 2, T = 9;
  const std::vector<int32_t> tok = random_ids(B * T, cfg.vocab_size, 21), tgt = random_ids(B * T, cfg.vocab_size, 22);
  std::vector<uint8_t> vis(static_cast<size_t>(B * T * T), 0);
  for (int64_t s = 0; s < B; ++s)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) vis[size_t((s * T + i) * T + j)] = (i < 5 || j < 3 || (j >= 5) == (i >= 5)) && (j != 4 || i == 4);
  for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), static_cast<const uint8_t*>(vis.data())}) {
    std::vector<std::vector<float>> grads;
    for (int rc : {0, 1}) {
      ParamSet<float> P(param_layout(cfg));
      load_params(dir, P);
      auto g = make_graph<float>(cfg, P, B, T, GraphOptions{rc});
      P.zero_grad();
      g->forward_backward(TrainBatch{B, T, tok.data(), tgt.data(), nullptr, mask}, 1.0 / double(B * T));
      grads.push_back(P.grad);
    }
    ASSERT_EQ(grads[0].size(), grads[1].size());
    EXPECT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)))
        << (mask ? "tree mask" : "causal");
  }
  }
}

TEST(TrainGraph, TreeParentsEqualDenseMaskBitwise) {
  for (const std::string& dir : small_dirs()) {
    SCOPED_TRACE(dir);
    const ModelConfig cfg = load_config(dir);
    const int64_t B = 2, T = 11;
    for (uint64_t seed : {1, 2, 3, 4}) {
      SCOPED_TRACE(seed);
      const testing_tree::TreeBatch tb = testing_tree::random_tree_batch(B, T, cfg.vocab_size, seed);
      EXPECT_EQ(dense_to_tree(tb.dense.data(), B, T), tb.parents);
      std::vector<std::vector<float>> grads;
      std::vector<double> losses;
      for (int rc : {0, 1})
        for (bool tree : {false, true}) {
          ParamSet<float> P(param_layout(cfg));
          load_params(dir, P);
          auto g = make_graph<float>(cfg, P, B, T, GraphOptions{rc});
          TrainBatch b{B, T, tb.tok.data(), tb.tgt.data(), tb.pos.data(), tree ? nullptr : tb.dense.data()};
          b.parents = tree ? tb.parents.data() : nullptr;
          P.zero_grad();
          losses.push_back(g->forward_backward(b, 1.0 / double(B * T)));
          grads.push_back(P.grad);
        }
      for (size_t k = 1; k < grads.size(); ++k) {
        EXPECT_EQ(losses[k], losses[0]) << k;
        EXPECT_EQ(0, std::memcmp(grads[k].data(), grads[0].data(), grads[0].size() * sizeof(float))) << k;
      }
    }
  }
}

TEST(TrainGraph, VisibilityConvertersRefuseWhatIsNotATree) {
  std::vector<uint8_t> vis = {1, 0, 0, 1, 1, 0, 0, 1, 1};  // 2 sees 1 but not 1's parent 0
  EXPECT_THROW(dense_to_tree(vis.data(), 1, 3), Error);
  const std::vector<int32_t> bad = {-1, 1, 0};  // token 1 is its own parent
  EXPECT_THROW(tree_to_dense(bad.data(), 1, 3), Error);
}

TEST(TrainGraph, ThreeStepsAreForwardBackwardBitwise) {
  for (const std::string& dir : small_dirs()) {
    SCOPED_TRACE(dir);
    const ModelConfig cfg = load_config(dir);
    const int64_t B = 2, T = 9, n = B * T;
    const std::vector<int32_t> tok = random_ids(n, cfg.vocab_size, 61);
    std::vector<int32_t> tgt = random_ids(n, cfg.vocab_size, 62);
    tgt[3] = -1;
    const TrainBatch b{B, T, tok.data(), tgt.data(), nullptr, nullptr};
    auto run = [&](int how, const double* weights, double* loss, std::vector<double>* logp) {
      ParamSet<float> P(param_layout(cfg));
      load_params(dir, P);
      auto g = make_graph<float>(cfg, P, B, T);
      TrainBatch bw = b;
      bw.loss_weights = weights;
      P.zero_grad();
      if (how == 0) {
        *loss = g->forward_backward(bw, 0.25);
      } else {
        const float* logits = g->forward(bw, logp);
        *loss = token_nll<float>(logits, tgt.data(), weights, n, cfg.vocab_size, 0.25, g->dlogits_buffer());
        g->backward(g->dlogits_buffer());
      }
      return P.grad;
    };
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    std::vector<double> logp;
    const auto g0 = run(0, nullptr, &l0, nullptr), g1 = run(1, nullptr, &l1, &logp);
    EXPECT_EQ(l0, l1);
    EXPECT_EQ(0, std::memcmp(g0.data(), g1.data(), g0.size() * sizeof(float)));
    // log p(target) from forward: minus the loss step's per-token loss, 0 where not scored
    ASSERT_EQ(logp.size(), size_t(n));
    EXPECT_EQ(logp[3], 0.0);
    double sum = 0;
    for (double x : logp) sum -= x;
    EXPECT_NEAR(sum, l0, 1e-12 * l0);
    // w_t = 1 is cross-entropy bit for bit; w_t = 2 doubles loss and gradient exactly
    const std::vector<double> ones(size_t(n), 1.0), twos(size_t(n), 2.0);
    const auto g2 = run(0, ones.data(), &l2, nullptr), g3 = run(1, twos.data(), &l3, nullptr);
    EXPECT_EQ(l2, l0);
    EXPECT_EQ(0, std::memcmp(g2.data(), g0.data(), g0.size() * sizeof(float)));
    EXPECT_EQ(l3, 2 * l0);
    for (size_t i = 0; i < g0.size(); ++i) ASSERT_EQ(g3[i], 2 * g0[i]) << i;
  }
}

TEST(TrainGraph, DeterministicAndThreadCountInvariant) {
  for (const std::string& dir : small_dirs()) {
  SCOPED_TRACE(dir);
  const int64_t B = 3, T = 16;
  const std::vector<int32_t> tok = random_ids(B * T, 300, 21), tgt = random_ids(B * T, 300, 22);
  set_n_threads(2);
  const auto a = grads_split<float>(dir, tok, tgt, B, T, 3), b = grads_split<float>(dir, tok, tgt, B, T, 3);
  set_n_threads(1);
  const auto c = grads_split<float>(dir, tok, tgt, B, T, 3);
  set_n_threads(0);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "two runs differ";
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4)) << "1 thread differs from 2";
  }
}

TEST(TrainGraph, BadBatchesAreRefused) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  ParamSet<float> P(param_layout(cfg));
  auto g = make_graph<float>(cfg, P, 1, 4);
  std::vector<int32_t> tok = {1, 2, 3, 4}, tgt = {2, 3, 4, 5};
  EXPECT_THROW(g->forward_loss(TrainBatch{2, 4, tok.data(), tgt.data(), nullptr, nullptr}, nullptr), Error);
  tok[2] = 300;
  EXPECT_THROW(g->forward_loss(TrainBatch{1, 4, tok.data(), tgt.data(), nullptr, nullptr}, nullptr), Error);
  tok[2] = 3;
  tgt[1] = -2;
  EXPECT_THROW(g->forward_loss(TrainBatch{1, 4, tok.data(), tgt.data(), nullptr, nullptr}, nullptr), Error);
  tgt[1] = 3;
  std::vector<uint8_t> vis(16, 0);  // nobody sees itself
  EXPECT_THROW(g->forward_loss(TrainBatch{1, 4, tok.data(), tgt.data(), nullptr, vis.data()}, nullptr), Error);
  std::vector<int32_t> parents = {-1, 0, 2, 1};  // token 2 is its own parent
  TrainBatch tb{1, 4, tok.data(), tgt.data(), nullptr, nullptr};
  tb.parents = parents.data();
  EXPECT_THROW(g->forward_loss(tb), Error);
  parents[2] = 0;
  EXPECT_NO_THROW(g->forward_loss(tb));
  for (size_t i = 0; i < 4; ++i) vis[i * 5] = 1;
  tb.visibility = vis.data();  // both forms at once
  EXPECT_THROW(g->forward_loss(tb), Error);
}

}  // namespace
}  // namespace mmx::train
