#include "util/shard-lock.h"

#include <algorithm>
#include <thread>

#include "util/futex.h"

namespace qr {
namespace {

using internal::CpuRelax;
using internal::Futex;

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
  uint64_t n = 0;
  for (uint32_t i = 0; i <= slot_mask_; ++i) n += slots_[i].reads.load(std::memory_order_relaxed);
  return n;
}

void ShardLock::LockSharedSlow(uint32_t slot) {
  reader_waits_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[slot];
  for (;;) {
    // Step back so the writer can proceed (waking it if it sleeps on this slot).
    unlock_shared(slot);
    // Wait for the writer: spin on the flag a little, then queue on the writers' lock, which
    // sleeps in the kernel and is released when the writer is done.
    for (int i = 0; i < SpinLock::kSpinRounds &&
                    writer_.load(std::memory_order_relaxed) != kNoWriter;
         ++i) {
      CpuRelax();
    }
    if (writer_.load(std::memory_order_relaxed) != kNoWriter) {
      writer_lock_.lock();
      writer_lock_.unlock();
    }
    s.readers.fetch_add(1, std::memory_order_seq_cst);
    if (writer_.load(std::memory_order_seq_cst) == kNoWriter) return;
  }
}

void ShardLock::WaitForReaders(uint32_t slot) {
  std::atomic<uint32_t>& readers = slots_[slot].readers;
  for (int i = 0; i < SpinLock::kSpinRounds; ++i) {
    if (readers.load(std::memory_order_acquire) == 0) return;
    CpuRelax();
  }
  // A reader holds on: it may have been preempted, so sleep rather than burn the CPU it needs.
  for (;;) {
    const uint32_t n = readers.load(std::memory_order_seq_cst);
    if (n == 0) break;
    writer_.store(kWriterSleeping, std::memory_order_seq_cst);
    // The reader that drops the count to 0 after this store sees kWriterSleeping and wakes us;
    // one that dropped it before makes FUTEX_WAIT return at once (the word is no longer 'n').
    if (readers.load(std::memory_order_seq_cst) == n) {
      writer_sleeps_.fetch_add(1, std::memory_order_relaxed);
      Futex(&readers, FUTEX_WAIT, n);
    }
  }
  // Readers' releases need not look for a sleeper any more.
  writer_.store(kWriterActive, std::memory_order_seq_cst);
}

void ShardLock::WakeWriter(uint32_t slot) { Futex(&slots_[slot].readers, FUTEX_WAKE, 1); }

}  // namespace qr
