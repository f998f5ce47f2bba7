// The F32 <-> fp64 edges of the reference ops (private to src/ops/ref): ops::ref widens its F32
// inputs, runs the fp64 oracle (f64.h) and rounds the results once.
#pragma once

#include <cstdint>
#include <vector>

namespace mmx::ops::ref {

inline std::vector<double> widen(const float* x, int64_t n) { return std::vector<double>(x, x + n); }
inline void narrow(const std::vector<double>& x, float* out) {
  for (size_t i = 0; i < x.size(); ++i) out[i] = float(x[i]);
}

}  // namespace mmx::ops::ref
