// Every training kernel (src/train/kernels.h) against its naive fp64 twin (src/train/ref.h) over a
// shape grid, in both instantiations (float: the training path; double: the gradient-check path),
// and every ref backward against central finite differences of the ref forward:
//   L(x) = Σ dy ⊙ f(x) for a fixed random dy, so dL/dx is exactly what the backward returns.
// Tolerances: double vs ref 1e-12 relative (same math, other summation order); float vs ref
// 2e-5·max|ref| + 1e-6 (fp32 accumulation over at most a few hundred terms: measured ≤ 3e-6);
// finite differences h = 1e-5 in fp64: truncation O(h²) ≈ 1e-10, agreement 1e-6 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/ref/f64.h"
#include "train/grad_check.h"
#include "train/kernels.h"
#include "train/loss.h"
#include "train/ref.h"
#include "train/visibility.h"

namespace mmx::train {
namespace f64 = ops::ref::f64;  // the forward oracle (shared with ops::ref)
namespace {

constexpr double kD = 1e-12, kFr = 2e-5, kFa = 1e-6, kFd = 1e-6;

// ---- linear ----

TEST(TrainKernels, Linear) {
  for (auto [n, in, out] : {std::tuple{1, 3, 5}, {7, 16, 9}, {33, 64, 48}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " in=" << in << " out=" << out);
    const V x = randn(static_cast<size_t>(n * in), 1), w = randn(static_cast<size_t>(out * in), 2), dy = randn(static_cast<size_t>(n * out), 3);
    V y(static_cast<size_t>(n * out)), yd(y.size());
    f64::linear(x.data(), w.data(), n, in, out, y.data());
    linear_fwd<double>(x.data(), w.data(), n, in, out, yd.data());
    expect_close(yd, y, kD, 0, "fwd double");
    std::vector<float> yf(y.size());
    linear_fwd<float>(to_f(x).data(), to_f(w).data(), n, in, out, yf.data());
    expect_close(to_d(yf), y, kFr, kFa, "fwd float");

    V dx(x.size()), dw(w.size()), dxd(x.size(), 0), dwd(w.size(), 0);
    ref::linear_bwd(dy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data());
    linear_bwd<double>(dy.data(), x.data(), w.data(), n, in, out, dxd.data(), dwd.data());
    expect_close(dxd, dx, kD, 0, "dx double");
    expect_close(dwd, dw, kD, 0, "dw double");
    std::vector<float> dxf(x.size(), 0), dwf(w.size(), 0);
    linear_bwd<float>(to_f(dy).data(), to_f(x).data(), to_f(w).data(), n, in, out, dxf.data(), dwf.data());
    expect_close(to_d(dxf), dx, kFr, kFa, "dx float");
    expect_close(to_d(dwf), dw, kFr, kFa, "dw float");
    if (n * in <= 200) {
      expect_close(dx, fd_grad([&](const V& xx) { V yy(y.size()); f64::linear(xx.data(), w.data(), n, in, out, yy.data()); return dot(yy, dy); }, x), kFd, 1e-9, "dx vs fd");
      expect_close(dw, fd_grad([&](const V& ww) { V yy(y.size()); f64::linear(x.data(), ww.data(), n, in, out, yy.data()); return dot(yy, dy); }, w), kFd, 1e-9, "dw vs fd");
    }
  }
}

// ---- embedding ----

TEST(TrainKernels, Embedding) {
  for (auto [vocab, d] : {std::pair{11, 6}, {40, 17}}) {
    const std::vector<int32_t> ids = {3, 0, 3, 7, 10, 3, 1, 7, 9};
    const int64_t n = int64_t(ids.size());
    const V table = randn(static_cast<size_t>(vocab * d), 4), dy = randn(static_cast<size_t>(n * d), 5);
    V out(static_cast<size_t>(n * d)), outd(out.size());
    ref::embedding_fwd(table.data(), ids.data(), n, d, out.data());
    embedding_fwd<double>(table.data(), ids.data(), n, d, outd.data());
    expect_close(outd, out, 0, 0, "fwd");
    V dt(table.size(), 0), dtd(table.size(), 0);
    ref::embedding_bwd(dy.data(), ids.data(), n, d, dt.data());
    embedding_bwd<double>(dy.data(), ids.data(), n, d, dtd.data());
    expect_close(dtd, dt, kD, 0, "bwd double");
    std::vector<float> dtf(table.size(), 0);
    embedding_bwd<float>(to_f(dy).data(), ids.data(), n, d, dtf.data());
    expect_close(to_d(dtf), dt, kFr, kFa, "bwd float");
    expect_close(dt, fd_grad([&](const V& tt) { V o(out.size()); ref::embedding_fwd(tt.data(), ids.data(), n, d, o.data()); return dot(o, dy); }, table), kFd, 1e-9, "vs fd");
  }
}

// ---- RMSNorm ----

TEST(TrainKernels, RmsNorm) {
  for (auto [n, d] : {std::pair{1, 8}, {5, 33}, {17, 128}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d);
    const V x = randn(static_cast<size_t>(n * d), 6, 2.0), w = randn(static_cast<size_t>(d), 7), dy = randn(static_cast<size_t>(n * d), 8);
    const double eps = 1e-6;
    V y(x.size()), r(static_cast<size_t>(n)), yd(x.size()), rd(static_cast<size_t>(n));
    f64::rms_norm(x.data(), w.data(), n, d, eps, y.data(), r.data());
    rms_norm_fwd<double>(x.data(), w.data(), n, d, eps, yd.data(), rd.data());
    expect_close(yd, y, kD, 0, "fwd double");
    std::vector<float> yf(x.size()), rf(static_cast<size_t>(n));
    rms_norm_fwd<float>(to_f(x).data(), to_f(w).data(), n, d, eps, yf.data(), rf.data());
    expect_close(to_d(yf), y, kFr, kFa, "fwd float");
    V dx(x.size(), 0), dw(w.size(), 0), dxd(x.size(), 0), dwd(w.size(), 0);
    ref::rms_norm_bwd(dy.data(), x.data(), w.data(), r.data(), n, d, dx.data(), dw.data());
    rms_norm_bwd<double>(dy.data(), x.data(), w.data(), r.data(), n, d, dxd.data(), dwd.data());
    expect_close(dxd, dx, kD, 0, "dx double");
    expect_close(dwd, dw, kD, 0, "dw double");
    std::vector<float> dxf(x.size(), 0), dwf(w.size(), 0);
    rms_norm_bwd<float>(to_f(dy).data(), to_f(x).data(), to_f(w).data(), rf.data(), n, d, dxf.data(), dwf.data());
    expect_close(to_d(dxf), dx, kFr, kFa, "dx float");
    expect_close(to_d(dwf), dw, kFr, kFa, "dw float");
    auto L = [&](const V& xx, const V& ww) {
      V yy(x.size()), rr(static_cast<size_t>(n));
      f64::rms_norm(xx.data(), ww.data(), n, d, eps, yy.data(), rr.data());
      return dot(yy, dy);
    };
    expect_close(dx, fd_grad([&](const V& xx) { return L(xx, w); }, x), kFd, 1e-9, "dx vs fd");
    expect_close(dw, fd_grad([&](const V& ww) { return L(x, ww); }, w), kFd, 1e-9, "dw vs fd");
  }
}

// ---- RoPE ----

TEST(TrainKernels, Rope) {
  for (auto [n, h, hd, rot] : {std::tuple{3, 2, 8, 8}, {5, 3, 16, 6}, {4, 1, 12, 0}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " heads=" << h << " hd=" << hd << " rot=" << rot);
    const std::vector<int32_t> pos = {0, 7, 999, 3, 42};
    const V x = randn(static_cast<size_t>(n * h * hd), 9), dy = randn(x.size(), 10);
    V y = x, yd = x;
    f64::rope_neox(y.data(), pos.data(), n, h, hd, rot, 1e4, false);
    rope<double>(yd.data(), pos.data(), n, h, hd, rot, 1e4, false);
    expect_close(yd, y, kD, 0, "fwd double");
    std::vector<float> yf = to_f(x);
    rope<float>(yf.data(), pos.data(), n, h, hd, rot, 1e4, false);
    expect_close(to_d(yf), y, kFr, kFa, "fwd float");
    V dx = dy, dxd = dy;  // the backward is the inverse rotation of dy
    f64::rope_neox(dx.data(), pos.data(), n, h, hd, rot, 1e4, true);
    rope<double>(dxd.data(), pos.data(), n, h, hd, rot, 1e4, true);
    expect_close(dxd, dx, kD, 0, "bwd double");
    expect_close(dx, fd_grad([&](const V& xx) { V yy = xx; f64::rope_neox(yy.data(), pos.data(), n, h, hd, rot, 1e4, false); return dot(yy, dy); }, x), kFd, 1e-9, "vs fd");
  }
}

// ---- attention with a visibility predicate ----

// A tree mask over t rows: row i's parent is parent[i] (−1 = root); i sees its ancestors and itself.
std::vector<uint8_t> tree_mask(const std::vector<int>& parent) {
  const size_t t = parent.size();
  std::vector<uint8_t> m(t * t, 0);
  for (size_t i = 0; i < t; ++i)
    for (int j = int(i); j >= 0; j = parent[static_cast<size_t>(j)]) m[i * t + static_cast<size_t>(j)] = 1;
  return m;
}

TEST(TrainKernels, Attention) {
  struct Case {
    int t, h, kh, hd;
    std::vector<uint8_t> vis;  // empty = causal
    const char* name;
  };
  std::vector<uint8_t> rnd(7 * 7);
  std::mt19937 rng(3);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) rnd[static_cast<size_t>(i * 7 + j)] = i == j || (rng() % 3 == 0);
  const std::vector<Case> cases = {
      {1, 2, 1, 4, {}, "one token"},
      {5, 4, 2, 8, {}, "causal GQA"},
      {9, 6, 3, 5, {}, "causal, odd head_dim"},
      // two branches sharing the prefix 0-1-2: 3,4 on one, 5,6,7 on the other
      {8, 4, 2, 8, tree_mask({-1, 0, 1, 2, 3, 2, 5, 6}), "tree"},
      {7, 2, 2, 4, rnd, "random visibility (self always)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t t = c.t;
    const uint8_t* vis = c.vis.empty() ? nullptr : c.vis.data();
    const V q = randn(static_cast<size_t>(t * c.h * c.hd), 11), k = randn(static_cast<size_t>(t * c.kh * c.hd), 12),
            v = randn(static_cast<size_t>(t * c.kh * c.hd), 13), dout = randn(q.size(), 14);
    const double scale = 1.0 / std::sqrt(double(c.hd));
    V o(q.size()), p(static_cast<size_t>(c.h * t * t)), od(q.size()), pd(p.size());
    f64::attention(q.data(), k.data(), v.data(), vis, t, t, c.h, c.kh, c.hd, scale, o.data(), p.data());
    attention_fwd<double>(q.data(), k.data(), v.data(), vis, t, c.h, c.kh, c.hd, scale, od.data(), pd.data());
    expect_close(od, o, kD, 0, "fwd double");
    std::vector<float> of(q.size()), pf(p.size());
    attention_fwd<float>(to_f(q).data(), to_f(k).data(), to_f(v).data(), vis, t, c.h, c.kh, c.hd, scale, of.data(),
                         pf.data());
    expect_close(to_d(of), o, kFr, kFa, "fwd float");
    V dq(q.size(), 0), dk(k.size(), 0), dv(v.size(), 0), dqd = dq, dkd = dk, dvd = dv;
    ref::attention_bwd(dout.data(), q.data(), k.data(), v.data(), p.data(), t, c.h, c.kh, c.hd, scale, dq.data(),
                       dk.data(), dv.data());
    attention_bwd<double>(dout.data(), q.data(), k.data(), v.data(), p.data(), t, c.h, c.kh, c.hd, scale,
                          dqd.data(), dkd.data(), dvd.data());
    expect_close(dqd, dq, kD, 0, "dq double");
    expect_close(dkd, dk, kD, 0, "dk double");
    expect_close(dvd, dv, kD, 0, "dv double");
    std::vector<float> dqf(q.size(), 0), dkf(k.size(), 0), dvf(v.size(), 0);
    attention_bwd<float>(to_f(dout).data(), to_f(q).data(), to_f(k).data(), to_f(v).data(), pf.data(), t, c.h, c.kh,
                         c.hd, scale, dqf.data(), dkf.data(), dvf.data());
    expect_close(to_d(dqf), dq, kFr, kFa, "dq float");
    expect_close(to_d(dkf), dk, kFr, kFa, "dk float");
    expect_close(to_d(dvf), dv, kFr, kFa, "dv float");
    auto L = [&](const V& qq, const V& kk, const V& vv) {
      V oo(q.size()), pp(p.size());
      f64::attention(qq.data(), kk.data(), vv.data(), vis, t, t, c.h, c.kh, c.hd, scale, oo.data(), pp.data());
      return dot(oo, dout);
    };
    expect_close(dq, fd_grad([&](const V& x) { return L(x, k, v); }, q), kFd, 1e-9, "dq vs fd");
    expect_close(dk, fd_grad([&](const V& x) { return L(q, x, v); }, k), kFd, 1e-9, "dk vs fd");
    expect_close(dv, fd_grad([&](const V& x) { return L(q, k, x); }, v), kFd, 1e-9, "dv vs fd");
    if (vis) {  // nothing invisible has probability mass
      for (int h = 0; h < c.h; ++h)
        for (int64_t i = 0; i < t; ++i)
          for (int64_t j = 0; j < t; ++j) {
            if (!vis[i * t + j]) EXPECT_EQ(p[static_cast<size_t>((h * t + i) * t + j)], 0.0);
          }
    }
  }
}

// The interval form (attention_iv_*: tiles over the union of the rows' visible intervals, the
// probabilities recomputed from the row log-sum-exp) against the same fp64 oracle: causal, dense
// random masks and prefix trees, over shapes that cross several 32-row tiles; the tree given as
// parent links gives bitwise the dense mask's results (the same intervals).
TEST(TrainKernels, AttentionIntervals) {
  struct Case {
    int t, h, kh, hd;
    int kind;  // 0 causal, 1 random dense, 2 random tree
    uint64_t seed;
  };
  const std::vector<Case> cases = {{1, 2, 1, 4, 0, 1},  {9, 4, 2, 8, 0, 2},  {70, 4, 2, 8, 0, 3}, {7, 2, 2, 4, 1, 4},
                                   {45, 2, 1, 5, 1, 5}, {8, 4, 2, 8, 2, 6},  {75, 4, 2, 8, 2, 7}, {130, 2, 1, 4, 2, 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "t=" << c.t << " kind=" << c.kind);
    const int64_t t = c.t;
    std::mt19937_64 rng(c.seed);
    std::vector<uint8_t> dense;
    std::vector<int32_t> parents;
    if (c.kind == 1) {
      dense.resize(size_t(t * t));
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < t; ++j) dense[size_t(i * t + j)] = i == j || (rng() % 3 == 0);
    } else if (c.kind == 2) {
      for (int64_t i = 0; i < t; ++i) {
        const uint64_t r = rng() % 10;
        parents.push_back(r < 7 || i == 0 ? int32_t(i) - 1 : r < 9 ? int32_t(rng() % uint64_t(i)) : -1);
      }
      dense = tree_to_dense(parents.data(), 1, t);
    }
    const uint8_t* vis = dense.empty() ? nullptr : dense.data();
    const V q = randn(static_cast<size_t>(t * c.h * c.hd), 31), k = randn(static_cast<size_t>(t * c.kh * c.hd), 32),
            v = randn(static_cast<size_t>(t * c.kh * c.hd), 33), dout = randn(q.size(), 34);
    const double scale = 1.0 / std::sqrt(double(c.hd));
    V o(q.size()), p(static_cast<size_t>(c.h * t * t));
    f64::attention(q.data(), k.data(), v.data(), vis, t, t, c.h, c.kh, c.hd, scale, o.data(), p.data());
    V dq(q.size(), 0), dk(k.size(), 0), dv(v.size(), 0);
    ref::attention_bwd(dout.data(), q.data(), k.data(), v.data(), p.data(), t, c.h, c.kh, c.hd, scale, dq.data(),
                       dk.data(), dv.data());
    const SeqVis sv = vis ? SeqVis(vis) : SeqVis();
    V od(q.size()), lse(static_cast<size_t>(c.h * t)), dqd(q.size(), 0), dkd(k.size(), 0), dvd(v.size(), 0);
    attention_iv_fwd<double>(q.data(), k.data(), v.data(), sv, t, c.h, c.kh, c.hd, scale, od.data(), lse.data());
    attention_iv_bwd<double>(dout.data(), q.data(), k.data(), v.data(), sv, lse.data(), t, c.h, c.kh, c.hd, scale,
                             dqd.data(), dkd.data(), dvd.data());
    expect_close(od, o, kD, 0, "iv fwd double");
    expect_close(dqd, dq, kD, 0, "iv dq double");
    expect_close(dkd, dk, kD, 0, "iv dk double");
    expect_close(dvd, dv, kD, 0, "iv dv double");
    std::vector<float> of(q.size()), lf(lse.size()), dqf(q.size(), 0), dkf(k.size(), 0), dvf(v.size(), 0);
    attention_iv_fwd<float>(to_f(q).data(), to_f(k).data(), to_f(v).data(), sv, t, c.h, c.kh, c.hd, scale, of.data(),
                            lf.data());
    attention_iv_bwd<float>(to_f(dout).data(), to_f(q).data(), to_f(k).data(), to_f(v).data(), sv, lf.data(), t, c.h,
                            c.kh, c.hd, scale, dqf.data(), dkf.data(), dvf.data());
    expect_close(to_d(of), o, kFr, kFa, "iv fwd float");
    expect_close(to_d(dqf), dq, kFr, kFa, "iv dq float");
    expect_close(to_d(dkf), dk, kFr, kFa, "iv dk float");
    expect_close(to_d(dvf), dv, kFr, kFa, "iv dv float");
    if (c.kind == 2) {  // parent links (with and without the run index): bitwise the dense mask's
      std::vector<int32_t> runs(parents.size());
      tree_runs(parents.data(), t, runs.data());
      for (const SeqVis tv : {SeqVis::tree(parents.data()), SeqVis::tree(parents.data(), runs.data())}) {
        V ot(q.size()), lt(lse.size()), dqt(q.size(), 0), dkt(k.size(), 0), dvt(v.size(), 0);
        attention_iv_fwd<double>(q.data(), k.data(), v.data(), tv, t, c.h, c.kh, c.hd, scale, ot.data(), lt.data());
        attention_iv_bwd<double>(dout.data(), q.data(), k.data(), v.data(), tv, lt.data(), t, c.h, c.kh, c.hd, scale,
                                 dqt.data(), dkt.data(), dvt.data());
        EXPECT_EQ(ot, od);
        EXPECT_EQ(dqt, dqd);
        EXPECT_EQ(dkt, dkd);
        EXPECT_EQ(dvt, dvd);
      }
    }
  }
}

// SeqVis::intervals: ascending, disjoint, and exactly the row's visible keys, for every form.
TEST(TrainKernels, VisibilityIntervalsAreTheRows) {
  std::mt19937_64 rng(9);
  const int64_t t = 90;
  std::vector<int32_t> parents;
  for (int64_t i = 0; i < t; ++i) parents.push_back(i == 0 || rng() % 5 ? int32_t(i) - 1 : int32_t(rng() % uint64_t(i)));
  std::vector<int32_t> runs(static_cast<size_t>(t));
  tree_runs(parents.data(), t, runs.data());
  const std::vector<uint8_t> dense = tree_to_dense(parents.data(), 1, t);
  std::vector<VisInterval> iv;
  std::vector<uint8_t> buf(static_cast<size_t>(t));
  for (const SeqVis v : {SeqVis(), SeqVis(dense.data()), SeqVis::tree(parents.data()), SeqVis::tree(parents.data(), runs.data())})
    for (int64_t i = 0; i < t; ++i) {
      v.intervals(i, t, iv);
      const uint8_t* row = v.row(i, t, buf.data());
      std::vector<uint8_t> got(size_t(t), 0);
      for (size_t a = 0; a < iv.size(); ++a) {
        ASSERT_LE(iv[a].lo, iv[a].hi);
        if (a > 0) {
          ASSERT_GT(iv[a].lo, iv[a - 1].hi + 1);
        }
        for (int64_t j = iv[a].lo; j <= iv[a].hi; ++j) got[size_t(j)] = 1;
      }
      for (int64_t j = 0; j < t; ++j) ASSERT_EQ(got[size_t(j)], row ? row[j] : uint8_t(j <= i)) << i << "," << j;
    }
}

// A tree-masked branch equals the branch run alone as its own sequence (the merged-tree rule the
// RL packer relies on): rows 0,1,2,5,6,7 of the tree case above are the sequence 0,1,2,5,6,7.
TEST(TrainKernels, AttentionTreeBranchEqualsSeparateSequence) {
  const int t = 8, h = 2, kh = 1, hd = 4;
  const auto vis = tree_mask({-1, 0, 1, 2, 3, 2, 5, 6});
  const V q = randn(static_cast<size_t>(t * h * hd), 21), k = randn(static_cast<size_t>(t * kh * hd), 22), v = randn(static_cast<size_t>(t * kh * hd), 23);
  V o(q.size()), p(static_cast<size_t>(h * t * t));
  f64::attention(q.data(), k.data(), v.data(), vis.data(), t, t, h, kh, hd, 0.5, o.data(), p.data());
  const std::vector<int> branch = {0, 1, 2, 5, 6, 7};
  const int64_t tb = int64_t(branch.size());
  V qb, kb, vb;
  for (int r : branch) {
    qb.insert(qb.end(), q.begin() + r * h * hd, q.begin() + (r + 1) * h * hd);
    kb.insert(kb.end(), k.begin() + r * kh * hd, k.begin() + (r + 1) * kh * hd);
    vb.insert(vb.end(), v.begin() + r * kh * hd, v.begin() + (r + 1) * kh * hd);
  }
  V ob(qb.size()), pb(static_cast<size_t>(h * tb * tb));
  f64::attention(qb.data(), kb.data(), vb.data(), nullptr, tb, tb, h, kh, hd, 0.5, ob.data(), pb.data());
  V sel;
  for (int r : branch) sel.insert(sel.end(), o.begin() + r * h * hd, o.begin() + (r + 1) * h * hd);
  expect_close(sel, ob, 1e-14, 0, "branch rows");
}

// ---- SwiGLU ----

TEST(TrainKernels, GluSilu) {
  const int64_t n = 50;
  const V g = randn(static_cast<size_t>(n), 31, 3.0), u = randn(static_cast<size_t>(n), 32), da = randn(static_cast<size_t>(n), 33);
  V a(static_cast<size_t>(n)), ad(static_cast<size_t>(n));
  f64::glu_silu(g.data(), u.data(), n, a.data());
  glu_silu_fwd<double>(g.data(), u.data(), n, ad.data());
  expect_close(ad, a, kD, 0, "fwd double");
  V dg(static_cast<size_t>(n), 0), du = dg, dgd = dg, dud = dg;
  ref::glu_silu_bwd(da.data(), g.data(), u.data(), n, dg.data(), du.data());
  glu_silu_bwd<double>(da.data(), g.data(), u.data(), n, dgd.data(), dud.data());
  expect_close(dgd, dg, kD, 0, "dg double");
  expect_close(dud, du, kD, 0, "du double");
  std::vector<float> dgf(static_cast<size_t>(n), 0), duf(static_cast<size_t>(n), 0);
  glu_silu_bwd<float>(to_f(da).data(), to_f(g).data(), to_f(u).data(), n, dgf.data(), duf.data());
  expect_close(to_d(dgf), dg, kFr, kFa, "dg float");
  auto L = [&](const V& gg, const V& uu) { V aa(static_cast<size_t>(n)); f64::glu_silu(gg.data(), uu.data(), n, aa.data()); return dot(aa, da); };
  expect_close(dg, fd_grad([&](const V& x) { return L(x, u); }, g), kFd, 1e-9, "dg vs fd");
  expect_close(du, fd_grad([&](const V& x) { return L(g, x); }, u), kFd, 1e-9, "du vs fd");
}

// ---- sigmoid router ----

TEST(TrainKernels, RouterSigmoid) {
  for (auto [n, E, k] : {std::tuple{4, 8, 2}, {3, 16, 4}, {2, 5, 5}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " E=" << E << " k=" << k);
    const V logits = randn(static_cast<size_t>(n * E), 41, 2.0), bias = randn(static_cast<size_t>(E), 42, 0.3), dw = randn(static_cast<size_t>(n * k), 43);
    std::vector<int32_t> ids(static_cast<size_t>(n * k)), idsd = ids, idsf = ids;
    V w(static_cast<size_t>(n * k)), p(static_cast<size_t>(n * E)), wd = w, pd = p;
    f64::route_sigmoid(logits.data(), bias.data(), n, E, k, ids.data(), w.data(), p.data());
    router_sigmoid_fwd<double>(logits.data(), bias.data(), n, E, k, idsd.data(), wd.data(), pd.data());
    EXPECT_EQ(idsd, ids);
    expect_close(wd, w, kD, 0, "w double");
    std::vector<float> wf(w.size()), pf(p.size());
    router_sigmoid_fwd<float>(to_f(logits).data(), to_f(bias).data(), n, E, k, idsf.data(), wf.data(), pf.data());
    EXPECT_EQ(idsf, ids);
    expect_close(to_d(wf), w, kFr, kFa, "w float");
    V dl(p.size(), 0), dld = dl;
    ref::router_sigmoid_bwd(dw.data(), ids.data(), w.data(), p.data(), n, E, k, dl.data());
    router_sigmoid_bwd<double>(dw.data(), ids.data(), w.data(), p.data(), n, E, k, dld.data());
    expect_close(dld, dl, kD, 0, "bwd double");
    std::vector<float> dlf(p.size(), 0);
    router_sigmoid_bwd<float>(to_f(dw).data(), ids.data(), wf.data(), pf.data(), n, E, k, dlf.data());
    expect_close(to_d(dlf), dl, kFr, kFa, "bwd float");
    // The selection is piecewise constant: with h = 1e-6 no choice flips on these margins.
    expect_close(dl, fd_grad([&](const V& x) {
      std::vector<int32_t> ii(ids.size());
      V ww(w.size()), pp(p.size());
      f64::route_sigmoid(x.data(), bias.data(), n, E, k, ii.data(), ww.data(), pp.data());
      EXPECT_EQ(ii, ids) << "selection flipped under the finite difference";
      return dot(ww, dw);
    }, logits, 1e-6), kFd, 1e-9, "vs fd");
  }
}

// Ties in the biased score go to the lower expert id, as ops::moe_route_sigmoid.
TEST(TrainKernels, RouterSigmoidTieBreak) {
  const V logits = {0.5, 0.5, 0.5, 0.5};
  std::vector<int32_t> ids(2);
  V w(2), p(4);
  router_sigmoid_fwd<double>(logits.data(), nullptr, 1, 4, 2, ids.data(), w.data(), p.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  f64::route_sigmoid(logits.data(), nullptr, 1, 4, 2, ids.data(), w.data(), p.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
}

// ---- cross-entropy ----

TEST(TrainKernels, CrossEntropy) {
  for (auto [n, vocab] : {std::pair{3, 7}, {5, 300}}) {
    const V logits = randn(static_cast<size_t>(n * vocab), 51, 3.0);
    std::vector<int32_t> tg(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) tg[static_cast<size_t>(i)] = (i * 37 + 5) % vocab;
    tg[1] = -1;  // not scored
    const double scale = 0.25;
    V dl(logits.size()), dld(logits.size());
    const double loss = ref::cross_entropy(logits.data(), tg.data(), n, vocab, scale, dl.data());
    const double lossd = cross_entropy<double>(logits.data(), tg.data(), n, vocab, scale, dld.data());
    EXPECT_NEAR(lossd, loss, 1e-12 * std::fabs(loss));
    expect_close(dld, dl, kD, 0, "grad double");
    std::vector<float> dlf(logits.size());
    const double lossf = cross_entropy<float>(to_f(logits).data(), tg.data(), n, vocab, scale, dlf.data());
    EXPECT_NEAR(lossf, loss, 1e-5 * std::fabs(loss));
    expect_close(to_d(dlf), dl, kFr, 1e-8, "grad float");
    for (int64_t i = 0; i < vocab; ++i) EXPECT_EQ(dl[static_cast<size_t>(vocab + i)], 0.0) << "ignored row has a gradient";
    expect_close(dl, fd_grad([&](const V& x) { return scale * ref::cross_entropy(x.data(), tg.data(), n, vocab, 0, nullptr); }, logits), kFd, 1e-9, "vs fd");
    // Hand-derived: uniform logits -> loss log(V) per scored row.
    V zero(logits.size(), 0.0);
    EXPECT_NEAR(ref::cross_entropy(zero.data(), tg.data(), n, vocab, 0, nullptr), (n - 1) * std::log(double(vocab)), 1e-12);
  }
}

// The weighted log-likelihood (train/loss.h): Σ w_t · CE_t and w_t · dCE_t row by row against
// the ref cross-entropy of each row alone; log p(target) = −CE_t.
// The scored-terms loss step (loss.h: a row may carry several (target, weight) terms, another
// none): log p equals an independent log-softmax, and d(Σ g_e log p_e)/d logits equals central
// finite differences, in double; float within the float tolerance. A row without a term gets 0.
TEST(TrainKernels, ScoredTerms) {
  const int64_t n = 5, vocab = 7;
  const V logits = randn(static_cast<size_t>(n * vocab), 41);
  const std::vector<ScoredTerm> terms = {{0, 3}, {2, 1}, {2, 6}, {2, 1}, {4, 0}, {1, 5}};  // row 3: none
  const V g = {0.7, -1.3, 0.4, 2.0, -0.5, 1.1};
  auto logp_of = [&](const V& l) {
    V lp;
    for (const ScoredTerm& t : terms) {
      double mx = -1e300, sum = 0;
      for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, l[size_t(t.row * vocab + v)]);
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(l[size_t(t.row * vocab + v)] - mx);
      lp.push_back(l[size_t(t.row * vocab + t.target)] - mx - std::log(sum));
    }
    return lp;
  };
  V lp(terms.size());
  scored_logp<double>(logits.data(), n, vocab, terms.data(), int64_t(terms.size()), lp.data());
  expect_close(lp, logp_of(logits), kD, 0, "logp");
  V d(logits.size(), 99.0);
  scored_backward<double>(logits.data(), n, vocab, terms.data(), int64_t(terms.size()), g.data(), d.data());
  const V fd = fd_grad([&](const V& l) { return dot(logp_of(l), g); }, logits);
  expect_close(d, fd, kFd, 1e-9, "dlogits vs fd");
  for (int64_t v = 0; v < vocab; ++v) EXPECT_EQ(d[size_t(3 * vocab + v)], 0.0);
  std::vector<float> df(logits.size());
  const std::vector<float> lf = to_f(logits);
  scored_backward<float>(lf.data(), n, vocab, terms.data(), int64_t(terms.size()), g.data(), df.data());
  expect_close(to_d(df), fd, kFr, kFa, "dlogits float");
  std::vector<float> alias = lf;  // dlogits written over the logits
  scored_backward<float>(alias.data(), n, vocab, terms.data(), int64_t(terms.size()), g.data(), alias.data());
  EXPECT_EQ(alias, df);
  EXPECT_THROW(scored_logp<double>(logits.data(), n, vocab, std::vector<ScoredTerm>{{n, 0}}.data(), 1, lp.data()),
               Error);
}

TEST(TrainKernels, WeightedTokenNll) {
  const int n = 5, vocab = 40;
  const V logits = randn(static_cast<size_t>(n * vocab), 52, 3.0);
  std::vector<int32_t> tg = {3, -1, 39, 0, 17};
  const std::vector<double> w = {0.5, 2.0, -1.25, 0.0, 3.0};
  const double scale = 0.25;
  V dld(logits.size());
  std::vector<double> logp(static_cast<size_t>(n));
  const double lossd = token_nll<double>(logits.data(), tg.data(), w.data(), n, vocab, scale, dld.data(), logp.data());
  std::vector<float> dlf(logits.size());
  const double lossf = token_nll<float>(to_f(logits).data(), tg.data(), w.data(), n, vocab, scale, dlf.data());
  double want = 0;
  V dl(logits.size());
  for (int t = 0; t < n; ++t) {
    const double ce = ref::cross_entropy(logits.data() + t * vocab, tg.data() + t, 1, vocab, scale * w[size_t(t)],
                                         dl.data() + t * vocab);
    want += w[size_t(t)] * ce;
    EXPECT_NEAR(logp[size_t(t)], -ce, 1e-12 * (1 + ce)) << t;
  }
  EXPECT_NEAR(lossd, want, 1e-12 * std::fabs(want));
  EXPECT_NEAR(lossf, want, 1e-5 * std::fabs(want));
  expect_close(dld, dl, kD, 0, "grad double");
  expect_close(to_d(dlf), dl, kFr, 1e-8, "grad float");
  // in place over the logits, as the graphs use it
  V inplace = logits;
  EXPECT_EQ(token_nll<double>(inplace.data(), tg.data(), w.data(), n, vocab, scale, inplace.data()), lossd);
  EXPECT_EQ(0, std::memcmp(inplace.data(), dld.data(), dld.size() * sizeof(double)));
}

// ---- thread-count invariance ----

TEST(TrainKernels, ThreadCountInvariant) {
  const int n = 40, in = 96, out = 80, t = 24, h = 4, kh = 2, hd = 16;
  const std::vector<float> x = to_f(randn(static_cast<size_t>(n * in), 61)), w = to_f(randn(static_cast<size_t>(out * in), 62)),
                           dy = to_f(randn(static_cast<size_t>(n * out), 63)), q = to_f(randn(static_cast<size_t>(t * h * hd), 64)),
                           k = to_f(randn(static_cast<size_t>(t * kh * hd), 65)), v = to_f(randn(static_cast<size_t>(t * kh * hd), 66));
  auto run = [&](int threads) {
    set_n_threads(threads);
    std::vector<float> dx(x.size(), 0), dw(w.size(), 0), o(q.size()), p(static_cast<size_t>(h * t * t)), dq(q.size(), 0),
        dk(k.size(), 0), dv(v.size(), 0), y(static_cast<size_t>(n * out)), r(static_cast<size_t>(n)), ndx(x.size(), 0), ndw(static_cast<size_t>(in), 0);
    linear_fwd<float>(x.data(), w.data(), n, in, out, y.data());
    linear_bwd<float>(dy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data());
    attention_fwd<float>(q.data(), k.data(), v.data(), nullptr, t, h, kh, hd, 0.25, o.data(), p.data());
    attention_bwd<float>(o.data(), q.data(), k.data(), v.data(), p.data(), t, h, kh, hd, 0.25, dq.data(), dk.data(),
                         dv.data());
    rms_norm_fwd<float>(x.data(), w.data(), n, in, 1e-6, dx.data(), r.data());
    rms_norm_bwd<float>(x.data(), x.data(), w.data(), r.data(), n, in, ndx.data(), ndw.data());
    std::vector<float> all;
    for (auto* vv : {&dx, &dw, &o, &dq, &dk, &dv, &y, &ndx, &ndw}) all.insert(all.end(), vv->begin(), vv->end());
    return all;
  };
  const auto one = run(1), two = run(2);
  set_n_threads(0);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << "results depend on the thread count";
}

}  // namespace
}  // namespace mmx::train
