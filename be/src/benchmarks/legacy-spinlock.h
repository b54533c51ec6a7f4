#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace qr::bench {

/// The SpinLock protocol util/spinlock.h used before the registry benchmark (issue 6) replaced
/// it, kept here only so that process-wide-locks-benchmark can show the old default
/// ("LegacySpinShards64Std": this lock, std::unordered_map, 64 shards) next to the new one in
/// the same run. Not used by the product.
///
/// A 0/1 word plus a separate count of sleepers: lock spins 100 pause rounds (~5 us here),
/// then registers as a sleeper and FUTEX_WAITs; unlock wakes one thread whenever any sleeper is
/// registered. Under oversubscription this turned every unlock of a busy lock into a system
/// call and every woken thread into a wake/lose/sleep cycle (docs/benchmarks.md).
/// Thread-safety: thread-safe. Not recursive.
class LegacySpinLock {
 public:
  static constexpr int kSpinRounds = 100;

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
    // seq_cst: the store must be ordered before the load of 'sleepers_' (Dekker-style).
    state_.exchange(0, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) Futex(FUTEX_WAKE, 1);
  }

 private:
  [[gnu::noinline]] void LockSlow() {
    for (int i = 0; i < kSpinRounds; ++i) {
      if (state_.load(std::memory_order_relaxed) == 0) {
        uint32_t expected = 0;
        if (state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          return;
        }
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    while (true) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      uint32_t expected = 0;
      if (state_.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) {
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
      Futex(FUTEX_WAIT, 1);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      expected = 0;
      if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
        return;
      }
    }
  }

  void Futex(int op, uint32_t val) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), op | FUTEX_PRIVATE_FLAG, val,
            nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> state_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint64_t> acquisitions_{0};
};

}  // namespace qr::bench
