// Thread-count invariance: every threaded op gives bitwise-identical output with 1, 2 and 3
// threads (work is split over independent outputs, never inside a reduction), and
// set_n_threads(0) means all cores.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mmx::testing {
namespace {

class ThreadsTest : public ::testing::Test {
 protected:
  void TearDown() override { ops::set_n_threads(0); }

  // Runs `op` (which writes `out`) at 1, 2, 3 threads; all outputs must be bitwise equal.
  void expect_invariant(const std::string& what, Tensor out, const std::function<void()>& op) {
    SCOPED_TRACE(what);
    std::vector<Buffer> results;
    for (int nt : {1, 2, 3}) {
      ops::set_n_threads(nt);
      EXPECT_EQ(ops::n_threads(), nt);
      op();
      results.push_back(copy_of(out));
    }
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_TRUE(bitwise_equal(results[0].t(), results[i].t())) << "threads " << i + 1;
  }
};

TEST_F(ThreadsTest, ZeroMeansAllCores) {
  ops::set_n_threads(0);
  EXPECT_EQ(ops::n_threads(), omp_get_num_procs());
}

TEST_F(ThreadsTest, Matmul) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF8E4M3})
    for (int64_t n : {1, 3, 37}) {
      OwnedLinear w = make_linear(dt, 300, 520, 5, 128, 128);
      Buffer x = random_tensor({n, 520}, 6);
      Buffer y(DType::kF32, {n, 300});
      expect_invariant(fmt::format("matmul {} n={}", dtype_name(dt), n), y.t(),
                       [&] { ops::matmul(x, w.lin, y.t()); });
    }
  // Few output columns, many tokens: the GEMM splits tokens instead of columns.
  OwnedLinear w = make_linear(DType::kF8E4M3, 20, 300, 9, 7, 48);
  Buffer x = random_tensor({100, 300}, 10);
  Buffer y(DType::kF32, {100, 20});
  expect_invariant("matmul token-split", y.t(), [&] { ops::matmul(x, w.lin, y.t()); });
}

TEST_F(ThreadsTest, Attention) {
  const int64_t shapes[][6] = {{64, 64, 0, 6, 1, 128}, {1, 500, 499, 48, 8, 128}, {9, 100, 80, 4, 2, 40},
                               {1, 2100, 2099, 12, 2, 128}};  // last: key-major P·V
  for (const auto& s : shapes) {
    Buffer q = random_tensor({s[0], s[3], s[5]}, 1), k = random_tensor({s[1], s[4], s[5]}, 2),
           v = random_tensor({s[1], s[4], s[5]}, 3);
    Buffer out(DType::kF32, {s[0], s[3], s[5]});
    expect_invariant(fmt::format("attention n_q={} n_kv={}", s[0], s[1]), out.t(),
                     [&] { ops::attention_softmax(q, k, v, s[2], 0.088f, out.t()); });
  }
}

TEST_F(ThreadsTest, ElementwiseAndRows) {
  Buffer x = random_tensor({64, 3072}, 1), w = random_tensor({3072}, 2), u = random_tensor({64, 3072}, 3);
  Buffer y(DType::kF32, {64, 3072});
  expect_invariant("rms_norm", y.t(), [&] { ops::rms_norm(x, w, 1e-6f, y.t()); });
  expect_invariant("glu_silu", y.t(), [&] { ops::glu_silu(x, u, y.t()); });
  Buffer pos(DType::kI32, {64});
  for (int i = 0; i < 64; ++i) pos.t().ptr<int32_t>()[i] = 1000 + i;
  Buffer r = copy_of(x);
  Tensor rh = r.t().reshape({64, 24, 128});
  expect_invariant("rope", r.t(), [&] {
    std::memcpy(r.t().data, x.t().data, x.t().size_bytes());
    ops::rope_neox(rh, pos, 64, 5e6);
  });
  Buffer ids(DType::kI32, {64}), sc = random_tensor({64}, 4);
  for (int i = 0; i < 64; ++i) ids.t().ptr<int32_t>()[i] = (i * 7) % 5;  // heavy repeats
  Buffer dst(DType::kF32, {5, 3072});
  expect_invariant("rows_scatter_add", dst.t(), [&] {
    std::memset(dst.t().data, 0, dst.t().size_bytes());
    ops::rows_scatter_add(u, ids, sc, dst.t());
  });
}

}  // namespace
}  // namespace mmx::testing
