// Private: argument validation shared by the fast entry points (ops.cpp) and the reference
// (ref/*.cpp). Every function MMX_CHECKs the op's documented shapes/dtypes and aborts with the
// offending shapes on a mismatch. Pure bookkeeping: no numerics live here.
#pragma once

#include <cstdint>

#include "ops/ops.h"

namespace mmx::ops::check {

void matmul(const Tensor& x, const Linear& w, const Tensor& y);
void linear(const Linear& w);
void linear_dequant_rows(const Linear& w, int64_t row0, const Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y);
void same_f32(const Tensor& a, const Tensor& b, const char* op);
void rope_neox(const Tensor& x, const Tensor& positions, int rotary_dim);
void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       const Tensor& out);
void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, const Tensor& ids,
                       const Tensor& weights);
void moe_route_softmax(const Tensor& logits, int k, const Tensor& ids, const Tensor& weights);
void lightning_attention(const Tensor& qkv, const Tensor& slopes, const Tensor& state,
                         const Tensor& out);
void rows_gather(const Tensor& src, const Tensor& row_ids, const Tensor& dst);
void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale,
                      const Tensor& dst);
void embedding(const Tensor& table, const Tensor& ids, const Tensor& out);
void to_f32(const Tensor& x, const Tensor& out);

}  // namespace mmx::ops::check
