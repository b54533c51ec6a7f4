#include "service/page-workers.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

namespace qr {

PageWorkers::PageWorkers(Options options) : options_(std::move(options)) {
  const int n = std::max(1, options_.threads);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] { Run(); });
    const std::string name = (options_.name + "-" + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), name.c_str());
  }
}

PageWorkers::~PageWorkers() { Stop(); }

bool PageWorkers::TrySubmit(std::function<void()> task) {
  {
    MutexLock l(&mu_);
    if (!stopping_ && queue_.size() + running_ < std::max<size_t>(1, options_.max_pending)) {
      queue_.push_back(std::move(task));
      cv_.NotifyOne();
      return true;
    }
    if (stopping_) return false;
  }
  rejected_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void PageWorkers::Stop() {
  std::deque<std::function<void()>> dropped;
  std::vector<std::thread> threads;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
    threads.swap(threads_);
  }
  cv_.NotifyAll();
  for (std::thread& t : threads) t.join();
  // 'dropped' goes here, with no lock held: a task's captures (a ResponseCallback) may run
  // code of their own when destroyed.
}

size_t PageWorkers::pending() {
  MutexLock l(&mu_);
  return queue_.size() + running_;
}

void PageWorkers::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      while (queue_.empty() && !stopping_) cv_.Wait(&mu_);
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    if (options_.before_task) options_.before_task();
    task();
    task = nullptr;  // Its captures go before the task stops counting as pending.
    MutexLock l(&mu_);
    --running_;
  }
}

}  // namespace qr
