// mmx::ops::* — the public entry points: validate arguments (check.h), pick the implementation,
// call it. Today the only backend is the CPU one (src/ops/cpu); a CUDA branch would go here,
// keyed on Tensor::device, never in model code.
//
// Not here: set_n_threads / n_threads (cpu/threads.cpp), any arithmetic.
#include "ops/ops.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/cpu.h"

namespace mmx::ops {

namespace cpu {
void quantize(const Tensor& x, Tensor& out);  // cpu/quantize.cpp
}  // namespace cpu

namespace {
Backend initial_backend() {
  const char* e = std::getenv("MMX_OPS");
  if (e == nullptr || std::strcmp(e, "cpu") == 0 || *e == 0) return Backend::kCpu;
  MMX_CHECK(std::strcmp(e, "ref") == 0, "MMX_OPS={}: expected cpu or ref", e);
  return Backend::kRef;
}
std::atomic<Backend> g_backend{initial_backend()};
}  // namespace

void set_backend(Backend b) { g_backend.store(b, std::memory_order_relaxed); }
Backend backend() { return g_backend.load(std::memory_order_relaxed); }

void matmul(const Tensor& x, const Linear& w, Tensor& y) {
  check::matmul(x, w, y);
  if (y.numel() == 0) return;
  if (w.n_in() == 0) {
    for (int64_t i = 0; i < y.numel(); ++i) y.f32()[i] = 0.0f;
    return;
  }
  if (use_ref()) return ref::matmul(x, w, y);
  if (x.dim(0) >= cpu::kGemmMinN) {
    if (dtype_is_quant(w.w.dtype)) cpu::qgemm(x, w, y);  // int8, same bits as qgemv
    else cpu::gemm(x, w, y);
  } else if (dtype_is_quant(w.w.dtype)) cpu::qgemv(x, w, y);
  else cpu::gemv(x, w, y);
}

void linear_dequant_rows(const Linear& w, int64_t row0, Tensor& out) {
  check::linear_dequant_rows(w, row0, out);
  cpu::linear_dequant_rows(w, row0, out);
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check::rms_norm(x, weight, y);
  if (x.numel() == 0) return;
  if (use_ref()) return ref::rms_norm(x, weight, eps, y);
  cpu::rms_norm(x, weight, eps, y);
}

void add(Tensor& x, const Tensor& y) {
  check::same_f32(x, y, "add");
  if (use_ref()) return ref::add(x, y);
  cpu::add(x, y);
}

void glu_silu(const Tensor& gate, const Tensor& up, Tensor& out) {
  check::same_f32(gate, up, "glu_silu");
  check::same_f32(gate, out, "glu_silu");
  if (use_ref()) return ref::glu_silu(gate, up, out);
  cpu::glu_silu(gate, up, out);
}

void glu_swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, Tensor& out) {
  check::same_f32(gate, up, "glu_swiglu_oai");
  check::same_f32(gate, out, "glu_swiglu_oai");
  if (use_ref()) return ref::glu_swiglu_oai(gate, up, alpha, limit, out);
  cpu::glu_swiglu_oai(gate, up, alpha, limit, out);
}

void silu(Tensor& x) {
  MMX_CHECK(x.dtype == DType::kF32, "silu: x must be F32, got {}", dtype_name(x.dtype));
  if (use_ref()) return ref::silu(x);
  cpu::silu(x);
}

void mul_sigmoid(Tensor& x, const Tensor& gate) {
  check::same_f32(x, gate, "mul_sigmoid");
  if (use_ref()) return ref::mul_sigmoid(x, gate);
  cpu::mul_sigmoid(x, gate);
}

void scale_add(Tensor& x, float a, const Tensor& y, float b) {
  check::same_f32(x, y, "scale_add");
  if (use_ref()) return ref::scale_add(x, a, y, b);
  cpu::scale_add(x, a, y, b);
}

void rope_neox(Tensor& x, const Tensor& positions, int rotary_dim, double theta) {
  check::rope_neox(x, positions, rotary_dim);
  if (rotary_dim == 0 || x.numel() == 0) return;
  if (use_ref()) return ref::rope_neox(x, positions, rotary_dim, theta);
  cpu::rope_neox(x, positions, rotary_dim, theta);
}

void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       float scale, Tensor& out) {
  check::attention_softmax(q, k, v, pos0, out);
  if (out.numel() == 0) return;
  if (use_ref()) return ref::attention_softmax(q, k, v, pos0, scale, out);
  cpu::attention_softmax(q, k, v, pos0, scale, out);
}

void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, Tensor& ids,
                       Tensor& weights) {
  check::moe_route_sigmoid(logits, bias, k, ids, weights);
  if (use_ref()) return ref::moe_route_sigmoid(logits, bias, k, ids, weights);
  cpu::moe_route_sigmoid(logits, bias, k, ids, weights);
}

void moe_route_softmax(const Tensor& logits, int k, Tensor& ids, Tensor& weights) {
  check::moe_route_softmax(logits, k, ids, weights);
  if (use_ref()) return ref::moe_route_softmax(logits, k, ids, weights);
  cpu::moe_route_softmax(logits, k, ids, weights);
}

void attention_lightning(const Tensor& qkv, const Tensor& slopes, int block, Tensor& state,
                         Tensor& out) {
  check::attention_lightning(qkv, slopes, state, out);
  if (qkv.dim(0) == 0) return;
  if (use_ref()) return ref::attention_lightning(qkv, slopes, block, state, out);
  cpu::attention_lightning(qkv, slopes, block, state, out);
}

void rows_gather(const Tensor& src, const Tensor& row_ids, Tensor& dst) {
  check::rows_gather(src, row_ids, dst);
  if (use_ref()) return ref::rows_gather(src, row_ids, dst);
  cpu::rows_gather(src, row_ids, dst);
}

void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale, Tensor& dst) {
  check::rows_scatter_add(src, row_ids, scale, dst);
  if (use_ref()) return ref::rows_scatter_add(src, row_ids, scale, dst);
  cpu::rows_scatter_add(src, row_ids, scale, dst);
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  check::embedding(table, ids, out);
  if (use_ref()) return ref::embedding(table, ids, out);
  cpu::embedding(table, ids, out);
}

void to_f32(const Tensor& x, Tensor& out) {
  check::to_f32(x, out);
  if (out.data == x.data) return;  // F32 in place: nothing to do
  cpu::to_f32(x, out);
}

void quantize(const Tensor& x, Tensor& out) {
  check::quantize(x, out);
  if (x.numel() == 0) return;
  cpu::quantize(x, out);  // no ref twin: the decoder is the oracle
}

}  // namespace mmx::ops
