#pragma once

// SeqlockTagTable: the table of SeqlockTagMap (seqlock-tag-map.h), its layout and its probes
// (issue 20, item 3). QueryExecMgr uses absl's windows (seqlock-window-table.h, built on this
// file's TagTableBase); the group probes here are the variants the benchmarks compare.
//
// absl's layout written with atomics: one control byte per slot (0 empty, 1 deleted, 0x80 | 7
// hash bits full) in 8-byte words, a group of 8 or 16 slots per probe step, and the slots (two
// key halves and the value's bits). The control words (last first), a header (the group mask)
// and the slots share one allocation, and a table pointer points at the header: a control word
// and a slot are at fixed distances from it, so a reader addresses them without loading the
// header. Readers (Find) use acquire loads and may see a torn table (the map's version check
// discards what they found then); writers (FindSlot, Store, SetCtrl) hold the shard's lock.
//
// The probes (Probe, a template argument) are the variants docs/benchmarks.md measures against
// each other: "Why the tag table's probe lost", "Sixteen control bytes in one load" and "The
// home group first". Thread-safety: Find is safe against one writer; the rest is the writer's.

#include <emmintrin.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <new>
#include <type_traits>

#include "shard-lock.h"  // QR_SHARD_LOCK_TSAN
#include "unique-id.h"

namespace qr {

/// Counters of a seqlock map: SeqlockTagMap and the benchmarks' SeqlockMap (exact when read;
/// not a consistent snapshot across shards).
struct SeqlockMapStats {
  uint64_t tables_retired = 0;
  uint64_t tables_freed = 0;
  /// Type-stable tables: retired ones taken back by a rehash, and the ones waiting in pools.
  uint64_t tables_reused = 0;
  uint64_t tables_pooled = 0;
  uint64_t entries = 0;
};

/// How a lookup walks the groups. The pair probes need 8-slot groups: an entry that overflowed
/// its home group into the next one costs no second step (the writers place an entry in the
/// first group of its sequence with a free slot, so it is at or before the first group with an
/// empty byte).
enum class Probe {
  /// A group per step, its control word(s) loaded atomically (a 16-slot group: two loads).
  kGroups,
  /// 16-slot groups (16-byte aligned) in one 16-byte load.
  kGroupsOneLoad,
  /// Two 8-slot groups per step, matched at once; two atomic loads joined in a register.
  kPairs,
  /// The pair in one 16-byte load: a group's word and the next one's lie side by side (the
  /// last group's next one is a copy of word 0, kept below the last by the writers).
  kPairsOneLoad,
  /// The pair in one load from 16-byte aligned cells: each group's word with a copy of the
  /// next one's beside it, so the load never crosses a cache line (twice the control bytes).
  kPairsInCells,
  /// kPairsOneLoad's load and layout, but the home group is matched first, alone, and the
  /// next one from the same register only when the home group has no empty byte.
  kPairsHomeFirst,
  /// absl's probe (SeqlockWindowTable, seqlock-window-table.h): 16 control bytes from the key's
  /// own slot on, one byte per slot in slot order, so a window starts at any slot.
  kWindows,
};

/// What every tag table shares: the control bytes' values and a slot.
struct TagTableBase {
  static constexpr uint64_t kEmptyCtrl = 0;
  static constexpr uint64_t kDeletedCtrl = 1;
  /// The control byte of a full slot: the top 7 bits of the hash (the low bits pick the group).
  static uint64_t Tag(uint64_t h) { return 0x80 | (h >> 57); }
  struct Slot {
    std::atomic<uint64_t> hi{0};
    std::atomic<uint64_t> lo{0};
    std::atomic<uint64_t> value{0};
    /// Release stores, before the control byte's: a reader that sees the byte sees these.
    void Fill(const UniqueId& id, uint64_t v) {
      hi.store(id.hi, std::memory_order_release);
      lo.store(id.lo, std::memory_order_release);
      value.store(v, std::memory_order_release);
    }
  };
};

template <int kGroupSlots, Probe kProbe>
struct SeqlockTagTable : TagTableBase {
  static_assert(kGroupSlots == 8 || kGroupSlots == 16, "a group is one or two control words");
  static constexpr bool kPairProbe = kProbe == Probe::kPairs || kProbe == Probe::kPairsOneLoad ||
                                     kProbe == Probe::kPairsInCells ||
                                     kProbe == Probe::kPairsHomeFirst;
  static_assert(!kPairProbe || kGroupSlots == 8, "a pair probe reads two 8-slot groups");
  static_assert(kProbe != Probe::kGroupsOneLoad || kGroupSlots == 16, "one load reads 16 bytes");
  /// The 16 control bytes a step matches come from one 16-byte load (Load16).
  static constexpr bool kOneLoad = kProbe != Probe::kGroups && kProbe != Probe::kPairs;
  static constexpr bool kCells = kProbe == Probe::kPairsInCells;
  /// A pair in one load reads one more word: the copy of word 0 below the last
  /// (Word(group_mask + 1)).
  static constexpr bool kPairCopy = kOneLoad && kPairProbe && !kCells;

  static constexpr uint64_t kGroup = kGroupSlots;
  /// Control words (8 bytes, 8 slots each) per group.
  static constexpr uint64_t kWords = kGroup / 8;
  /// The low bits of movemask that belong to a group (an 8-slot group fills half a register).
  static constexpr uint32_t kGroupBits = kGroup == 8 ? 0xff : 0xffff;
  static constexpr uint64_t kLsb = 0x0101010101010101ULL;
  static constexpr uint64_t kMsb = 0x8080808080808080ULL;

  /// 0x80 in every byte of 'w' that is zero, 0 elsewhere (exact: no carries between bytes).
  [[gnu::always_inline]] static uint64_t ZeroBytes(uint64_t w) {
    return ~(((w & ~kMsb) + ~kMsb) | w | ~kMsb);
  }

  uint64_t group_mask;  // Never changes: a stale reader's probe stays in bounds.
  uint64_t padding;

  /// The allocation: the control words, last first, then the header, then the slots. So
  /// both a control word (Word) and a slot are at a fixed distance from the header, whatever
  /// the capacity: a reader addresses them without loading the header.
  static SeqlockTagTable* Create(uint64_t capacity) {
    const uint64_t groups = capacity / kGroup;
    auto* mem = static_cast<char*>(::operator new(Bytes(capacity), std::align_val_t{64}));
    auto* t = new (mem + CtrlBytes(capacity)) SeqlockTagTable{{}, groups - 1, 0};
    for (uint64_t i = 0; i < CtrlWords(capacity); ++i) new (&t->Word(i)) std::atomic<uint64_t>(0);
    for (uint64_t i = 0; i < capacity; ++i) new (&t->slots()[i]) Slot;
    return t;
  }
  static void Destroy(SeqlockTagTable* t) {
    static_assert(std::is_trivially_destructible_v<Slot>);
    ::operator delete(reinterpret_cast<char*>(t) - CtrlBytes(t->capacity()),
                      std::align_val_t{64});
  }
  static uint64_t CtrlWords(uint64_t capacity) {
    return kCells ? capacity / 8 * 2 : capacity / 8 + (kPairCopy ? 1 : 0);
  }
  static uint64_t CtrlBytes(uint64_t capacity) { return CtrlWords(capacity) * sizeof(uint64_t); }
  static uint64_t Bytes(uint64_t capacity) {
    return CtrlBytes(capacity) + sizeof(SeqlockTagTable) + capacity * sizeof(Slot);
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
  /// so nothing moves across it, the version loads included. C++ has no 16-byte atomic load
  /// that is a plain move, and the probe needs each control byte read whole (which every x86
  /// load of it guarantees), not the 16 bytes at one instant (the map's version check discards
  /// a torn view). Under ThreadSanitizer, which cannot see into the assembly, two atomic loads
  /// of the same words.
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
      return _mm_cvtsi64_si128(static_cast<int64_t>(OwnWord(g).load(std::memory_order_acquire)));
    } else {
      const uint64_t lo = Word(2 * g).load(std::memory_order_acquire);
      const uint64_t hi = Word(2 * g + 1).load(std::memory_order_acquire);
      return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
    }
  }

  /// The reader's probe: acquire loads, at most every group once (a torn view of a table
  /// being written may have no empty byte; the caller's version check discards the result).
  /// 'mask': a group mask no larger than this table's (the shard's 'mask', see the map's
  /// Shard).
  [[gnu::always_inline]] bool Find(uint64_t mask, const UniqueId& id, uint64_t h,
                                   uint64_t* value) const {
    // The tag in every byte (never 0: an 8-slot group's zero upper half matches nothing).
    const __m128i tag = _mm_set1_epi8(static_cast<char>(Tag(h)));
    if constexpr (kProbe == Probe::kPairsHomeFirst) {
      return FindHomeFirst(mask, id, tag, h, value);
    } else if constexpr (kPairProbe) {
      return FindInPairs(mask, id, tag, h, value);
    }
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
  /// An entry is at or before the first group with an empty byte: when g or g + 1 has one,
  /// the entry is in one of them or absent. A match in g + 1 while g has an empty byte is
  /// still exact (the key is compared). With one group, g + 1 is g: its matches are tried twice.
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

  /// kPairsHomeFirst: the pair's 16 bytes in one load (group g + 1 in the low half, g in the
  /// high), matched at once; then group g's candidates and empty bytes alone, as the plain
  /// probe does, and group g + 1's, from the same register, only when g has no empty byte. So
  /// the common path has the plain probe's index arithmetic (no rotation, no wrap) and a key
  /// that overflowed into g + 1 costs no second load.
  [[gnu::always_inline]] bool FindHomeFirst(uint64_t mask, const UniqueId& id, __m128i tag,
                                            uint64_t h, uint64_t* value) const {
    const Slot* s = slots();
    uint64_t g = h & mask;
    for (uint64_t n = 0; n <= mask; n += 2) {
      const uint64_t next = (g + 1) & mask;
      // For g == mask the low half is the copy of word 0 (or, with a stale mask smaller than
      // this table's, another group's word: in bounds, and the version check discards it).
      const __m128i w = Load16(g);
      const uint32_t matches = _mm_movemask_epi8(_mm_cmpeq_epi8(w, tag));
      const uint32_t empties = _mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_setzero_si128()));
      for (uint32_t m = matches >> 8; m != 0; m &= m - 1) {
        const Slot& slot = s[g * kGroup + std::countr_zero(m)];
        if (slot.hi.load(std::memory_order_acquire) == id.hi &&
            slot.lo.load(std::memory_order_acquire) == id.lo) [[likely]] {
          *value = slot.value.load(std::memory_order_acquire);
          return true;
        }
      }
      if ((empties >> 8) != 0) [[likely]] return false;
      for (uint32_t m = matches & 0xff; m != 0; m &= m - 1) {
        const Slot& slot = s[next * kGroup + std::countr_zero(m)];
        if (slot.hi.load(std::memory_order_acquire) == id.hi &&
            slot.lo.load(std::memory_order_acquire) == id.lo) [[likely]] {
          *value = slot.value.load(std::memory_order_acquire);
          return true;
        }
      }
      if ((empties & 0xff) != 0) return false;
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

  /// Whether deleting the entry at 'pos' may leave its slot empty instead of a tombstone: its
  /// group still has an empty byte, so it was never full and no probe ever went past it.
  bool NeverFull(uint64_t pos) const {
    const uint64_t first = pos / kGroup * kWords;
    for (uint64_t word = first; word < first + kWords; ++word) {
      if (ZeroBytes(OwnWord(word).load(std::memory_order_relaxed)) != 0) return true;
    }
    return false;
  }
  /// Empties every control byte of a pooled table before its reuse. Release stores: a stale
  /// reader still in this table that sees one also sees the version bump that retired it.
  void ClearCtrl() {
    for (uint64_t i = 0; i < CtrlWords(capacity()); ++i) {
      Word(i).store(0, std::memory_order_release);
    }
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
    slots()[pos].Fill(id, value);
    SetCtrl(pos, tag);
  }
};

}  // namespace qr
