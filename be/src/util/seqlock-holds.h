#pragma once

// The holds SeqlockTagMap (seqlock-tag-map.h) can carry: a benchmark variant for issue 20,
// item 3, not the registry.
//
// SeqlockTagMap with holds (kHolds other than Holds::kNone): the registry's holds on top, to
// measure what keeping them costs a design whose Get stores nothing (docs/benchmarks.md, "Holds
// beside a Get that stores nothing"). VisitShared(id, fn) runs 'fn' with the entry held:
// no writer of the shard changes or removes it until 'fn' returns, as ShardedQueryMap's
// VisitShared (what QueryExecMgr takes its references under). Get is unchanged: it stores
// nothing and reads nothing the holds' machinery writes.
// - Holds::kSlots (SeqlockHoldMap): a holder registers in a per-CPU slot of the shard (two
//   counters on a line of their own, ShardLock's slot scheme); a writer, holding the shard's
//   SpinLock, raises a flag on that lock's own line and waits until every slot has drained. A
//   write costs one locked store on a line the writer already holds and a read of each slot's
//   line, which stays in the writer's cache while nobody holds the shard.
// - Holds::kShardLock (SeqlockShardLockMap): the registry's own ShardLock, unchanged: holds are
//   its shared side (read-biased while no writer comes, else a slot), writers take it
//   exclusively after the SpinLock (which the integrated design would not need: it costs one
//   uncontended acquisition on a line the writer writes anyway). A write then also raises and
//   lowers the flag of every reader slot, each on its own line.
//
// Thread-safety: thread-safe.

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "shard-lock.h"

namespace qr {

/// What SeqlockTagMap's holds (VisitShared) are built on, if it has them (see above).
enum class Holds { kNone, kSlots, kShardLock };

/// One CPU's holders of a shard (Holds::kSlots): counters that only grow, as ShardLock's slots;
/// entered - exited holders are inside.
struct alignas(64) HolderSlot {
  std::atomic<uint64_t> entered{0};
  std::atomic<uint64_t> exited{0};
};
/// A shard's holders and its writer's flag (Holds::kSlots). The flag is on the writers' line
/// (next to the SpinLock): holders read it once per hold, Get never.
struct SlotHolds {
  std::atomic<uint32_t> writer{0};
  uint32_t slot_mask = 0;
  std::unique_ptr<HolderSlot[]> slots;

  void Init() {
    slot_mask = ShardLock::NumSlots() - 1;
    slots = std::make_unique<HolderSlot[]>(slot_mask + 1);
  }
  /// Registers a holder in its CPU's slot (Dekker with RaiseAndDrain: seq_cst increment,
  /// then seq_cst load of the flag); steps back and waits while a writer is flagged.
  HolderSlot& Enter() const {
    // glibc >= 2.35 reads the CPU from the thread's rseq area: no system call.
    const int cpu = sched_getcpu();
    HolderSlot& slot = slots[static_cast<uint32_t>(cpu < 0 ? 0 : cpu) & slot_mask];
    for (uint32_t spins = 0;; ++spins) {
      slot.entered.fetch_add(1, std::memory_order_seq_cst);
      if (writer.load(std::memory_order_seq_cst) == 0) [[likely]] return slot;
      slot.exited.fetch_add(1, std::memory_order_seq_cst);  // Step back for the writer.
      while (writer.load(std::memory_order_acquire) != 0) {
        if (++spins >= 64) {
          std::this_thread::yield();  // A preempted writer.
        } else {
          __builtin_ia32_pause();
        }
      }
    }
  }
  /// Release: what the holder read happens before the next writer's changes.
  static void Exit(HolderSlot& slot) { slot.exited.fetch_add(1, std::memory_order_release); }
  /// Writer, holding the shard's SpinLock: flags, then waits until no holder is inside.
  void RaiseAndDrain() {
    writer.store(1, std::memory_order_seq_cst);
    for (uint32_t i = 0; i <= slot_mask; ++i) {
      const HolderSlot& slot = slots[i];
      for (uint32_t spins = 0;; ++spins) {
        // 'exited' first: an exit is counted after its entry, so equal counts mean nobody.
        const uint64_t exited = slot.exited.load(std::memory_order_seq_cst);
        if (slot.entered.load(std::memory_order_seq_cst) == exited) break;
        if (spins >= 64) {
          std::this_thread::yield();  // A preempted holder.
        } else {
          __builtin_ia32_pause();
        }
      }
    }
  }
  /// Release: the writer's changes happen before what a holder that sees it down reads.
  void Lower() { writer.store(0, std::memory_order_release); }
};

}  // namespace qr
