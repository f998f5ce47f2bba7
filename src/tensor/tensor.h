// Tensor: a non-owning, contiguous, row-major view {data, dtype, shape}.
// Buffer: owns 64-byte-aligned memory and hands out Tensor views of it.
//
// Shapes are written outermost first: a [n_tokens, d_model] tensor has shape {n_tokens, d_model}
// and element (t, i) at data[t * d_model + i]. Views are always contiguous (no strides): every
// op in this engine works on packed rows, so a stride field would only be a way to be wrong.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace mmx {

enum class Device : uint8_t { kCpu, kCuda };

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  Device device = Device::kCpu;

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
    MMX_CHECK(dims.size() <= kMaxDims, "too many dims: {}", dims.size());
    for (int64_t v : dims) shape[ndim++] = v;
  }

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // Block-quantized dtypes: whole rows of dim(-1) elements (dtype_row_bytes).
  size_t size_bytes() const {
    if (ndim == 0) return dtype_block_bytes(dtype);
    return size_t(rows()) * dtype_row_bytes(dtype, shape[ndim - 1]);
  }
  // Number of rows when viewed as a matrix [rows, dim(-1)].
  int64_t rows() const {
    if (ndim == 0) return 1;
    int64_t r = 1;
    for (int i = 0; i + 1 < ndim; ++i) r *= shape[i];
    return r;
  }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  float* f32() const {
    MMX_CHECK(dtype == DType::kF32, "expected F32, got {}", dtype_name(dtype));
    return static_cast<float*>(data);
  }

  // The i-th slice along dim 0, as a view with ndim-1 dims (or a row for 1-D->scalar rows).
  Tensor slice0(int64_t i) const;
  // Rows [begin, end) along dim 0, same ndim.
  Tensor rows_range(int64_t begin, int64_t end) const;
  // Same data, new shape with the same element count.
  Tensor reshape(std::initializer_list<int64_t> dims) const;
  bool same_shape(const Tensor& o) const;
  std::string shape_str() const;  // "[2, 3, 4]"
};

// Owning, aligned storage. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType t, std::initializer_list<int64_t> dims);  // zero-filled
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  const Tensor& t() const { return view_; }
  Tensor& t() { return view_; }
  operator const Tensor&() const { return view_; }
  float* f32() const { return view_.f32(); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> mem_;
  Tensor view_;
};

}  // namespace mmx
