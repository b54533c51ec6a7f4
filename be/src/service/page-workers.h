#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// A few threads that run the debug pages' heavy work (GET /queries?json reads up to 64 MiB
/// of query-history records and renders them) off the HTTP I/O threads, so that one listing
/// never stalls the other connections of its I/O thread. At most 'max_pending' tasks are
/// queued or running; TrySubmit() refuses more (the caller answers 503).
/// Thread-safety: thread-safe.
/// Lifecycle: the threads start in the constructor. Stop() (or the destructor) lets running
/// tasks finish, destroys the queued ones without running them, and joins the threads.
class PageWorkers {
 public:
  struct Options {
    /// 'name' names the threads (at most 15 characters with the index).
    std::string name = "qr-pages";
    int threads = 1;
    size_t max_pending = 16;
    /// For tests: runs on a worker before each task (e.g. to hold it).
    std::function<void()> before_task;
  };

  explicit PageWorkers(Options options);
  ~PageWorkers();
  PageWorkers(const PageWorkers&) = delete;
  PageWorkers& operator=(const PageWorkers&) = delete;

  /// Queues 'task'; false (and 'task' is not kept) when 'max_pending' tasks are queued or
  /// running, or after Stop().
  bool TrySubmit(std::function<void()> task);
  /// Idempotent.
  void Stop();

  /// Tasks queued or running now.
  size_t pending();
  /// Tasks TrySubmit() refused because 'max_pending' were pending.
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  const Options& options() const { return options_; }

 private:
  void Run();

  const Options options_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ QR_GUARDED_BY(mu_);
  size_t running_ QR_GUARDED_BY(mu_) = 0;
  bool stopping_ QR_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace qr
