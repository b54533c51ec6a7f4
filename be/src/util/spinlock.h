#pragma once

#include <atomic>
#include <cstdint>

#include <glog/logging.h>

#include "util/thread-annotations.h"

namespace qr {

/// An adaptive spin lock for very short critical sections (a hash-map probe).
///
/// Uncontended lock and unlock are one atomic instruction each. A contended lock spins on a
/// read-only load with the CPU pause instruction for a bounded number of rounds, then sleeps
/// in the kernel (futex) until the holder releases it. Unlock issues a wake-up system call only
/// when a thread is actually asleep. This keeps oversubscribed machines (many more threads than
/// cores) from burning whole scheduler quanta spinning on a preempted holder.
///
/// Satisfies Lockable (lock/unlock/try_lock), so std::lock_guard and boost::lock_guard work.
/// Thread-safety: thread-safe. Not recursive: locking it twice from one thread deadlocks.
class CAPABILITY("spinlock") SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() ACQUIRE() {
    uint32_t expected = 0;
    // Acquire: the critical section must not be reordered before the lock is taken.
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow();
    }
    CountAcquisition();
  }

  bool try_lock() TRY_ACQUIRE(true) {
    uint32_t expected = 0;
    if (state_.load(std::memory_order_relaxed) != 0 ||
        !state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      return false;
    }
    CountAcquisition();
    return true;
  }

  void unlock() RELEASE() {
    // seq_cst (not just release): the store must be ordered before the load of 'sleepers_'
    // below, pairing with the sleeper's increment before its futex wait (Dekker-style). On x86
    // the exchange is a locked instruction either way.
    state_.exchange(0, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) WakeOne();
  }

  /// Debug-build check that the lock is held (by some thread).
  void DCheckLocked() const ASSERT_CAPABILITY(this) {
    DCHECK_NE(state_.load(std::memory_order_relaxed), 0u) << "SpinLock is not held";
  }

  /// Times the lock was acquired (lock() or a successful try_lock()).
  uint64_t acquisitions() const { return acquisitions_.load(std::memory_order_relaxed); }
  /// Times lock() found the lock held and had to spin or sleep.
  uint64_t contended_acquisitions() const { return contended_.load(std::memory_order_relaxed); }
  /// Times a locker went to sleep in the kernel (a subset of the contended acquisitions).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

  /// Spin rounds (each one pause instruction) before sleeping.
  static constexpr int kSpinRounds = 100;

 private:
  void LockSlow();
  void WakeOne();

  // Only the holder writes the counter, so a relaxed load+store (no locked instruction) is
  // exact; readers may see a slightly stale value, which is fine for statistics.
  void CountAcquisition() {
    acquisitions_.store(acquisitions_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  }

  /// 0: free; 1: held.
  std::atomic<uint32_t> state_{0};
  /// Threads that are asleep in the kernel (or about to be) waiting for 'state_' to change.
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint64_t> acquisitions_{0};
  std::atomic<uint64_t> contended_{0};
  std::atomic<uint64_t> sleeps_{0};
};

}  // namespace qr
