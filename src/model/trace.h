// trace(x, "name", il): names an intermediate so `mmx dump` can diff any layer against the
// reference. A no-op (one branch) unless a dump directory was set.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace mmx {

// Start writing every traced tensor to DIR/<name>.<il>.npy (il = -1 -> DIR/<name>.npy).
void trace_set_dir(const std::string& dir);
bool trace_enabled();
void trace_write(const Tensor& x, const char* name, int il);

inline void trace(const Tensor& x, const char* name, int il = -1) {
  if (trace_enabled()) trace_write(x, name, il);
}

}  // namespace mmx
