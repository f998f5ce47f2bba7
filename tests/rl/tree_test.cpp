// The prefix-tree packer (rl/tree.h) and the exactness of merged training (seed 004 §2: "no
// approximation error"): a random group packed as ONE tree sequence and the same samples run as
// separate causal sequences give the same scored log-probabilities and the same gradient of every
// parameter, fp64 to 1e-10 relative and fp32 to 1e-5, for the three attention generations:
//   * MiniMax-M2 (softmax GQA),
//   * Text-01 (lightning: the separate run goes blockwise through the decayed state across
//     several lightning blocks; the tree runs the one-block form over the token's ancestry),
//   * MiniMax-M3 (MSA with selection active: blocks are picked by position in the token's own
//     sequence).
// The loss is a random linear function of the scored log-probabilities (one weight per
// (sample, token), so a shared scored prefix carries different "advantages" per owner); the
// objectives themselves are rl_objective_test's. A causal mask in place of the tree mask must
// break the equality (the test sees the tree).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "model/config.h"
#include "rl/packed_step.h"
#include "rl/tree.h"
#include "testing/tiny_models.h"
#include "train/params.h"

namespace mmx::rl {
namespace {

// ---- random groups ----
// G samples grown as a tree: a shared system prompt, then each sample copies a prefix of an
// earlier sample (a branch point: 1-3 levels deep) and appends its own ids; its prompt/completion
// boundary falls anywhere after the system prompt (multi-turn: one sample's completion is often a
// later sample's prompt), so shared scored prefixes with different weights occur.
std::vector<Sample> random_group(int G, int sys_len, int max_extra, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto id = [&] { return int32_t(rng() % uint64_t(vocab)); };
  std::vector<std::vector<int32_t>> seqs;
  std::vector<int32_t> sys;
  for (int i = 0; i < sys_len; ++i) sys.push_back(id());
  std::vector<Sample> out;
  for (int g = 0; g < G; ++g) {
    std::vector<int32_t> s = sys;
    if (!seqs.empty() && rng() % 4 != 0) {  // branch off an earlier sample
      const std::vector<int32_t>& from = seqs[rng() % seqs.size()];
      const size_t cut = sys.size() + rng() % (from.size() - sys.size() + 1);
      s.assign(from.begin(), from.begin() + int64_t(cut));
    }
    const int extra = 2 + int(rng() % uint64_t(max_extra));
    for (int i = 0; i < extra; ++i) s.push_back(id());
    seqs.push_back(s);
    const size_t p = 1 + rng() % (s.size() - 1);  // prompt = s[0, p), completion = the rest
    out.push_back({{s.begin(), s.begin() + int64_t(p)}, {s.begin() + int64_t(p), s.end()}});
  }
  return out;
}

// A linear loss Σ w_e logp_e with w drawn per (sample, index): the same weights whatever the layout.
TermLoss linear_loss(const Packed& p, uint64_t seed) {
  std::vector<double> w;
  for (const ScoredRow& s : p.scored) {
    std::mt19937_64 r(seed * 1000003 + uint64_t(s.sample) * 4099 + uint64_t(s.index));
    w.push_back(std::uniform_real_distribution<double>(-1, 1)(r));
  }
  return [w](const std::vector<double>& logp, std::vector<double>& g) {
    double L = 0;
    for (size_t e = 0; e < logp.size(); ++e) {
      L += w[e] * logp[e];
      g[e] = w[e];
    }
    return L;
  };
}

template <class T>
struct StepRun {
  double loss = 0;
  std::vector<double> logp;  // in (sample, index) order
  std::vector<T> grad;
};

template <class T>
StepRun<T> run(const ModelConfig& cfg, const std::string& dir, const Packed& p, uint64_t wseed) {
  train::ParamSet<T> P(train::param_layout(cfg));
  train::load_params(dir, P);
  auto g = make_packed_graph<T>(cfg, P, p);
  P.zero_grad();
  StepRun<T> r;
  r.loss = packed_forward_backward<T>(*g, p, linear_loss(p, wseed), &r.logp);
  r.grad = P.grad;
  return r;
}

// max over tensors of max|a − b| / max|a| (each tensor against its own scale).
template <class T>
double grad_rel_diff(const ModelConfig& cfg, const std::vector<T>& a, const std::vector<T>& b) {
  const train::ParamSet<T> P(train::param_layout(cfg));
  double worst = 0;
  for (const train::ParamInfo& i : P.infos) {
    if (!i.trainable) continue;
    double mx = 0, d = 0;
    for (int64_t k = i.offset; k < i.offset + i.numel; ++k) {
      mx = std::max(mx, std::fabs(double(a[size_t(k)])));
      d = std::max(d, std::fabs(double(a[size_t(k)]) - double(b[size_t(k)])));
    }
    if (mx > 0) worst = std::max(worst, d / mx);
  }
  return worst;
}

double logp_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double mx = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, std::fabs(a[i]));
    d = std::max(d, std::fabs(a[i] - b[i]));
  }
  return d / mx;
}

struct FamilyCase {
  std::string name, arch;
  void (*tweak)(TinyOptions&);
  int lightning_block;  // 0 = the config's
};

void small_common(TinyOptions& o) {
  o.n_layers = 2, o.d_model = 32, o.n_heads = 4, o.n_kv_heads = 2, o.head_dim = 8, o.rotary_dim = 4;
  o.ffn_dim = 16, o.n_experts = 4, o.n_experts_active = 2, o.vocab_size = 300;
}
void small_text01(TinyOptions& o) {
  small_common(o);
  o.n_layers = 4, o.full_attn_interval = 2;
}
void small_m3(TinyOptions& o) {
  small_common(o);
  o.n_layers = 3, o.n_dense_layers = 1, o.dense_ffn_dim = 32, o.shared_ffn_dim = 16, o.index_dim = 8;
  o.msa_block = 2, o.msa_topk = 2;  // sequences of 20+ rows: selection drops most blocks
}

std::vector<FamilyCase> families() {
  return {{"M2", "minimax_m2", small_common, 0},
          {"Text-01", "minimax_text01", small_text01, 4},
          {"M3", "minimax_m3", small_m3, 0}};
}

TEST(RlTree, PackerSharesPrefixesAndKeepsOneTermPerOwner) {
  // Two samples with the same prompt [1 2 3] and completions [4 5] / [4 6]: the trie holds
  // 1 2 3 4 (shared) + nothing else as inputs (5 and 6 are only targets).
  const std::vector<Sample> s = {{{1, 2, 3}, {4, 5}}, {{1, 2, 3}, {4, 6}}};
  const Packed p = pack_tree(s);
  EXPECT_EQ(p.seq_len, 4);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(p.parents, (std::vector<int32_t>{-1, 0, 1, 2}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(p.scored.size(), 4u);  // row 2 predicts 4 for both owners; row 3 predicts 5 and 6
  EXPECT_EQ(p.scored[0].row, 2);
  EXPECT_EQ(p.scored[2].row, 2);
  EXPECT_EQ(p.scored[1].row, 3);
  EXPECT_EQ(p.scored[1].target, 5);
  EXPECT_EQ(p.scored[3].target, 6);
  EXPECT_EQ(tree_tokens(s), 4);
  EXPECT_EQ(separate_tokens(s), 8);
  // A branch: [1 2 7] after [1 2 3 4]: DFS puts 7 after the 3-4 subtree with parent row 1, depth 2.
  const Packed q = pack_tree({{{1, 2, 3}, {4, 5}}, {{1, 2}, {7, 8}}});
  EXPECT_EQ(q.tokens, (std::vector<int32_t>{1, 2, 3, 4, 7}));
  EXPECT_EQ(q.parents, (std::vector<int32_t>{-1, 0, 1, 2, 1}));
  EXPECT_EQ(q.positions, (std::vector<int32_t>{0, 1, 2, 3, 2}));
  EXPECT_THROW(pack_tree({{{}, {1}}}), Error);
  EXPECT_THROW(pack_tree({{{1}, {}}}), Error);
}

TEST(RlTree, MergedEqualsSeparateEveryFamily) {
  for (const FamilyCase& f : families()) {
    SCOPED_TRACE(f.name);
    const std::string dir = testing::tiny_dir(f.arch, "f32", 11, "_rltree", f.tweak);
    ModelConfig cfg = load_config(dir);
    if (f.lightning_block) cfg.lightning_block = f.lightning_block;
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(seed);
      const std::vector<Sample> group = random_group(5, 6, 9, cfg.vocab_size, seed);
      const Packed tree = pack_tree(group), sep = pack_separate(group);
      ASSERT_LT(tree.seq_len, separate_tokens(group));  // something is shared
      const StepRun<double> a = run<double>(cfg, dir, tree, seed), b = run<double>(cfg, dir, sep, seed);
      EXPECT_LE(std::fabs(a.loss - b.loss), 1e-10 * std::fabs(b.loss));
      EXPECT_LE(logp_rel_diff(a.logp, b.logp), 1e-10);
      EXPECT_LE(grad_rel_diff(cfg, b.grad, a.grad), 1e-10);
      const StepRun<float> af = run<float>(cfg, dir, tree, seed), bf = run<float>(cfg, dir, sep, seed);
      EXPECT_LE(logp_rel_diff(af.logp, bf.logp), 1e-5);
      EXPECT_LE(grad_rel_diff(cfg, bf.grad, af.grad), 1e-5);
      // The tree matters: the same packed rows under a causal mask see their siblings' branches.
      Packed causal = tree;
      causal.parents.clear();
      const StepRun<double> c = run<double>(cfg, dir, causal, seed);
      EXPECT_GT(logp_rel_diff(c.logp, b.logp), 1e-4);
      EXPECT_GT(grad_rel_diff(cfg, b.grad, c.grad), 1e-4);
      std::printf("%s seed %d: %lld tree rows vs %lld separate; merged vs separate: logp f64 %.2g f32 %.2g, grad "
                  "f64 %.2g f32 %.2g; causal mask instead: logp %.2g\n",
                  f.name.c_str(), int(seed), (long long)tree.seq_len, (long long)separate_tokens(group),
                  logp_rel_diff(a.logp, b.logp), logp_rel_diff(af.logp, bf.logp), grad_rel_diff(cfg, b.grad, a.grad),
                  grad_rel_diff(cfg, bf.grad, af.grad), logp_rel_diff(c.logp, b.logp));
    }
  }
}

}  // namespace
}  // namespace mmx::rl
