#pragma once

// ShardedQueryMap::Get taken apart, for the single-thread cost breakdown of docs/benchmarks.md
// ("Where an uncontended Get's time goes"): GetCostMap<T, kUpTo> does the steps of the default
// Get up to 'kUpTo' and leaves the rest out, on the same shard layout and inner map:
//
//   kShard  shard selection (Fibonacci hash of 'hi', rotate, mask), find, copy-out
//   kSlot   + the reader slot choice (the CPU id from the thread's rseq area, masked)
//   kEnter  + the seq_cst fetch_add on the slot's 'entered' counter and the load of the writer
//           flag (the reader half of ShardLock's Dekker handshake)
//   kExit   + the seq_cst fetch_add on 'exited' and the second load of the flag: ShardLock's
//           whole reader path without its (never taken) slow paths
//
// and two probes of what a cheaper ShardLock reader could save (neither is thread-safe):
//
//   kExitPlain   kEnter, then 'exited' advanced by a plain load and store (no lock prefix):
//                the floor of a release committed per CPU through rseq, one locked RMW per Get
//   kExitPacked  kExit with each CPU's counters of all shards side by side (four shards per
//                line), so that a Get touches 16 KiB fewer lines over 256 shards
//   kBiased      a read-biased reader (asymmetric Dekker: a writer would pay a membarrier()):
//                load the shard's bias flag, store the shard into a thread-local hold word, a
//                compiler barrier only, load the flag again, find, copy out, clear the hold
//
// The differences between neighbours are what each step costs. Lookups only: Add and Delete
// take no lock (they run before the timing, single-threaded), so these variants are not
// thread-safe and only run the single-thread benchmarks.

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <glog/logging.h>

#include "util/shard-lock.h"
#include "util/sharded-query-map-util.h"
#include "util/unique-id.h"

namespace qr::bench {

enum class GetSteps { kShard, kSlot, kEnter, kExit, kExitPlain, kExitPacked, kBiased };

template <typename T, GetSteps kUpTo, typename Inner>
class GetCostMap {
 public:
  explicit GetCostMap(int num_shards)
      : pick_shard_(num_shards),
        shard_bits_(std::countr_zero(static_cast<uint64_t>(num_shards))),
        shards_(std::make_unique<Shard[]>(num_shards)),
        packed_(std::make_unique<PackedSlot[]>(static_cast<size_t>(num_shards) *
                                               ShardLock::NumSlots())) {}

  bool Add(const UniqueId& id, T v) { return ShardFor(id).map.try_emplace(id, v).second; }
  bool Delete(const UniqueId& id) { return ShardFor(id).map.erase(id) == 1; }

  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    const uint64_t index = ShardIndex(id);
    Shard& s = shards_[index];
    if constexpr (kUpTo == GetSteps::kBiased) {
      if (s.writer.load(std::memory_order_relaxed) == 0) [[unlikely]] LOG(FATAL) << "unbiased";
      tls_hold_.store(&s, std::memory_order_relaxed);
      asm volatile("" ::: "memory");
      if (s.writer.load(std::memory_order_relaxed) == 0) [[unlikely]] LOG(FATAL) << "unbiased";
      const bool found = Find(s, id, out);
      tls_hold_.store(nullptr, std::memory_order_release);
      return found;
    }
    uint32_t slot = 0;
    if constexpr (kUpTo >= GetSteps::kSlot) {
      slot = CurrentSlot(s);
      asm volatile("" : : "r"(slot));  // kSlot: computed and kept, as lock_shared() keeps it.
    }
    if constexpr (kUpTo == GetSteps::kExitPacked) {
      PackedSlot& p = packed_[(static_cast<uint64_t>(slot) << shard_bits_) + index];
      p.entered.fetch_add(1, std::memory_order_seq_cst);
      if (s.writer.load(std::memory_order_seq_cst) != 0) [[unlikely]] LOG(FATAL) << "writer";
      const bool found = Find(s, id, out);
      p.exited.fetch_add(1, std::memory_order_seq_cst);
      if (s.writer.load(std::memory_order_seq_cst) == 2) [[unlikely]] LOG(FATAL) << "writer";
      return found;
    }
    if constexpr (kUpTo >= GetSteps::kEnter) {
      s.slots[slot].entered.fetch_add(1, std::memory_order_seq_cst);
      if (s.writer.load(std::memory_order_seq_cst) != 0) [[unlikely]] LOG(FATAL) << "writer";
    }
    const bool found = Find(s, id, out);
    if constexpr (kUpTo == GetSteps::kExit) {
      s.slots[slot].exited.fetch_add(1, std::memory_order_seq_cst);
      if (s.writer.load(std::memory_order_seq_cst) == 2) [[unlikely]] LOG(FATAL) << "writer";
    } else if constexpr (kUpTo == GetSteps::kExitPlain) {
      auto& e = s.slots[slot].exited;
      e.store(e.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      if (s.writer.load(std::memory_order_relaxed) == 2) [[unlikely]] LOG(FATAL) << "writer";
    }
    return found;
  }

 private:
  /// kExitPacked: one CPU's counters of every shard side by side (four shards per line).
  struct PackedSlot {
    std::atomic<uint64_t> entered{0};
    std::atomic<uint64_t> exited{0};
  };
  struct alignas(64) Slot {
    std::atomic<uint64_t> entered{0};
    std::atomic<uint64_t> exited{0};
  };
  // ShardLock's fields that the reader path touches, then the map, as in ShardedQueryMap.
  struct alignas(128) Shard {
    // kBiased reads it as the bias flag (1: biased).
    std::atomic<uint32_t> writer{kUpTo == GetSteps::kBiased ? 1u : 0u};
    const uint32_t slot_mask = ShardLock::NumSlots() - 1;
    const std::unique_ptr<Slot[]> slots{new Slot[ShardLock::NumSlots()]};
    Inner map;
  };

  /// ShardLock::CurrentSlot(), copied (it is private there).
  [[gnu::always_inline]] static uint32_t CurrentSlot(const Shard& s) {
#ifdef QR_SHARD_LOCK_RSEQ
    if (__rseq_size != 0) [[likely]] {
      uintptr_t thread_pointer;
      asm("mov %%fs:0, %0" : "=r"(thread_pointer));
      const auto* cpu_id = reinterpret_cast<const uint32_t*>(
          thread_pointer + __rseq_offset + offsetof(struct rseq, cpu_id));
      return __atomic_load_n(cpu_id, __ATOMIC_RELAXED) & s.slot_mask;
    }
#endif
    return 0;
  }

  [[gnu::always_inline]] static bool Find(const Shard& s, const UniqueId& id, T* out) {
    auto it = s.map.find(id);
    const bool found = it != s.map.end();
    if (found) *out = it->second;
    return found;
  }
  uint64_t ShardIndex(const UniqueId& id) const {
    return pick_shard_(id.hi);
  }
  Shard& ShardFor(const UniqueId& id) const { return shards_[ShardIndex(id)]; }

  static inline thread_local constinit std::atomic<const Shard*> tls_hold_{nullptr};
  const FibonacciShardPicker pick_shard_;
  const int shard_bits_;
  std::unique_ptr<Shard[]> shards_;
  std::unique_ptr<PackedSlot[]> packed_;
};

}  // namespace qr::bench
