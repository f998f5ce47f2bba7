// One comparison helper with one failure message (llm.c / yalm style: where and by how much).
//   EXPECT_ALLCLOSE(got, want, tol::kF32);
// Passes iff every element satisfies |a - r| <= atol + rtol·|r|, NMSE <= max_nmse, and no NaN/Inf.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tensor/tensor.h"
#include "testing/tolerance.h"

namespace mmx::testing {

::testing::AssertionResult allclose(const float* got, const float* want, const Tensor& shape_of,
                                    Tol tol);
::testing::AssertionResult allclose(const Tensor& got, const Tensor& want, Tol tol);

// normal(0, stddev) values, seeded.
Buffer random_tensor(std::initializer_list<int64_t> dims, uint64_t seed, float stddev = 1.0f);
void fill_random(float* p, int64_t n, uint64_t seed, float stddev = 1.0f);

}  // namespace mmx::testing

#define EXPECT_ALLCLOSE(got, want, tol) EXPECT_TRUE(::mmx::testing::allclose((got), (want), (tol)))
#define ASSERT_ALLCLOSE(got, want, tol) ASSERT_TRUE(::mmx::testing::allclose((got), (want), (tol)))
