#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "thread-annotations.h"

namespace qr {

/// A std::mutex the thread-safety analysis can see (libstdc++'s is not annotated).
/// Thread-safety: thread-safe, like std::mutex.
class QR_CAPABILITY("mutex") Mutex {
 public:
  void lock() QR_ACQUIRE() { mu_.lock(); }
  void unlock() QR_RELEASE() { mu_.unlock(); }
  bool try_lock() QR_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  /// Tells the analysis the caller holds the lock (no runtime check).
  void AssertHeld() const QR_ASSERT_CAPABILITY(this) {}

  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

/// RAII holder of a Mutex.
class QR_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) QR_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() QR_RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

/// A condition variable that waits on a Mutex the caller holds.
class CondVar {
 public:
  /// QR_REQUIRES: 'mu' is held.
  void Wait(Mutex* mu) QR_REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu->native(), std::adopt_lock);
    cv_.wait(lk);
    lk.release();
  }
  /// Returns false on timeout. QR_REQUIRES: 'mu' is held.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline) QR_REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu->native(), std::adopt_lock);
    bool signaled = cv_.wait_until(lk, deadline) == std::cv_status::no_timeout;
    lk.release();
    return signaled;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace qr
