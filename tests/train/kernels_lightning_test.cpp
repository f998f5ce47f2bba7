// The Text-01 / M1 training kernels (src/train/kernels_lightning.h) against their naive fp64
// twins (ref_lightning.h) over a shape grid, the refs' backward against central finite
// differences, and the one-block lightning form against the token-by-token recurrence of
// spec §3.5.3 (S ← λS + kᵀ⊗v, o = q·S), written here independently. Tolerances as kernels_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/ref/f64.h"
#include "train/grad_check.h"
#include "train/kernels_lightning.h"
#include "train/ref_lightning.h"

namespace mmx::train {
namespace f64 = ops::ref::f64;  // the forward oracle (shared with ops::ref)
namespace {

constexpr double kD = 1e-12, kFr = 2e-5, kFa = 1e-6, kFd = 1e-6;

// The recurrence, causal, positions 0..t-1: qkv [t, H, 3, hd] -> out [t, H, hd].
V recurrence(const V& qkv, const std::vector<double>& slopes, int64_t t, int H, int hd) {
  V out(static_cast<size_t>(t * H * hd));
  for (int h = 0; h < H; ++h) {
    V S(static_cast<size_t>(hd * hd), 0.0);
    const double lam = std::exp(-slopes[size_t(h)]);
    for (int64_t i = 0; i < t; ++i) {
      const double* q = &qkv[size_t(((i * H + h) * 3 + 0) * hd)];
      const double* k = q + hd;
      const double* v = q + 2 * hd;
      for (int a = 0; a < hd; ++a)
        for (int b = 0; b < hd; ++b) S[size_t(a * hd + b)] = lam * S[size_t(a * hd + b)] + k[a] * v[b];
      for (int b = 0; b < hd; ++b) {
        double o = 0;
        for (int a = 0; a < hd; ++a) o += q[a] * S[size_t(a * hd + b)];
        out[size_t((i * H + h) * hd + b)] = o;
      }
    }
  }
  return out;
}

TEST(TrainKernelsLightning, Lightning) {
  for (auto [t, H, hd] : {std::tuple{1, 2, 4}, {7, 2, 8}, {20, 4, 6}}) {
    SCOPED_TRACE(testing::Message() << "t=" << t << " heads=" << H << " hd=" << hd);
    const V qkv = randn(static_cast<size_t>(t * H * 3 * hd), 1, 0.5), dout = randn(static_cast<size_t>(t * H * hd), 2);
    std::vector<double> slopes;
    for (int h = 0; h < H; ++h) slopes.push_back(std::exp2(-8.0 * (h + 1) / H));  // spec §3.5 slopes
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (int i = 0; i < t; ++i) pos[size_t(i)] = i;
    V o(dout.size()), a(static_cast<size_t>(H * t * t)), od = o, ad = a;
    ref::lightning_fwd(qkv.data(), slopes.data(), pos.data(), nullptr, t, H, hd, o.data(), a.data());
    expect_close(o, recurrence(qkv, slopes, t, H, hd), 1e-12, 1e-14, "one block == recurrence");
    lightning_fwd<double>(qkv.data(), slopes.data(), pos.data(), nullptr, t, H, hd, od.data(), ad.data());
    expect_close(od, o, kD, 0, "fwd double");
    std::vector<float> of(o.size()), af(a.size());
    lightning_fwd<float>(to_f(qkv).data(), slopes.data(), pos.data(), nullptr, t, H, hd, of.data(), af.data());
    expect_close(to_d(of), o, kFr, kFa, "fwd float");
    V dq(qkv.size(), 0), dqd = dq;
    ref::lightning_bwd(dout.data(), qkv.data(), slopes.data(), pos.data(), nullptr, a.data(), t, H, hd, dq.data());
    lightning_bwd<double>(dout.data(), qkv.data(), slopes.data(), pos.data(), nullptr, a.data(), t, H, hd, dqd.data());
    expect_close(dqd, dq, kD, 0, "bwd double");
    std::vector<float> dqf(qkv.size(), 0);
    lightning_bwd<float>(to_f(dout).data(), to_f(qkv).data(), slopes.data(), pos.data(), nullptr, af.data(), t, H, hd,
                         dqf.data());
    expect_close(to_d(dqf), dq, kFr, kFa, "bwd float");
    expect_close(dq, fd_grad([&](const V& x) {
      V oo(o.size()), aa(a.size());
      ref::lightning_fwd(x.data(), slopes.data(), pos.data(), nullptr, t, H, hd, oo.data(), aa.data());
      return dot(oo, dout);
    }, qkv), kFd, 1e-9, "vs fd");
  }
}

// Blockwise through the decayed state == the recurrence (forward) and == the one-block form's
// backward, over blocks that divide t, do not, exceed it, and are single tokens; the blockwise
// backward also against central finite differences of its own forward.
TEST(TrainKernelsLightning, BlockwiseThroughTheState) {
  for (auto [t, H, hd, B] : {std::tuple{1, 1, 4, 4}, {9, 2, 4, 1}, {16, 2, 8, 4}, {23, 3, 6, 5}, {20, 2, 4, 64},
                             {70, 2, 8, 16}}) {
    SCOPED_TRACE(testing::Message() << "t=" << t << " heads=" << H << " hd=" << hd << " block=" << B);
    const V qkv = randn(static_cast<size_t>(t * H * 3 * hd), 11, 0.5), dout = randn(static_cast<size_t>(t * H * hd), 12);
    std::vector<double> slopes;
    for (int h = 0; h < H; ++h) slopes.push_back(std::exp2(-8.0 * (h + 1) / H) + 0.02 * h);
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (int i = 0; i < t; ++i) pos[size_t(i)] = i;
    const int64_t nb = lightning_n_blocks(t, B);
    V o(dout.size()), st(static_cast<size_t>(H * nb * hd * hd));
    lightning_block_fwd<double>(qkv.data(), slopes.data(), t, H, hd, B, o.data(), st.data());
    expect_close(o, recurrence(qkv, slopes, t, H, hd), 1e-12, 1e-14, "blockwise fwd == recurrence");
    V o1(o.size()), a(static_cast<size_t>(H * t * t)), dq1(qkv.size(), 0), dq(qkv.size(), 0);
    ref::lightning_fwd(qkv.data(), slopes.data(), pos.data(), nullptr, t, H, hd, o1.data(), a.data());
    ref::lightning_bwd(dout.data(), qkv.data(), slopes.data(), pos.data(), nullptr, a.data(), t, H, hd, dq1.data());
    lightning_block_bwd<double>(dout.data(), qkv.data(), slopes.data(), st.data(), t, H, hd, B, dq.data());
    expect_close(dq, dq1, 1e-12, 1e-14, "blockwise bwd == one-block ref bwd");
    if (t <= 23)
      expect_close(dq, fd_grad([&](const V& x) {
        V oo(o.size()), ss(st.size());
        lightning_block_fwd<double>(x.data(), slopes.data(), t, H, hd, B, oo.data(), ss.data());
        return dot(oo, dout);
      }, qkv), kFd, 1e-9, "blockwise vs fd");
    std::vector<float> of(o.size()), sf(st.size()), dqf(qkv.size(), 0);
    lightning_block_fwd<float>(to_f(qkv).data(), slopes.data(), t, H, hd, B, of.data(), sf.data());
    expect_close(to_d(of), o, kFr, kFa, "blockwise fwd float");
    lightning_block_bwd<float>(to_f(dout).data(), to_f(qkv).data(), slopes.data(), sf.data(), t, H, hd, B, dqf.data());
    expect_close(to_d(dqf), dq, kFr, kFa, "blockwise bwd float");
  }
}

// A tree branch (mask + depth positions) equals the branch alone.
TEST(TrainKernelsLightning, TreeBranchEqualsSeparateSequence) {
  const int t = 6, H = 2, hd = 4;
  const std::vector<int> parent = {-1, 0, 1, 2, 1, 4};  // prefix 0-1, branches 2-3 and 4-5
  std::vector<uint8_t> vis(t * t, 0);
  std::vector<int32_t> pos = {0, 1, 2, 3, 2, 3};
  for (int i = 0; i < t; ++i)
    for (int j = i; j >= 0; j = parent[size_t(j)]) vis[size_t(i * t + j)] = 1;
  const V qkv = randn(static_cast<size_t>(t * H * 3 * hd), 5);
  const std::vector<double> slopes = {0.3, 0.05};
  V o(static_cast<size_t>(t * H * hd)), a(static_cast<size_t>(H * t * t));
  ref::lightning_fwd(qkv.data(), slopes.data(), pos.data(), vis.data(), t, H, hd, o.data(), a.data());
  const std::vector<int> br = {0, 1, 4, 5};
  V qb, want;
  for (int r : br) qb.insert(qb.end(), qkv.begin() + r * H * 3 * hd, qkv.begin() + (r + 1) * H * 3 * hd);
  const V alone = recurrence(qb, slopes, 4, H, hd);
  for (int r : br) want.insert(want.end(), o.begin() + r * H * hd, o.begin() + (r + 1) * H * hd);
  expect_close(want, alone, 1e-12, 1e-14, "branch");
  V of(o.size()), af(a.size());
  lightning_fwd<double>(qkv.data(), slopes.data(), pos.data(), vis.data(), t, H, hd, of.data(), af.data());
  expect_close(of, o, kD, 0, "masked fwd double");
  const V dout = randn(o.size(), 6);
  V dq(qkv.size(), 0), dqd = dq;
  ref::lightning_bwd(dout.data(), qkv.data(), slopes.data(), pos.data(), vis.data(), a.data(), t, H, hd, dq.data());
  lightning_bwd<double>(dout.data(), qkv.data(), slopes.data(), pos.data(), vis.data(), a.data(), t, H, hd, dqd.data());
  expect_close(dqd, dq, kD, 0, "masked bwd double");
  expect_close(dq, fd_grad([&](const V& x) {
    V oo(o.size()), aa(a.size());
    ref::lightning_fwd(x.data(), slopes.data(), pos.data(), vis.data(), t, H, hd, oo.data(), aa.data());
    return dot(oo, dout);
  }, qkv), kFd, 1e-9, "masked vs fd");
}

TEST(TrainKernelsLightning, SiluAndSigmoidGate) {
  const int64_t n = 40;
  const V x = randn(static_cast<size_t>(n), 7, 3.0), g = randn(static_cast<size_t>(n), 8, 3.0),
          dy = randn(static_cast<size_t>(n), 9);
  V y(static_cast<size_t>(n)), yd = y, dx(static_cast<size_t>(n), 0), dxd = dx;
  f64::silu(x.data(), n, y.data());
  silu_fwd<double>(x.data(), n, yd.data());
  expect_close(yd, y, kD, 0, "silu fwd");
  ref::silu_bwd(dy.data(), x.data(), n, dx.data());
  silu_bwd<double>(dy.data(), x.data(), n, dxd.data());
  expect_close(dxd, dx, kD, 0, "silu bwd");
  expect_close(dx, fd_grad([&](const V& v) { V o(v.size()); f64::silu(v.data(), n, o.data()); return dot(o, dy); }, x), kFd, 1e-9, "silu fd");
  V da(static_cast<size_t>(n), 0), dg = da, dad = da, dgd = da;
  ref::mul_sigmoid_bwd(dy.data(), x.data(), g.data(), n, da.data(), dg.data());
  mul_sigmoid_bwd<double>(dy.data(), x.data(), g.data(), n, dad.data(), dgd.data());
  expect_close(dad, da, kD, 0, "gate da");
  expect_close(dgd, dg, kD, 0, "gate dg");
  auto L = [&](const V& a, const V& gg) { V o(a.size()); f64::mul_sigmoid(a.data(), gg.data(), n, o.data()); return dot(o, dy); };
  expect_close(da, fd_grad([&](const V& v) { return L(v, g); }, x), kFd, 1e-9, "gate da fd");
  expect_close(dg, fd_grad([&](const V& v) { return L(x, v); }, g), kFd, 1e-9, "gate dg fd");
  std::vector<float> yf(static_cast<size_t>(n));
  mul_sigmoid_fwd<float>(to_f(x).data(), to_f(g).data(), n, yf.data());
  f64::mul_sigmoid(x.data(), g.data(), n, y.data());
  expect_close(to_d(yf), y, kFr, kFa, "gate fwd float");
}

TEST(TrainKernelsLightning, RouterSoftmax) {
  for (auto [n, E, k] : {std::tuple{4, 8, 2}, {3, 16, 4}, {2, 5, 5}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " E=" << E << " k=" << k);
    const V logits = randn(static_cast<size_t>(n * E), 11, 2.0), dw = randn(static_cast<size_t>(n * k), 12);
    std::vector<int32_t> ids(static_cast<size_t>(n * k)), idsd = ids, idsf = ids;
    V w(ids.size()), p(logits.size()), wd = w, pd = p;
    f64::route_softmax(logits.data(), n, E, k, ids.data(), w.data(), p.data());
    router_softmax_fwd<double>(logits.data(), n, E, k, idsd.data(), wd.data(), pd.data());
    EXPECT_EQ(idsd, ids);
    expect_close(wd, w, kD, 0, "w double");
    std::vector<float> wf(w.size()), pf(p.size());
    router_softmax_fwd<float>(to_f(logits).data(), n, E, k, idsf.data(), wf.data(), pf.data());
    EXPECT_EQ(idsf, ids);
    V dl(p.size(), 0), dld = dl;
    ref::router_softmax_bwd(dw.data(), ids.data(), w.data(), p.data(), n, E, k, dl.data());
    router_softmax_bwd<double>(dw.data(), ids.data(), w.data(), p.data(), n, E, k, dld.data());
    expect_close(dld, dl, kD, 0, "bwd double");
    std::vector<float> dlf(p.size(), 0);
    router_softmax_bwd<float>(to_f(dw).data(), ids.data(), wf.data(), pf.data(), n, E, k, dlf.data());
    expect_close(to_d(dlf), dl, kFr, kFa, "bwd float");
    expect_close(dl, fd_grad([&](const V& x) {
      std::vector<int32_t> ii(ids.size());
      V ww(w.size()), pp(p.size());
      f64::route_softmax(x.data(), n, E, k, ii.data(), ww.data(), pp.data());
      EXPECT_EQ(ii, ids) << "selection flipped under the finite difference";
      return dot(ww, dw);
    }, logits, 1e-6), kFd, 1e-9, "vs fd");
  }
}

}  // namespace
}  // namespace mmx::train
