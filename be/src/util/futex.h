#pragma once

// Internal to the util locks (spinlock.cc, shard-lock.cc) and the engine's executor wake-up
// (sqlite-engine.cc): the CPU's spin-wait hint and the futex system call.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace qr::internal {

/// Tells the CPU this is a spin-wait loop (x86 pause, arm64 yield).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// A process-private futex operation ('op': FUTEX_WAIT or FUTEX_WAKE) on 'addr', no timeout.
inline long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op | FUTEX_PRIVATE_FLAG, val,
                 nullptr, nullptr, 0);
}

}  // namespace qr::internal
