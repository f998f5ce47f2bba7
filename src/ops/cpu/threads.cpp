// Thread count for the CPU ops and the per-thread scratch buffers they reuse.
//
// The count is process-wide (an atomic), read at the start of every OpenMP region via
// num_threads(threads()). Scratch buffers are thread_local: OpenMP keeps its worker threads alive
// between regions, so a buffer is allocated once per thread and slot, and only grows.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <memory>

#include "ops/cpu/cpu.h"

namespace mmx::ops {

namespace {
std::atomic<int> g_n_threads{0};  // 0 = all cores
}  // namespace

void set_n_threads(int n) {
  MMX_CHECK(n >= 0, "set_n_threads({}): must be >= 0", n);
  g_n_threads.store(n, std::memory_order_relaxed);
}

int n_threads() {
  // omp_get_num_procs() asks the kernel for the affinity mask (~1 us): once is enough.
  static const int n_procs = omp_get_num_procs();
  const int n = g_n_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : n_procs;
}

namespace cpu {

int threads() { return n_threads(); }

namespace {
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
struct Scratch {
  std::unique_ptr<float, FreeDeleter> data;
  size_t cap = 0;
};
}  // namespace

float* scratch(int slot, size_t n) {
  thread_local Scratch bufs[kScratchSlots];
  MMX_CHECK(slot >= 0 && slot < kScratchSlots, "scratch slot {}", slot);
  Scratch& s = bufs[slot];
  if (s.cap < n) {
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    MMX_CHECK(p != nullptr, "out of memory: scratch of {} bytes", bytes);
    s.data.reset(p);
    s.cap = bytes / sizeof(float);
  }
  return s.data.get();
}

}  // namespace cpu
}  // namespace mmx::ops
