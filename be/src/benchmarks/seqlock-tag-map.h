#pragma once

// SeqlockTagMap: a candidate registry design whose readers write nothing at all, over tables as
// compact as absl's (issue 20, items 2 and 3; docs/benchmarks.md, "Readers that write nothing,
// over tagged groups"). A benchmark variant, not the registry: ShardedQueryMap and ShardLock are
// unchanged.
//
// What it keeps from SeqlockMap (seqlock-map.h): shards chosen from 'hi' as ShardedQueryMap
// chooses them, writers serialised on a shard mutex that make the shard's version odd while they
// change its table, and readers that load the version (acquire), probe with acquire loads and
// retry if the version changed or was odd. What it changes:
//
// - Tables are type-stable instead of epoch-reclaimed: a table retired by a rehash goes to its
//   shard's pool and a later rehash of the same shard to that capacity reuses it; no table is
//   freed while the map lives. A reader still probing a retired (or reused) table reads atomics
//   of a table of the same shape, so every load stays in bounds, and the shard's version, bumped
//   by the retirement, makes it retry. So a reader announces nothing: no store at all.
//   The price is memory: a shard keeps at most two tables of each capacity below its current
//   one (a reused table is taken out of the pool), i.e. at most 3x its largest table.
// - Each table is absl's layout, written with atomics: one control byte per slot (0 empty,
//   1 deleted, 0x80 | 7 hash bits full) in 8-byte groups, and the slots (two key halves and the
//   value). A lookup loads one group word atomically, matches the tag in all eight bytes at once
//   (SSE2 on the loaded word), and compares the key of a matching slot; it stops at the first
//   group with an empty byte. Tables run up to 7/8 full, as absl's do, so they are no larger
//   than absl's and the probe's branches are as predictable (one group, one candidate, nearly
//   always). A delete in a group that still has an empty byte empties the slot instead of
//   leaving a tombstone (no probe ever went past that group), so churn rarely rehashes.
// - Writers of a shard serialise on a SpinLock (ShardLock's writer lock) on a line of its own,
//   so a writer's lock and unlock do not move the line readers read.
// - A reader's chain of dependent loads is as short as absl's: the shard's line gives the table
//   and its group mask (a copy beside the table pointer, published after it; tables only grow,
//   so a reader that loads the mask first never probes past the table it then loads), and a
//   table's control words (stored last first, below its header) and slots (above it) are at
//   fixed distances from the table pointer. So: shard line, control word, slot; the header is
//   never loaded on the way (docs/benchmarks.md, "Why the tag table's probe lost").
//
// On x86 every load and store here is a plain mov. Values: T must be a pointer, stored as its
// bits. Thread-safety: thread-safe.
//
// With holds (kHolds other than Holds::kNone; seqlock-holds.h): VisitShared(id, fn) runs 'fn'
// with the entry held, and Get is unchanged.

#include <emmintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "benchmarks/seqlock-holds.h"
#include "benchmarks/seqlock-map.h"
#include "util/check.h"
#include "util/shard-lock.h"
#include "util/spinlock.h"
#include "util/sharded-query-map-util.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr::bench {

/// RAII hold of a SpinLock, visible to the thread-safety analysis.
class QR_SCOPED_CAPABILITY SpinLockHold {
 public:
  explicit SpinLockHold(SpinLock* lock) QR_ACQUIRE(lock) : lock_(lock) { lock_->lock(); }
  ~SpinLockHold() QR_RELEASE() { lock_->unlock(); }
  SpinLockHold(const SpinLockHold&) = delete;
  SpinLockHold& operator=(const SpinLockHold&) = delete;

 private:
  SpinLock* const lock_;
};

/// kGroupSlots: slots per probe group, 8 (one control word) or 16 (two, absl's group width).
/// kPairProbe (8-slot groups only): a lookup loads and matches a group and the next one at
/// once, so an entry that overflowed into the next group costs no extra branch (the layout and
/// the writers are unchanged; docs/benchmarks.md, "Why the tag table's probe lost").
/// kOneLoad (with kPairProbe or 16-slot groups): a lookup reads its 16 control bytes with one
/// 16-byte load instead of two 8-byte atomic loads and a shuffle (docs/benchmarks.md, "Sixteen
/// control bytes in one load"). A pair's two words are adjacent in memory (the last group's
/// next one is a copy of the first's, kept by the writers below the last); a 16-slot group's
/// two words are 16-byte aligned. That load is an SSE move in inline assembly:
/// C++ has no 16-byte atomic load that is a plain move, and the probe needs each control byte
/// read whole (which every x86 load of it guarantees), not the 16 bytes at one instant (the
/// version check discards a torn view). Under ThreadSanitizer, which cannot see into the
/// assembly, the two atomic loads read the same two words.
/// kCells (with kPairProbe and kOneLoad): each group's control word sits in a 16-byte aligned
/// cell with a copy of the next group's beside it, so the pair's load never crosses a cache
/// line; twice the control bytes, and a writer stores each control word twice.
template <typename T, Holds kHolds = Holds::kNone, int kGroupSlots = 8, bool kPairProbe = false,
          int kMaxLoadEighths = 7, bool kOneLoad = false, bool kCells = false>
class SeqlockTagMap {
  static_assert(kGroupSlots == 8 || kGroupSlots == 16, "a group is one or two control words");
  static_assert(!kPairProbe || kGroupSlots == 8, "a pair probe reads two 8-slot groups");
  static_assert(!kOneLoad || kPairProbe || kGroupSlots == 16, "one load reads 16 bytes");
  static_assert(!kCells || (kPairProbe && kOneLoad), "cells hold pairs read in one load");
  static_assert(std::is_pointer_v<T>, "SeqlockTagMap stores pointers");

 public:
  /// 'num_shards': a power of two. 'initial_capacity': slots of each shard's first table
  /// (rounded up to a power of two >= 8, one group).
  explicit SeqlockTagMap(int num_shards, uint64_t initial_capacity = 8)
      : pick_shard_(num_shards),
        shards_(std::make_unique<Shard[]>(num_shards)),
        num_shards_(num_shards) {
    const uint64_t capacity = std::bit_ceil(std::max<uint64_t>(initial_capacity, kGroup));
    for (int i = 0; i < num_shards; ++i) {
      Table* t = Table::Create(capacity);
      shards_[i].table.store(t, std::memory_order_relaxed);
      shards_[i].mask.store(t->group_mask, std::memory_order_relaxed);
      if constexpr (kHolds == Holds::kSlots) shards_[i].holds.Init();
    }
  }
  /// No reader or writer may be running.
  ~SeqlockTagMap() {
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      SpinLockHold l(&s.mu);
      Table::Destroy(s.table.load(std::memory_order_relaxed));
      for (Table* t : s.pool) Table::Destroy(t);
    }
  }
  SeqlockTagMap(const SeqlockTagMap&) = delete;
  SeqlockTagMap& operator=(const SeqlockTagMap&) = delete;

  /// Copies the value of 'id' to '*out'; false if absent. Stores nothing.
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    const Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    bool found = false;
    uint64_t version = 0;
    if (!TryGet(s, id, h, out, &found, &version)) [[unlikely]] {
      return GetSlow(s, id, h, out, nullptr);
    }
    return found;
  }

  /// What Get(id, out, ticket) saw: its shard and version, for Unchanged().
  struct Ticket {
    const void* shard = nullptr;
    uint64_t version = 0;
  };
  /// Get that also returns a ticket, for callers that protect what they found before using it
  /// (hazard pointers): Unchanged(ticket) later says whether any writer has changed the shard
  /// since, i.e. whether the entry is certainly still registered. One load, no second probe.
  bool Get(const UniqueId& id, T* out, Ticket* ticket) const {
    const Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    bool found = false;
    uint64_t version = 0;
    if (!TryGet(s, id, h, out, &found, &version)) [[unlikely]] {
      return GetSlow(s, id, h, out, ticket);
    }
    *ticket = Ticket{&s, version};
    return found;
  }
  /// Acquire: ordered before the caller's later accesses to what it found.
  static bool Unchanged(const Ticket& t) {
    return static_cast<const Shard*>(t.shard)->version.load(std::memory_order_acquire) ==
           t.version;
  }

  /// Adds 'id' -> 'v'; false if 'id' is present.
  bool Add(const UniqueId& id, T v) {
    Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    WriterHold l(&s);
    Table* t = s.table.load(std::memory_order_relaxed);
    uint64_t pos = 0;
    if (t->FindSlot(id, h, &pos)) return false;
    if ((s.used + 1) * 8 > t->capacity() * kMaxLoadEighths) {  // Full, counting tombstones.
      uint64_t capacity = t->capacity();
      // absl's rule: grow (to at most 7/16 full) only past 25/32 live; below that, rehash at
      // the same capacity, which drops the tombstones. Scaled by kMaxLoadEighths / 7.
      while ((s.live + 1) * 32 * 7 > capacity * 25 * kMaxLoadEighths) capacity *= 2;
      t = Replace(s, capacity);
      t->FindSlot(id, h, &pos);
    }
    const bool was_empty = t->Ctrl(pos) == kEmptyCtrl;
    BeginWrite(s);
    t->Store(pos, id, std::bit_cast<uint64_t>(v), Tag(h));
    EndWrite(s);
    s.live++;
    if (was_empty) s.used++;
    return true;
  }

  /// Removes 'id'; false if absent.
  bool Delete(const UniqueId& id) {
    T unused{};
    return Delete(id, &unused);
  }
  /// Removes 'id' and copies the value it had to '*old'; false if absent.
  bool Delete(const UniqueId& id, T* old) {
    Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    WriterHold l(&s);
    Table* t = s.table.load(std::memory_order_relaxed);
    uint64_t pos = 0;
    if (!t->FindSlot(id, h, &pos)) return false;
    *old = std::bit_cast<T>(t->slots()[pos].value.load(std::memory_order_relaxed));
    // A group that still has an empty byte was never full (a slot once full only becomes
    // deleted), so no probe ever went past it: the slot can be empty again, not a tombstone.
    const bool never_full = t->GroupHasEmpty(pos);
    BeginWrite(s);
    t->SetCtrl(pos, never_full ? kEmptyCtrl : kDeletedCtrl);
    EndWrite(s);
    s.live--;
    if (never_full) s.used--;
    return true;
  }

  /// Calls 'fn(const T* value)' with the entry of 'id' held ('value' null if absent) and
  /// returns what 'fn' returns: until 'fn' returns, no writer changes or removes the entry
  /// (ShardedQueryMap::VisitShared). Holders of a shard run in parallel; a writer waits for
  /// them, and a holder that meets a writer waits for it. 'fn' must not call into the map.
  template <typename Fn>
  decltype(auto) VisitShared(const UniqueId& id, Fn&& fn) const
    requires(kHolds != Holds::kNone)
  {
    const Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    if constexpr (kHolds == Holds::kShardLock) {
      ReaderLockGuard hold(&s.holds);
      return FindAndCall(s, id, h, fn);
    } else {
      HolderSlot& slot = s.holds.Enter();
      struct Exit {
        HolderSlot& slot;
        ~Exit() { SlotHolds::Exit(slot); }
      } exit{slot};
      return FindAndCall(s, id, h, fn);
    }
  }

  /// Calls 'fn(value)' for every entry, each shard under its writer lock (no Add or Delete of
  /// that shard meanwhile; 'fn' must not call into the map).
  template <typename Fn>
  void ForEachValue(Fn fn) const {
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      SpinLockHold l(&s.mu);
      const Table* t = s.table.load(std::memory_order_relaxed);
      for (uint64_t pos = 0; pos < t->capacity(); ++pos) {
        if ((t->Ctrl(pos) & 0x80) == 0) continue;
        fn(std::bit_cast<T>(t->slots()[pos].value.load(std::memory_order_relaxed)));
      }
    }
  }

  /// tables_freed stays 0: retired tables are pooled (tables_pooled) or reused (tables_reused).
  SeqlockMapStats Stats() const {
    SeqlockMapStats st;
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      SpinLockHold l(&s.mu);
      st.tables_retired += s.tables_retired;
      st.tables_reused += s.tables_reused;
      st.tables_pooled += s.pool.size();
      st.entries += s.live;
    }
    return st;
  }

 private:
  static constexpr uint64_t kGroup = kGroupSlots;
  /// Control words (8 bytes, 8 slots each) per group.
  static constexpr uint64_t kWords = kGroup / 8;
  /// The low bits of movemask that belong to a group (an 8-slot group fills half a register).
  static constexpr uint32_t kGroupBits = kGroup == 8 ? 0xff : 0xffff;
  static constexpr uint64_t kEmptyCtrl = 0;
  static constexpr uint64_t kDeletedCtrl = 1;
  static constexpr uint64_t kLsb = 0x0101010101010101ULL;
  static constexpr uint64_t kMsb = 0x8080808080808080ULL;

  /// The control byte of a full slot: the top 7 bits of the hash (the low bits pick the group).
  static uint64_t Tag(uint64_t h) { return 0x80 | (h >> 57); }
  /// 0x80 in every byte of 'w' that is zero, 0 elsewhere (exact: no carries between bytes).
  [[gnu::always_inline]] static uint64_t ZeroBytes(uint64_t w) {
    return ~(((w & ~kMsb) + ~kMsb) | w | ~kMsb);
  }

  /// A table: the control words (last first), its header (group mask), then the slots, in one
  /// allocation; a Table* points at the header.
  struct Table {
    struct Slot {
      std::atomic<uint64_t> hi{0};
      std::atomic<uint64_t> lo{0};
      std::atomic<uint64_t> value{0};
    };
    uint64_t group_mask;  // Never changes: a stale reader's probe stays in bounds.
    uint64_t padding;

    /// The allocation: the control words, last first, then the header, then the slots. So
    /// both a control word (Word) and a slot are at a fixed distance from the header, whatever
    /// the capacity: a reader addresses them without loading the header.
    static Table* Create(uint64_t capacity) {
      const uint64_t groups = capacity / kGroup;
      auto* mem = static_cast<char*>(::operator new(Bytes(capacity), std::align_val_t{64}));
      auto* t = new (mem + CtrlBytes(capacity)) Table{groups - 1, 0};
      for (uint64_t i = 0; i < CtrlWords(capacity); ++i) new (&t->Word(i)) std::atomic<uint64_t>(0);
      for (uint64_t i = 0; i < capacity; ++i) new (&t->slots()[i]) Slot;
      return t;
    }
    static void Destroy(Table* t) {
      static_assert(std::is_trivially_destructible_v<Slot>);
      ::operator delete(reinterpret_cast<char*>(t) - CtrlBytes(t->capacity()),
                        std::align_val_t{64});
    }
    /// A pair in one load reads one more word: the copy of word 0 below the last
    /// (Word(group_mask + 1)).
    static constexpr bool kPairCopy = kOneLoad && kPairProbe && !kCells;
    static uint64_t CtrlWords(uint64_t capacity) {
      return kCells ? capacity / 8 * 2 : capacity / 8 + (kPairCopy ? 1 : 0);
    }
    static uint64_t CtrlBytes(uint64_t capacity) { return CtrlWords(capacity) * sizeof(uint64_t); }
    static uint64_t Bytes(uint64_t capacity) {
      return CtrlBytes(capacity) + sizeof(Table) + capacity * sizeof(Slot);
    }
    uint64_t capacity() const { return (group_mask + 1) * kGroup; }
    /// Control word 'i' (slots 8i to 8i + 7), below the header.
    [[gnu::always_inline]] std::atomic<uint64_t>& Word(uint64_t i) {
      return reinterpret_cast<std::atomic<uint64_t>*>(this)[-1 - static_cast<int64_t>(i)];
    }
    [[gnu::always_inline]] const std::atomic<uint64_t>& Word(uint64_t i) const {
      return reinterpret_cast<const std::atomic<uint64_t>*>(this)[-1 - static_cast<int64_t>(i)];
    }
    /// The control word of slots 8i to 8i + 7 (Word(i), or with kCells the high half of cell i,
    /// whose low half, Word(2i + 1), is the copy of the next group's).
    [[gnu::always_inline]] std::atomic<uint64_t>& OwnWord(uint64_t i) {
      return Word(kCells ? 2 * i : i);
    }
    [[gnu::always_inline]] const std::atomic<uint64_t>& OwnWord(uint64_t i) const {
      return Word(kCells ? 2 * i : i);
    }
    Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
    const Slot* slots() const { return reinterpret_cast<const Slot*>(this + 1); }
    /// Words i + 1 (low half) and i (high half), which lie in that order in memory, in one
    /// 16-byte load (kOneLoad). It is an SSE move in inline assembly, with a "memory" clobber:
    /// a compiler barrier, as the acquire loads it replaces are (x86 orders the load itself),
    /// so nothing moves across it, the version loads included. Under ThreadSanitizer, two
    /// atomic loads of the same words.
    [[gnu::always_inline]] __m128i Load16(uint64_t i) const {
#if defined(__x86_64__) && !defined(QR_SHARD_LOCK_TSAN)
      __m128i w;
      asm volatile("movdqu %1, %0"
                   : "=x"(w)
                   : "m"(*reinterpret_cast<const char(*)[16]>(&Word(i + 1)))
                   : "memory");
      return w;
#else
      const uint64_t hi = Word(i).load(std::memory_order_acquire);
      const uint64_t lo = Word(i + 1).load(std::memory_order_acquire);
      return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
#endif
    }

    /// Group 'g''s control bytes in a register, each word loaded atomically (acquire); an
    /// 8-slot group leaves the upper half zero. kOneLoad (16-slot groups): one 16-byte load,
    /// the group's second word in the low half.
    [[gnu::always_inline]] __m128i LoadGroup(uint64_t g) const {
      if constexpr (kOneLoad) {
        return Load16(2 * g);
      } else if constexpr (kWords == 1) {
        return _mm_cvtsi64_si128(
            static_cast<int64_t>(OwnWord(g).load(std::memory_order_acquire)));
      } else {
        const uint64_t lo = Word(2 * g).load(std::memory_order_acquire);
        const uint64_t hi = Word(2 * g + 1).load(std::memory_order_acquire);
        return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
      }
    }

    /// The reader's probe: acquire loads, at most every group once (a torn view of a table
    /// being written may have no empty byte; the caller's version check discards the result).
    /// 'mask': a group mask no larger than this table's (the shard's 'mask', see Shard).
    [[gnu::always_inline]] bool Find(uint64_t mask, const UniqueId& id, uint64_t h,
                                     uint64_t* value) const {
      // The tag in every byte (never 0: an 8-slot group's zero upper half matches nothing).
      const __m128i tag = _mm_set1_epi8(static_cast<char>(Tag(h)));
      if constexpr (kPairProbe) return FindInPairs(mask, id, tag, h, value);
      const Slot* s = slots();
      uint64_t g = h & mask;
      for (uint64_t n = 0; n <= mask; ++n, g = (g + 1) & mask) {
        // The group's control words, loaded atomically, then matched in all bytes at once.
        const __m128i w = LoadGroup(g);
        uint32_t matches = _mm_movemask_epi8(_mm_cmpeq_epi8(w, tag)) & kGroupBits;
        // kOneLoad: the low byte is the group's second word's; one rotation puts slot i at bit i.
        if constexpr (kOneLoad) matches = std::rotl(static_cast<uint16_t>(matches), 8);
        for (uint32_t m = matches; m != 0; m &= m - 1) {
          const Slot& slot = s[g * kGroup + std::countr_zero(m)];
          if (slot.hi.load(std::memory_order_acquire) == id.hi &&
              slot.lo.load(std::memory_order_acquire) == id.lo) [[likely]] {
            *value = slot.value.load(std::memory_order_acquire);
            return true;
          }
        }
        // An empty byte in the group (an 8-slot group's zero upper half is masked off).
        if ((_mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_setzero_si128())) & kGroupBits) != 0)
            [[likely]] {
          return false;
        }
      }
      return false;
    }

    /// Find, two 8-slot groups at a time: groups g and g + 1 in one register and one match.
    /// The writers place an entry in the first group of its sequence with a free slot, so an
    /// entry is at or before the first group with an empty byte: when g or g + 1 has one, the
    /// entry is in one of them or absent. A match in g + 1 while g has an empty byte is still
    /// exact (the key is compared). With one group, g + 1 is g: its matches are tried twice.
    [[gnu::always_inline]] bool FindInPairs(uint64_t mask, const UniqueId& id, __m128i tag,
                                            uint64_t h, uint64_t* value) const {
      const Slot* s = slots();
      const uint64_t slot_mask = mask * kGroup + (kGroup - 1);
      uint64_t g = h & mask;
      for (uint64_t n = 0; n <= mask; n += 2) {
        const uint64_t next = (g + 1) & mask;
        const __m128i w = LoadPair(g, next);
        uint32_t matches = _mm_movemask_epi8(_mm_cmpeq_epi8(w, tag));
        // kOneLoad: the low byte is group g + 1's (its word lies below g's); one rotation puts
        // g's candidates first, as without it.
        if constexpr (kOneLoad) matches = std::rotl(static_cast<uint16_t>(matches), 8);
        for (uint32_t m = matches; m != 0; m &= m - 1) {
          // Bit i < 8: slot i of g; bit i >= 8: slot i - 8 of g + 1 (wrapped with the table).
          const Slot& slot = s[(g * kGroup + std::countr_zero(m)) & slot_mask];
          if (slot.hi.load(std::memory_order_acquire) == id.hi &&
              slot.lo.load(std::memory_order_acquire) == id.lo) [[likely]] {
            *value = slot.value.load(std::memory_order_acquire);
            return true;
          }
        }
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_setzero_si128())) != 0) [[likely]] {
          return false;
        }
        g = (next + 1) & mask;
      }
      return false;
    }

    /// Groups g and 'next' (g + 1, wrapped with the table) in a register. kOneLoad: word g + 1
    /// in the low half, g in the high, read by one 16-byte load from word g + 1 (for the last
    /// group, g + 1 is the copy of word 0 below it); otherwise g low, g + 1 high, two atomic
    /// loads. 'g' at most the reader's mask, which is at most this table's group mask.
    [[gnu::always_inline]] __m128i LoadPair(uint64_t g, [[maybe_unused]] uint64_t next) const {
      if constexpr (kCells) {
        return Load16(2 * g);
      } else if constexpr (kOneLoad) {
        return Load16(g);
      } else {
        const uint64_t lo = Word(g).load(std::memory_order_acquire);
        const uint64_t hi = Word(next).load(std::memory_order_acquire);
        return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
      }
    }

    /// The writer's probe (under the shard mutex): true and the slot of 'id' if present,
    /// otherwise false and the slot to insert into (the first deleted or empty one).
    bool FindSlot(const UniqueId& id, uint64_t h, uint64_t* pos) {
      const uint64_t pattern = kLsb * Tag(h);
      uint64_t first_free = UINT64_MAX;
      uint64_t g = h & group_mask;
      for (uint64_t n = 0; n <= group_mask; ++n, g = (g + 1) & group_mask) {
        bool has_empty = false;
        for (uint64_t word = g * kWords; word < (g + 1) * kWords; ++word) {
          const uint64_t w = OwnWord(word).load(std::memory_order_relaxed);
          for (uint64_t m = ZeroBytes(w ^ pattern); m != 0; m &= m - 1) {
            const uint64_t i = word * 8 + (std::countr_zero(m) >> 3);
            if (slots()[i].hi.load(std::memory_order_relaxed) == id.hi &&
                slots()[i].lo.load(std::memory_order_relaxed) == id.lo) {
              *pos = i;
              return true;
            }
          }
          const uint64_t free = ZeroBytes(w) | ZeroBytes(w ^ (kLsb * kDeletedCtrl));
          if (first_free == UINT64_MAX && free != 0) {
            first_free = word * 8 + (std::countr_zero(free) >> 3);
          }
          has_empty |= ZeroBytes(w) != 0;
        }
        // The reader stops at the first group with an empty byte, so the writer does too.
        if (has_empty) break;
      }
      *pos = first_free;  // Never UINT64_MAX: Add keeps 1/8 of the slots empty.
      return false;
    }

    bool GroupHasEmpty(uint64_t pos) const {
      const uint64_t first = pos / kGroup * kWords;
      for (uint64_t word = first; word < first + kWords; ++word) {
        if (ZeroBytes(OwnWord(word).load(std::memory_order_relaxed)) != 0) return true;
      }
      return false;
    }
    uint64_t Ctrl(uint64_t pos) const {
      return (OwnWord(pos / 8).load(std::memory_order_relaxed) >> (pos % 8 * 8)) & 0xff;
    }
    /// Release stores: a reader that sees one also sees the odd version before it.
    void SetCtrl(uint64_t pos, uint64_t byte) {
      std::atomic<uint64_t>& word = OwnWord(pos / 8);
      const unsigned shift = pos % 8 * 8;
      const uint64_t w = (word.load(std::memory_order_relaxed) & ~(uint64_t{0xff} << shift)) |
                         (byte << shift);
      word.store(w, std::memory_order_release);
      // The copy that the last group's pair reads (kPairCopy).
      if (kPairCopy && pos < 8) Word(group_mask + 1).store(w, std::memory_order_release);
      // The copy in the previous group's cell (kCells).
      if (kCells) Word(2 * ((pos / 8 - 1) & group_mask) + 1).store(w, std::memory_order_release);
    }
    void Store(uint64_t pos, const UniqueId& id, uint64_t value, uint64_t tag) {
      slots()[pos].hi.store(id.hi, std::memory_order_release);
      slots()[pos].lo.store(id.lo, std::memory_order_release);
      slots()[pos].value.store(value, std::memory_order_release);
      SetCtrl(pos, tag);
    }
  };

  struct NoHolds {};
  using HoldsOf = std::conditional_t<
      kHolds == Holds::kSlots, SlotHolds,
      std::conditional_t<kHolds == Holds::kShardLock, ShardLock, NoHolds>>;

  struct Shard;
  /// VisitShared's lookup, with the entry held (no writer inside the shard).
  template <typename Fn>
  static decltype(auto) FindAndCall(const Shard& s, const UniqueId& id, uint64_t h, Fn& fn) {
    uint64_t bits = 0;
    // Relaxed loads would do (no writer is inside); the table's are acquire loads anyway.
    const bool hit = s.table.load(std::memory_order_relaxed)->Find(
        s.mask.load(std::memory_order_relaxed), id, h, &bits);
    const T value = std::bit_cast<T>(bits);
    return fn(hit ? &value : static_cast<const T*>(nullptr));
  }

  /// The line readers read (version, table pointer), then the writers' line.
  struct alignas(64) Shard {
    std::atomic<uint64_t> version{0};
    std::atomic<Table*> table{nullptr};
    /// table's group mask, published after it: a reader that loads it first and then the
    /// table probes groups that table has, without loading its header first.
    std::atomic<uint64_t> mask{0};
    alignas(64) mutable SpinLock mu;
    [[no_unique_address]] mutable HoldsOf holds;
    uint64_t live QR_GUARDED_BY(mu) = 0;
    /// Live entries and deleted slots of 'table'.
    uint64_t used QR_GUARDED_BY(mu) = 0;
    uint64_t tables_retired QR_GUARDED_BY(mu) = 0;
    uint64_t tables_reused QR_GUARDED_BY(mu) = 0;
    /// Retired tables, for reuse by a later rehash of this shard; freed with the map.
    std::vector<Table*> pool QR_GUARDED_BY(mu);
  };

  /// A writer's hold of a shard: its SpinLock, and with kHolds no holder inside.
  class QR_SCOPED_CAPABILITY WriterHold {
   public:
    explicit WriterHold(Shard* s) QR_ACQUIRE(s->mu) : s_(s) {
      s_->mu.lock();
      if constexpr (kHolds == Holds::kSlots) s_->holds.RaiseAndDrain();
      if constexpr (kHolds == Holds::kShardLock) s_->holds.lock();
    }
    ~WriterHold() QR_RELEASE() {
      if constexpr (kHolds == Holds::kSlots) s_->holds.Lower();
      if constexpr (kHolds == Holds::kShardLock) s_->holds.unlock();
      s_->mu.unlock();
    }
    WriterHold(const WriterHold&) = delete;
    WriterHold& operator=(const WriterHold&) = delete;

   private:
    Shard* const s_;
  };

  /// One optimistic read: false if a writer was inside (the version odd or changed); on
  /// success '*version' is the version the read saw.
  [[gnu::always_inline]] static bool TryGet(const Shard& s, const UniqueId& id, uint64_t h,
                                            T* out, bool* found, uint64_t* version) {
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if ((v1 & 1) != 0) return false;
    // The mask before the table (both acquire): a writer publishes the table first, so the
    // mask is never larger than the table's (tables only grow: Replace).
    const uint64_t mask = s.mask.load(std::memory_order_acquire);
    const Table* t = s.table.load(std::memory_order_acquire);
    uint64_t value = 0;
    const bool hit = t->Find(mask, id, h, &value);
    // Relaxed: ordered after the probe's acquire loads (a reader that saw any store of a later
    // write sees that write's odd version here).
    if (s.version.load(std::memory_order_relaxed) != v1) return false;
    if (hit) *out = std::bit_cast<T>(value);
    *found = hit;
    *version = v1;
    return true;
  }
  /// Retries until a read sees no writer, out of line (it keeps the fast path's registers
  /// free); fills '*ticket' unless null.
  [[gnu::noinline]] static bool GetSlow(const Shard& s, const UniqueId& id, uint64_t h, T* out,
                                        Ticket* ticket) {
    for (uint32_t spins = 0;; ++spins) {
      if (spins >= 64) {
        std::this_thread::yield();  // A preempted writer holds the version odd.
      } else {
        __builtin_ia32_pause();
      }
      bool found = false;
      uint64_t version = 0;
      if (TryGet(s, id, h, out, &found, &version)) {
        if (ticket != nullptr) *ticket = Ticket{&s, version};
        return found;
      }
    }
  }

  static void BeginWrite(Shard& s) QR_REQUIRES(s.mu) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  static void EndWrite(Shard& s) QR_REQUIRES(s.mu) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  /// Copies the live entries into a table of 'capacity' slots (a pooled one if the shard has
  /// one of that size), publishes it and pools the old one.
  Table* Replace(Shard& s, uint64_t capacity) QR_REQUIRES(s.mu) {
    Table* old = s.table.load(std::memory_order_relaxed);
    // Readers rely on it (Shard::mask): a shard's tables never shrink.
    QR_DCHECK(capacity >= old->capacity(), "a shard's table shrinks");
    Table* t = nullptr;
    for (size_t i = 0; i < s.pool.size(); ++i) {
      if (s.pool[i]->capacity() != capacity) continue;
      t = s.pool[i];
      s.pool.erase(s.pool.begin() + static_cast<std::ptrdiff_t>(i));
      // Release stores: a stale reader still in this table that sees one also sees the
      // version bump that retired it, and retries.
      for (uint64_t i = 0; i < Table::CtrlWords(capacity); ++i) {
        t->Word(i).store(0, std::memory_order_release);
      }
      s.tables_reused++;
      break;
    }
    if (t == nullptr) t = Table::Create(capacity);
    for (uint64_t i = 0; i < old->capacity(); ++i) {
      if ((old->Ctrl(i) & 0x80) == 0) continue;
      const UniqueId id{old->slots()[i].hi.load(std::memory_order_relaxed),
                        old->slots()[i].lo.load(std::memory_order_relaxed)};
      const uint64_t h = UniqueIdHash()(id);
      uint64_t pos = 0;
      t->FindSlot(id, h, &pos);
      t->Store(pos, id, old->slots()[i].value.load(std::memory_order_relaxed), Tag(h));
    }
    BeginWrite(s);
    s.table.store(t, std::memory_order_release);
    s.mask.store(t->group_mask, std::memory_order_release);
    EndWrite(s);
    s.used = s.live;
    s.pool.push_back(old);
    s.tables_retired++;
    return t;
  }

  [[gnu::always_inline]] const Shard& ShardFor(const UniqueId& id) const {
    return shards_[pick_shard_(id.hi)];
  }
  Shard& ShardFor(const UniqueId& id) {
    return shards_[pick_shard_(id.hi)];
  }

  const FibonacciShardPicker pick_shard_;
  const std::unique_ptr<Shard[]> shards_;
  const int num_shards_;
};

}  // namespace qr::bench
