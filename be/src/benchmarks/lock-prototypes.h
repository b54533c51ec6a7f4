#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace qr::bench {

/// A candidate replacement for util/spinlock.h's SpinLock, measured side by side with it by
/// process-wide-locks-benchmark (variants "ProposedLockShards<N>[Flat]"). Not used by the
/// product; see docs/benchmarks.md for why it exists.
///
/// It is the three-state futex lock of Drepper's "Futexes Are Tricky" (mutex 2), which is also
/// what glibc's pthread mutex does, with a short bounded spin in front:
///  - state 0 = free, 1 = held, 2 = held and a thread may be asleep;
///  - lock: one CAS 0->1; if that fails, spin at most kSpinRounds pause instructions (about
///    1 us here), and not at all once the state says others already sleep; then
///    exchange(2) and FUTEX_WAIT while the lock stays taken;
///  - unlock: exchange(0) and FUTEX_WAKE one thread only if the old state was 2.
/// What differs from SpinLock: a thread that takes the lock through the fast path (state 0->1)
/// does not wake anybody when it unlocks, even while others sleep, so a busy lock does not
/// turn every unlock into a system call and every sleeper into a wake-up/sleep cycle; and
/// waiters give the CPU back after ~1 us instead of ~5 us (100 pauses of ~50 ns on this CPU),
/// which matters when the holder itself is waiting for that CPU.
/// Thread-safety: thread-safe. Not recursive.
class ProposedLock {
 public:
  static constexpr int kSpinRounds = 16;

  void lock() {
    uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow();
    }
    // Same statistics cost as SpinLock: only the holder writes it.
    acquisitions_.store(acquisitions_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  }

  bool try_lock() {
    uint32_t expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) Futex(FUTEX_WAKE, 1);
  }

 private:
  [[gnu::noinline]] void LockSlow() {
    for (int i = 0; i < kSpinRounds; ++i) {
      const uint32_t s = state_.load(std::memory_order_relaxed);
      if (s == 0) {
        uint32_t expected = 0;
        if (state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          return;
        }
      } else if (s == 2) {
        break;  // others are asleep already: queue up behind them instead of burning CPU
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    // Taking it with state 2 is pessimistic (its unlock will wake one thread even if none
    // sleeps) but never loses a wake-up.
    while (state_.exchange(2, std::memory_order_acquire) != 0) Futex(FUTEX_WAIT, 2);
  }

  void Futex(int op, uint32_t val) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), op | FUTEX_PRIVATE_FLAG, val,
            nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> state_{0};
  std::atomic<uint64_t> acquisitions_{0};
};

}  // namespace qr::bench
