#include "server/worker_pool.h"

#include <algorithm>
#include <chrono>

namespace mmx::server {

WorkerPool::WorkerPool(int max_threads, int idle_ms) : max_threads_(std::max(1, max_threads)), idle_ms_(idle_ms) {}

WorkerPool::~WorkerPool() {
  std::vector<std::thread> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    all.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : all) t.join();
}

int WorkerPool::n_threads() const {
  std::lock_guard<std::mutex> l(mu_);
  return int(threads_.size() - exited_.size());
}

void WorkerPool::reap() {
  for (const std::thread::id id : exited_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [id](const std::thread& t) { return t.get_id() == id; });
    if (it != threads_.end()) {
      it->join();  // it has left work(): returns at once
      threads_.erase(it);
    }
  }
  exited_.clear();
}

void WorkerPool::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> l(mu_);
  reap();
  tasks_.push_back(std::move(task));
  if (n_idle_ > int(tasks_.size()) - 1) {
    cv_.notify_one();
  } else if (int(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { work(); });
  }  // else it waits for a thread to finish its task
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    ++n_idle_;
    const bool woke = cv_.wait_for(l, std::chrono::milliseconds(idle_ms_), [this] { return stop_ || !tasks_.empty(); });
    --n_idle_;
    if (tasks_.empty() && (stop_ || !woke)) break;  // at stop, the queue is drained first
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    l.unlock();
    task();
    task = nullptr;  // its captures go before the lock is taken again
    l.lock();
  }
  if (!stop_) exited_.push_back(std::this_thread::get_id());
}

}  // namespace mmx::server
