// WorkerPool: the threads that run route handlers. A handler blocks for as long as its request
// generates (a stream holds its thread until the last event), so the pool grows on demand up to
// max_threads — 300 concurrent streams need 300 threads, not a queue behind 128 — and a thread
// idle for idle_ms exits. Past max_threads tasks wait, FIFO. The destructor waits for every task.
//
// Our own rather than a library's: nothing in Debian's set grows and shrinks like this, and it is
// one condition variable and a queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mmx::server {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads, int idle_ms = 30000);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void submit(std::function<void()> task);
  int n_threads() const;

 private:
  void work();
  void reap();  // joins threads that exited (under mu_)

  const int max_threads_, idle_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> exited_;
  int n_idle_ = 0;
  bool stop_ = false;
};

}  // namespace mmx::server
