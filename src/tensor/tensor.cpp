#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

namespace mmx {

Tensor Tensor::slice0(int64_t i) const {
  MMX_CHECK(ndim >= 1 && i >= 0 && i < shape[0], "slice0({}) of {}", i, shape_str());
  Tensor r;
  r.dtype = dtype;
  r.device = device;
  r.ndim = ndim - 1;
  for (int d = 1; d < ndim; ++d) r.shape[d - 1] = shape[d];
  r.data = static_cast<char*>(data) + size_t(i) * r.size_bytes();
  return r;
}

Tensor Tensor::rows_range(int64_t begin, int64_t end) const {
  MMX_CHECK(ndim >= 1 && 0 <= begin && begin <= end && end <= shape[0], "rows_range({}, {}) of {}",
            begin, end, shape_str());
  Tensor r = *this;
  const size_t row_bytes = shape[0] ? size_bytes() / size_t(shape[0]) : 0;
  r.shape[0] = end - begin;
  r.data = static_cast<char*>(data) + size_t(begin) * row_bytes;
  return r;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor r(data, dtype, dims);
  r.device = device;
  MMX_CHECK(r.numel() == numel(), "reshape {} -> {}", shape_str(), r.shape_str());
  return r;
}

bool Tensor::same_shape(const Tensor& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (shape[i] != o.shape[i]) return false;
  return true;
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(DType t, std::initializer_list<int64_t> dims) : view_(nullptr, t, dims) {
  const size_t bytes = view_.size_bytes();
  const size_t alloc = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, alloc ? alloc : 64);
  MMX_CHECK(p != nullptr, "out of memory allocating {} bytes", alloc);
  std::memset(p, 0, alloc ? alloc : 64);
  mem_.reset(p);
  view_.data = p;
}

}  // namespace mmx
