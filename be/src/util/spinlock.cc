#include "util/spinlock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace qr {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op | FUTEX_PRIVATE_FLAG, val,
                 nullptr, nullptr, 0);
}

}  // namespace

void SpinLock::LockSlow() {
  contended_.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kSpinRounds; ++i) {
    // Test before test-and-set: spin on a shared cache line, not by bouncing it in exclusive mode.
    if (state_.load(std::memory_order_relaxed) == 0) {
      uint32_t expected = 0;
      if (state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
    CpuRelax();
  }
  while (true) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    uint32_t expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) {
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    // Sleeps only while the word is still 1: an unlock in between makes this return at once.
    Futex(&state_, FUTEX_WAIT, 1);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
  }
}

void SpinLock::WakeOne() { Futex(&state_, FUTEX_WAKE, 1); }

}  // namespace qr
