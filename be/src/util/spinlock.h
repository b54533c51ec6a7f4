#pragma once

#include <atomic>
#include <cstdint>

#include "check.h"
#include "thread-annotations.h"

namespace qr {

/// An adaptive spin lock for very short critical sections (a hash-map probe).
///
/// Uncontended lock and unlock are one atomic instruction each. A contended lock spins on a
/// read-only load with the CPU pause instruction for a few rounds (about 1 us), then sleeps in
/// the kernel (futex) until the holder releases it. This keeps oversubscribed machines (many
/// more threads than cores) from burning scheduler quanta spinning on a preempted holder.
///
/// The protocol is the three-state futex mutex of Drepper's "Futexes Are Tricky" (also what
/// glibc's mutex does) with a bounded spin in front. The word is 0 (free), 1 (held) or 2 (held,
/// and a thread may be asleep on it). Only a locker that is about to sleep sets 2, and unlock
/// issues FUTEX_WAKE only when it reads 2 back: a thread that took a free lock never makes a
/// system call to release it, even while others sleep, so a busy lock does not turn every
/// unlock into a wake-up and every sleeper into a wake/lose/sleep cycle. A woken thread takes
/// the lock with state 2 (it cannot know whether others still sleep), so its unlock wakes the
/// next sleeper: hand-offs chain one wake-up per sleeper, never lost and never a thundering herd.
/// docs/benchmarks.md measures this against the previous protocol (wake whenever a sleeper is
/// registered, 100 spin rounds), which collapsed with 64 threads on 2 cores.
///
/// Satisfies Lockable (lock/unlock/try_lock), so std::lock_guard and boost::lock_guard work.
/// Thread-safety: thread-safe. Not recursive: locking it twice from one thread deadlocks.
class QR_CAPABILITY("spinlock") SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() QR_ACQUIRE() {
    uint32_t expected = kFree;
    // Acquire: the critical section must not be reordered before the lock is taken.
    if (!state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow(/*count_contended=*/true);
    }
    CountAcquisition();
  }

  [[nodiscard]] bool try_lock() QR_TRY_ACQUIRE(true) {
    uint32_t expected = kFree;
    if (state_.load(std::memory_order_relaxed) != kFree ||
        !state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      return false;
    }
    CountAcquisition();
    return true;
  }

  /// try_lock() for a holder that is no user of the lock and is not counted in acquisitions()
  /// (ShardLock lowering a read bias ahead of a walk's writes).
  [[nodiscard]] bool try_lock_uncounted() QR_TRY_ACQUIRE(true) {
    uint32_t expected = kFree;
    return state_.load(std::memory_order_relaxed) == kFree &&
           state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() QR_RELEASE() {
    // Release: the critical section's writes are visible to the next holder. The exchange is
    // one locked instruction; a sleeper's "set 2, then futex_wait(2)" cannot miss it, because
    // FUTEX_WAIT re-checks the word under the futex bucket lock.
    if (state_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) WakeOne();
  }

  /// Waits until the lock is free by taking it and dropping it at once: for a thread that must
  /// queue behind the holder without becoming one (ShardLock's readers behind a writer).
  /// Counted in sleeps() only, neither as an acquisition nor as a contended one.
  void WaitUntilFree() {
    uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow(/*count_contended=*/false);
    }
    if (state_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) WakeOne();
  }

  /// Debug-build check that the lock is held (by some thread).
  void DCheckLocked() const QR_ASSERT_CAPABILITY(this) {
    QR_DCHECK(state_.load(std::memory_order_relaxed) != kFree, "SpinLock is not held");
  }

  /// Times the lock was acquired (lock() or a successful try_lock()).
  uint64_t acquisitions() const { return acquisitions_.load(std::memory_order_relaxed); }
  /// Times lock() found the lock held and had to spin or sleep.
  uint64_t contended_acquisitions() const { return contended_.load(std::memory_order_relaxed); }
  /// Times a locker went to sleep in the kernel (FUTEX_WAIT calls; a contended acquisition may
  /// sleep more than once).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  /// Times unlock() issued a FUTEX_WAKE system call.
  uint64_t wakes() const { return wakes_.load(std::memory_order_relaxed); }

  /// Spin rounds (each one pause instruction, ~50 ns on the benchmark machine) before sleeping.
  /// Short on purpose: on an oversubscribed machine the holder may be waiting for this very CPU.
  static constexpr int kSpinRounds = 16;

 private:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kHeld = 1;
  static constexpr uint32_t kHeldWithSleepers = 2;

  void LockSlow(bool count_contended);
  void WakeOne();

  // Only the holder writes the counter, so a relaxed load+store (no locked instruction) is
  // exact; readers may see a slightly stale value, which is fine for statistics.
  void CountAcquisition() {
    acquisitions_.store(acquisitions_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  }

  /// kFree, kHeld or kHeldWithSleepers.
  std::atomic<uint32_t> state_{kFree};
  std::atomic<uint64_t> acquisitions_{0};
  std::atomic<uint64_t> contended_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> wakes_{0};
};

}  // namespace qr
