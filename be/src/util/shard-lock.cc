#include "util/shard-lock.h"

#include <algorithm>
#include <bit>
#include <thread>

#include "util/futex.h"

namespace qr {
namespace {

using internal::CpuRelax;
using internal::Futex;

static_assert(std::endian::native == std::endian::little,
              "a writer sleeps on the low 32 bits of a 64-bit counter");

/// The low 32 bits of a slot's 'exited' counter: the futex word (it changes on every release).
std::atomic<uint32_t>* ExitedWord(std::atomic<uint64_t>* exited) {
  return reinterpret_cast<std::atomic<uint32_t>*>(exited);
}

uint32_t ComputeNumSlots() {
  const uint32_t cpus = std::max(1u, std::thread::hardware_concurrency());
  uint32_t n = 1;
  while (n < cpus && n < ShardLock::kMaxSlots) n <<= 1;
  return n;
}

}  // namespace

uint32_t ShardLock::NumSlots() {
  static const uint32_t n = ComputeNumSlots();
  return n;
}

ShardLock::ShardLock() : slot_mask_(NumSlots() - 1), slots_(new Slot[NumSlots()]) {}

uint32_t ShardLock::AssignThreadSlot() {
  static std::atomic<uint32_t> next{0};
  tls_slot_ = next.fetch_add(1, std::memory_order_relaxed) & (kMaxSlots - 1);
  return tls_slot_;
}

uint64_t ShardLock::shared_acquisitions() const {
  // Exits first, then back-offs: a step back is counted in the back-offs before its exit, and
  // the acquire loads of the exits make those back-offs visible to the load below. So every
  // step back summed here is also subtracted, and the difference never runs ahead of the true
  // count (it may lag: back-offs whose exits came after the sum, clamped at 0).
  uint64_t n = 0;
  for (uint32_t i = 0; i <= slot_mask_; ++i) n += slots_[i].exited.load(std::memory_order_acquire);
  const uint64_t backoffs = reader_backoffs_.load(std::memory_order_relaxed);
  const uint64_t value = n > backoffs ? n - backoffs : 0;
  // Report the largest value seen: a lagging read never makes the counter step back (a
  // Prometheus counter that decreases reads as a reset). Exact when no reader is stepping back.
  uint64_t seen = max_reported_.load(std::memory_order_relaxed);
  while (seen < value &&
         !max_reported_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
  return std::max(seen, value);
}

void ShardLock::LockSharedSlow(uint32_t slot) {
  reader_waits_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[slot];
  for (;;) {
    // Step back so the writer can proceed (waking it if it sleeps on this slot). Counted as a
    // back-off before the exit (see shared_acquisitions()).
    reader_backoffs_.fetch_add(1, std::memory_order_relaxed);
    unlock_shared(slot);
    // Wait for the writer: spin on the flag a little, then queue on the writers' lock, which
    // sleeps in the kernel and is released when the writer is done.
    for (int i = 0; i < SpinLock::kSpinRounds &&
                    writer_.load(std::memory_order_relaxed) != kNoWriter;
         ++i) {
      CpuRelax();
    }
    if (writer_.load(std::memory_order_relaxed) != kNoWriter) {
      // Not counted as an exclusive acquisition or contention: reader_waits_ counted this wait.
      writer_lock_.WaitUntilFree();
    }
    s.entered.fetch_add(1, std::memory_order_seq_cst);
    if (writer_.load(std::memory_order_seq_cst) == kNoWriter) return;
  }
}

void ShardLock::WaitForReaders(uint32_t slot) {
  Slot& s = slots_[slot];
  for (int i = 0; i < SpinLock::kSpinRounds; ++i) {
    if (Drained(s)) return;
    CpuRelax();
  }
  // A reader holds on: it may have been preempted, so sleep rather than burn the CPU it needs.
  for (;;) {
    writer_.store(kWriterSleeping, std::memory_order_seq_cst);
    const uint64_t exited = s.exited.load(std::memory_order_seq_cst);
    if (s.entered.load(std::memory_order_seq_cst) == exited) break;
    // The release that empties the slot after the store above sees kWriterSleeping and wakes
    // us; one that came before it makes FUTEX_WAIT return at once (the word moved on).
    writer_sleeps_.fetch_add(1, std::memory_order_relaxed);
    Futex(ExitedWord(&s.exited), FUTEX_WAIT, static_cast<uint32_t>(exited));
  }
  // Readers' releases need not look for a sleeper any more.
  writer_.store(kWriterActive, std::memory_order_seq_cst);
}

void ShardLock::WakeWriterIfDrained(uint32_t slot) {
  // Only the release that leaves the slot empty wakes the writer: the others would wake it
  // for nothing. Read after this thread's own increment, like the writer's Drained().
  if (Drained(slots_[slot])) Futex(ExitedWord(&slots_[slot].exited), FUTEX_WAKE, 1);
}

}  // namespace qr
