#include "util/spinlock.h"

#include "util/futex.h"

namespace qr {

using internal::CpuRelax;
using internal::Futex;

void SpinLock::LockSlow(bool count_contended) {
  if (count_contended) contended_.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kSpinRounds; ++i) {
    // Test before test-and-set: spin on a shared cache line, not by bouncing it in exclusive mode.
    const uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == kFree) {
      uint32_t expected = kFree;
      if (state_.compare_exchange_weak(expected, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
    } else if (s == kHeldWithSleepers) {
      break;  // others already sleep: queue up behind them instead of burning the CPU
    }
    CpuRelax();
  }
  // Taking the lock with kHeldWithSleepers is pessimistic (its unlock wakes one thread even if
  // none sleeps any more) but never loses a wake-up.
  while (state_.exchange(kHeldWithSleepers, std::memory_order_acquire) != kFree) {
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    // Sleeps only while the word is still kHeldWithSleepers: an unlock in between makes this
    // return at once.
    Futex(&state_, FUTEX_WAIT, kHeldWithSleepers);
  }
}

void SpinLock::WakeOne() {
  wakes_.fetch_add(1, std::memory_order_relaxed);
  Futex(&state_, FUTEX_WAKE, 1);
}

}  // namespace qr
