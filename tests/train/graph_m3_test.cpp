// The MiniMax-M3 training graph (src/train/graph_m3.cpp) on tiny seeded checkpoints with the MSA
// selection active (top-k below the number of visible blocks):
//   * its forward is the inference forward (Model::forward through the block-major KV cache);
//   * the double graph's parameter gradients equal central finite differences of its loss: the CE
//     for every tensor (index_loss_weight 0), and CE + W·KL for the indexer tensors (the only ones
//     the KL trains: its teacher and its input are detached, so for the rest the analytic gradient
//     is the CE's by definition, which the torch check covers);
//   * the KL leaves every non-indexer gradient bitwise unchanged and is the indexer's only signal;
//   * a tree-packed batch whose branches start on block boundaries equals the branches run as
//     separate sequences (blocks are blocks of the packed row index: reference/torch_models.py);
//   * random prefix trees as parent links give bitwise the loss, KL and gradients of the same
//     trees as dense masks (train/visibility.h);
//   * determinism: the same bits twice, and for 1 and 2 threads;
//   * `mmx train --arch minimax_m3` end to end: 20 steps lower the loss, and the checkpoint loads
//     in the engine with the training graph's logits.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/generate.h"
#include "model/config.h"
#include "model/model.h"
#include "testing/tiny_models.h"
#include "engine_parity.h"
#include "train/graph.h"
#include "train/kernels.h"
#include "train/loss.h"
#include "train/params.h"
#include "train/trainer.h"
#include "train/visibility.h"
#include "tree_batch.h"

namespace mmx::train {
namespace {

// 3 layers (0 dense, 1-2 MSA + MoE), hidden 32, 4/2 heads of 8, rotary 4, index 2 x 8, MSA block 2
// top-2, 4 experts of 16 top-2 + shared 16, dense MLP 32, vocab 300.
void small_m3(TinyOptions& o) {
  o.n_layers = 3, o.d_model = 32, o.n_heads = 4, o.n_kv_heads = 2, o.head_dim = 8, o.rotary_dim = 4;
  o.ffn_dim = 16, o.n_experts = 4, o.n_experts_active = 2, o.vocab_size = 300;
  o.n_dense_layers = 1, o.dense_ffn_dim = 32, o.shared_ffn_dim = 16, o.index_dim = 8, o.msa_block = 2, o.msa_topk = 2;
}
std::string small_dir() { return testing::tiny_dir("minimax_m3", "f32", 5, "_small", small_m3); }

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

bool is_indexer(const std::string& name) { return name.find("self_attn.index_") != std::string::npos; }

TEST(TrainGraphM3, ForwardEqualsInferenceForward) {
  const std::string dir = testing::tiny_dir("minimax_m3", "f32", 3);  // make-tiny defaults: block 4, top-3
  const ModelConfig cfg = load_config(dir);
  ASSERT_EQ(cfg.msa.block, 4);
  ASSERT_EQ(cfg.msa.topk, 3);
  ASSERT_GT(cfg.count_layers(LayerKind::kSparse), 0);
  auto model = load_model(dir);
  const int64_t T = 48;  // 12 blocks: selection active from row 12 on
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
  EXPECT_GT(gd->index_kl(), 0.0);

  double mx = 0, d32 = 0, d64 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mx = std::max(mx, std::fabs(double(want.t().f32()[i])));
    d32 = std::max(d32, std::fabs(double(got[i]) - want.t().f32()[i]));
    d64 = std::max(d64, std::fabs(gotd[i] - want.t().f32()[i]));
  }
  // The model-level tolerance of docs/numerics.md: 1e-4·max|logit| (fp32 inference kernels).
  EXPECT_LE(d32, 1e-4 * mx) << "float training forward vs inference: " << d32 << " (max |logit| " << mx << ")";
  EXPECT_LE(d64, 1e-4 * mx) << "double training forward vs inference: " << d64;
  std::printf("M3 forward vs inference: max|diff| f32 %.3g, f64 %.3g (max |logit| %.3g)\n", d32, d64, mx);
}

// Σ CE / scored + W · kl of the double graph for the current parameter values.
double loss_of(Graph<double>& g, const TrainBatch& b, double scored) {
  const double ce = g.forward_loss(b) / scored;
  return ce + b.index_loss_weight * g.index_kl();
}

void check_fd(double weight, bool indexer_only) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  ParamSet<double> P(param_layout(cfg));
  load_params(dir, P);
  const int64_t B = 2, T = 12;  // 6 blocks of 2, top-2: selection active
  const std::vector<int32_t> tok = random_ids(B * T, cfg.vocab_size, 7);
  std::vector<int32_t> tgt = random_ids(B * T, cfg.vocab_size, 8);
  tgt[3] = -1;
  const double scored = double(B * T - 1);
  TrainBatch b{B, T, tok.data(), tgt.data(), nullptr, nullptr};
  b.index_loss_weight = weight;
  auto g = make_graph<double>(cfg, P, B, T);
  P.zero_grad();
  g->forward_backward(b, 1.0 / scored);
  const std::vector<double> grad = P.grad;
  std::mt19937_64 rng(9);
  int checked = 0;
  double worst = 0;
  for (const ParamInfo& info : P.infos) {
    if (!info.trainable || (indexer_only && !is_indexer(info.name))) continue;
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
      worst = std::max(worst, std::fabs(grad[size_t(info.offset + i)] - fd) / scale);
      ++checked;
    }
  }
  EXPECT_GT(checked, indexer_only ? 12 : 60);
  std::printf("M3 gradients vs finite differences (W=%g%s): %d elements, max |diff|/max|grad| %.3g\n", weight,
              indexer_only ? ", indexer tensors" : "", checked, worst);
}

TEST(TrainGraphM3, CeGradientsMatchFiniteDifferences) { check_fd(0.0, false); }
TEST(TrainGraphM3, IndexerKlGradientsMatchFiniteDifferences) { check_fd(0.5, true); }

TEST(TrainGraphM3, TreeParentsEqualDenseMaskBitwise) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  const int64_t B = 2, T = 13;
  for (uint64_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE(seed);
    const testing_tree::TreeBatch tb = testing_tree::random_tree_batch(B, T, cfg.vocab_size, seed);
    std::vector<std::vector<float>> grads;
    std::vector<double> losses, kls;
    for (bool tree : {false, true}) {
      ParamSet<float> P(param_layout(cfg));
      load_params(dir, P);
      auto g = make_graph<float>(cfg, P, B, T);
      TrainBatch b{B, T, tb.tok.data(), tb.tgt.data(), tb.pos.data(), tree ? nullptr : tb.dense.data()};
      b.parents = tree ? tb.parents.data() : nullptr;
      b.index_loss_weight = 0.5;
      P.zero_grad();
      losses.push_back(g->forward_backward(b, 1.0 / double(B * T)));
      kls.push_back(g->index_kl());
      grads.push_back(P.grad);
    }
    EXPECT_GT(kls[0], 0.0);
    EXPECT_EQ(losses[1], losses[0]);
    EXPECT_EQ(kls[1], kls[0]);
    EXPECT_EQ(0, std::memcmp(grads[1].data(), grads[0].data(), grads[0].size() * sizeof(float)));
  }
}

// The three steps (forward, the loss step, backward) are forward_backward bit for bit, the KL
// term included (backward adds it from the forward's batch).
TEST(TrainGraphM3, ThreeStepsAreForwardBackwardBitwise) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  const int64_t B = 2, T = 12, n = B * T;
  const std::vector<int32_t> tok = random_ids(n, cfg.vocab_size, 71), tgt = random_ids(n, cfg.vocab_size, 72);
  std::vector<std::vector<float>> grads;
  std::vector<double> losses, kls;
  for (bool steps : {false, true}) {
    ParamSet<float> P(param_layout(cfg));
    load_params(dir, P);
    auto g = make_graph<float>(cfg, P, B, T);
    TrainBatch b{B, T, tok.data(), tgt.data(), nullptr, nullptr};
    b.index_loss_weight = 0.5;
    P.zero_grad();
    if (!steps) {
      losses.push_back(g->forward_backward(b, 0.125));
    } else {
      const float* logits = g->forward(b);
      losses.push_back(token_nll<float>(logits, tgt.data(), nullptr, n, cfg.vocab_size, 0.125, g->dlogits_buffer()));
      g->backward(g->dlogits_buffer());
    }
    kls.push_back(g->index_kl());
    grads.push_back(P.grad);
  }
  EXPECT_GT(kls[0], 0.0);
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(kls[1], kls[0]);
  EXPECT_EQ(0, std::memcmp(grads[1].data(), grads[0].data(), grads[0].size() * sizeof(float)));
}

TEST(TrainGraphM3, KlTrainsOnlyTheIndexer) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  const int64_t B = 2, T = 12;
  const std::vector<int32_t> tok = random_ids(B * T, cfg.vocab_size, 31), tgt = random_ids(B * T, cfg.vocab_size, 32);
  auto grads = [&](double w) {
    ParamSet<double> P(param_layout(cfg));
    load_params(dir, P);
    auto g = make_graph<double>(cfg, P, B, T);
    TrainBatch b{B, T, tok.data(), tgt.data(), nullptr, nullptr};
    b.index_loss_weight = w;
    P.zero_grad();
    g->forward_backward(b, 1.0 / double(B * T));
    return std::make_pair(P.grad, P.infos);
  };
  const auto [g0, infos] = grads(0.0);
  const auto g1 = grads(0.7).first;
  double idx_norm = 0;
  for (const ParamInfo& i : infos)
    for (int64_t e = 0; e < i.numel; ++e) {
      const size_t k = size_t(i.offset + e);
      if (is_indexer(i.name)) {
        ASSERT_EQ(g0[k], 0.0) << i.name << ": no indexer gradient without the KL";
        idx_norm += std::fabs(g1[k]);
      } else {
        ASSERT_EQ(g1[k], g0[k]) << i.name << ": the KL must not reach non-indexer tensors";
      }
    }
  EXPECT_GT(idx_norm, 0.0);
}

// Prefix of 4 rows (2 blocks of 2), branch A of 4 rows, branch B of 5: in the packed batch B
// starts at row 8, a block boundary, so its blocks are A's shifted by 2 whole blocks and the
// selection (candidates = blocks holding a visible key; ties by id) is the same as alone.
TEST(TrainGraphM3, BlockAlignedTreeEqualsSeparateSequences) {
  const std::string dir = small_dir();
  const ModelConfig cfg = load_config(dir);
  ASSERT_EQ(cfg.msa.block, 2);
  const std::vector<int32_t> p = {5, 17, 42, 8}, a = {100, 7, 66, 3}, bb = {250, 9, 12, 13, 14};
  const std::vector<int32_t> a_next = {7, 66, 3, 61}, b_next = {9, 12, 13, 14, 88};
  // separate: [p a pad] and [p b], 9 rows each; the pad row is unscored and comes last
  std::vector<int32_t> sep_tok, sep_tgt;
  for (int32_t x : p) sep_tok.push_back(x);
  for (int32_t x : a) sep_tok.push_back(x);
  sep_tok.push_back(1);
  for (int32_t x : p) sep_tok.push_back(x);
  for (int32_t x : bb) sep_tok.push_back(x);
  sep_tgt = {17, 42, 8, 100, 7, 66, 3, 61, -1, /* B: its prefix unscored */ -1, -1, -1, -1, 9, 12, 13, 14, 88};
  ParamSet<double> P1(param_layout(cfg));
  load_params(dir, P1);
  auto g1 = make_graph<double>(cfg, P1, 2, 9);
  P1.zero_grad();
  const double l1 = g1->forward_backward(TrainBatch{2, 9, sep_tok.data(), sep_tgt.data(), nullptr, nullptr}, 1.0);
  // packed: p a b, 13 rows; p's last row carries A's first target
  std::vector<int32_t> pk_tok, pk_tgt = {17, 42, 8, 100, 7, 66, 3, 61, 9, 12, 13, 14, 88};
  for (const auto* v : {&p, &a, &bb})
    for (int32_t x : *v) pk_tok.push_back(x);
  const std::vector<int32_t> pk_pos = {0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8};
  const std::vector<int> parent = {-1, 0, 1, 2, 3, 4, 5, 6, 3, 8, 9, 10, 11};
  std::vector<uint8_t> vis(13 * 13, 0);
  for (int i = 0; i < 13; ++i)
    for (int j = i; j >= 0; j = parent[size_t(j)]) vis[size_t(i * 13 + j)] = 1;
  ParamSet<double> P2(param_layout(cfg));
  load_params(dir, P2);
  auto g2 = make_graph<double>(cfg, P2, 1, 13);
  P2.zero_grad();
  const double l2 =
      g2->forward_backward(TrainBatch{1, 13, pk_tok.data(), pk_tgt.data(), pk_pos.data(), vis.data()}, 1.0);
  EXPECT_NEAR(l2, l1, 1e-12 * std::fabs(l1));
  const double s = max_abs(P1.grad);
  double worst = 0;
  for (size_t i = 0; i < P1.grad.size(); ++i) worst = std::max(worst, std::fabs(P2.grad[i] - P1.grad[i]));
  EXPECT_LE(worst, 1e-12 * s);
}

template <class T>
std::vector<T> grads_of(const std::string& dir, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt,
                        int64_t rows, int64_t seq, double w) {
  const ModelConfig cfg = load_config(dir);
  ParamSet<T> P(param_layout(cfg));
  load_params(dir, P);
  auto g = make_graph<T>(cfg, P, rows, seq);
  P.zero_grad();
  TrainBatch b{rows, seq, tok.data(), tgt.data(), nullptr, nullptr};
  b.index_loss_weight = w;
  g->forward_backward(b, 1.0 / double(rows * seq));
  return P.grad;
}

TEST(TrainGraphM3, DeterministicAndThreadCountInvariant) {
  const std::string dir = small_dir();
  const int64_t B = 3, T = 16;
  const std::vector<int32_t> tok = random_ids(B * T, 300, 21), tgt = random_ids(B * T, 300, 22);
  set_n_threads(2);
  const auto a = grads_of<float>(dir, tok, tgt, B, T, 0.5), b = grads_of<float>(dir, tok, tgt, B, T, 0.5);
  set_n_threads(1);
  const auto c = grads_of<float>(dir, tok, tgt, B, T, 0.5);
  set_n_threads(0);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "two runs differ";
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4)) << "1 thread differs from 2";
}

TEST(TrainGraphM3, LayoutUsesCheckpointNames) {
  const ModelConfig cfg = load_config(small_dir());
  const auto layout = param_layout(cfg);
  int gemma = 0, keep = 0;
  for (const ParamInfo& i : layout) {
    EXPECT_EQ(i.name.rfind("language_model.", 0), 0u) << i.name;
    gemma += i.init == Init::kZeros && i.trainable;
    keep += i.keep_f32;
  }
  EXPECT_EQ(gemma, 3 * 4 + 2 * 2 + 1);  // in/post/q/k norms per layer, index norms per sparse layer, final
  EXPECT_EQ(keep, 2 * 2);               // router + bias per MoE layer
}

TEST(TrainGraphM3, TrainRunLearnsAndTheCheckpointLoads) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("mmx_graph_m3_test_" + std::to_string(getpid()));
  fs::create_directories(base);
  const fs::path text = base / "corpus.txt", d = base / "run";
  {
    std::ofstream f(text);
    const char* animals[] = {"cat", "dog", "bird", "fish", "horse"};
    const char* verbs[] = {"sees", "likes", "follows", "finds"};
    for (int i = 0; i < 1500; ++i)
      f << "the " << animals[i % 5] << " " << verbs[(i / 5) % 4] << " the " << animals[(i * 7 + 3) % 5] << " "
        << (i % 10) << ".\n";
  }
  TrainOptions o;
  o.shape = tiny_defaults("minimax_m3");  // MSA block 4, top-3: with 32-token windows, 8 blocks
  o.shape.n_layers = 2, o.shape.d_model = 32, o.shape.n_heads = 4, o.shape.n_kv_heads = 2, o.shape.head_dim = 8;
  o.shape.rotary_dim = 4, o.shape.ffn_dim = 16, o.shape.n_experts = 4, o.shape.dense_ffn_dim = 32;
  o.shape.shared_ffn_dim = 16, o.shape.index_dim = 8;
  o.data = text.string();
  o.vocab = 300;
  o.steps = 20;
  o.seq_len = 32;
  o.batch = 4;
  o.lr = 1e-2;
  o.warmup = 2;
  o.save_dtype = "f32";
  o.out = d.string();
  o.threads = 2;
  o.quiet = true;
  const TrainResult res = train_run(o);
  // The log's first and last losses (column 3 of train_log.csv).
  std::ifstream log(d / "train_log.csv");
  std::string line;
  std::vector<double> losses;
  std::getline(log, line);
  while (std::getline(log, line)) {
    std::stringstream ss(line);
    std::string cell;
    for (int c = 0; c < 3; ++c) std::getline(ss, cell, ',');
    losses.push_back(std::stod(cell));
  }
  ASSERT_EQ(losses.size(), 20u);
  const double first = (losses[0] + losses[1]) / 2, last = (losses[18] + losses[19]) / 2;
  EXPECT_LT(last, first - 0.5) << "loss " << first << " -> " << last;
  EXPECT_NEAR(res.last_loss, losses[19], 1e-4);
  std::printf("M3 train run: loss %.3f -> %.3f in 20 steps\n", losses[0], losses[19]);

  // The engine loads the checkpoint; its logits equal the training graph's on the same weights.
  expect_engine_logits_equal_graph(d.string(), random_ids(32, load_config(d.string()).vocab_size, 41));
  fs::remove_all(base);
}

}  // namespace
}  // namespace mmx::train
