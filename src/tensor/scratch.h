// Scratch: named, reusable activation buffers for one forward pass.
//
// A slot grows when a larger batch arrives and is reused afterwards, so a steady-state decode
// step allocates nothing (DESIGN rule 5). Views returned by get() stay valid until the same
// slot is requested again with a larger size.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace mmx {

class Scratch {
 public:
  // A zero-initialised-once (not re-zeroed) view of slot `id` with the given shape.
  Tensor get(int id, DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dtype, dims);
    if (id >= int(slots_.size())) slots_.resize(id + 1);
    std::vector<uint64_t>& s = slots_[id];
    const size_t words = (t.size_bytes() + 7) / 8;
    if (s.size() < words) s.resize(words);
    t.data = s.data();
    return t;
  }
  Tensor f32(int id, std::initializer_list<int64_t> dims) { return get(id, DType::kF32, dims); }
  Tensor i32(int id, std::initializer_list<int64_t> dims) { return get(id, DType::kI32, dims); }

 private:
  std::vector<std::vector<uint64_t>> slots_;
};

}  // namespace mmx
