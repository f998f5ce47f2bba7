// Wall-clock seconds from a monotonic clock, and the median of repeated measurements.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace mmx {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of repeated runs (the upper middle for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace mmx
