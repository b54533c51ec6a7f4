#pragma once

// SeqlockWindowTable: SeqlockTagMap's table with absl's probe (Probe::kWindows), the table of
// QueryExecMgr's registry (issue 20, item 3; docs/benchmarks.md, "absl's probe windows").
//
// The groups of SeqlockTagTable are aligned: a key whose 8 (or 16) slot group is full goes to
// the next group, 6.7% of the keys at 100,000 entries with 8-slot groups, and each of them
// costs a lookup a second step. absl's table, inside the default ShardedQueryMap, has no
// aligned groups: a lookup matches the 16 control bytes that start at the key's own slot (the
// hash's low bits), so a key leaves its first window only when 16 slots in a row from its home
// are taken. This table does the same, written with atomics:
//
// - Control bytes, one per slot in slot order (0 empty, 1 deleted, 0x80 | 7 hash bits full),
//   then a copy of the first 15 (so a window that starts near the end reads on without a
//   wrap) and one byte of padding, all below the header; the slots above it. A reader with the
//   shard's slot mask addresses both without loading the header.
// - A lookup loads the 16 bytes of its window in one 16-byte load (an SSE move in inline
//   assembly, the bytes at any alignment, as absl's), matches the tag in all 16, compares the
//   keys of the matches, and stops at the first window with an empty byte; the next window
//   starts 16 slots on.
// - A writer (under the shard's lock) puts a new entry in the first free slot of the first
//   window with one, so an entry is at or before the first window of its sequence with an empty
//   byte. A delete leaves the slot empty (not a tombstone) when the run of taken slots around it
//   is shorter than 16 (absl's rule): then no window that holds it was ever full, so no lookup
//   ever went past it.
//
// Thread-safety: Find is safe against one writer (the map's version check discards a torn
// view); the rest is the writer's, under the shard's lock.

#include <emmintrin.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <new>
#include <type_traits>

#include "seqlock-tag-table.h"
#include "shard-lock.h"  // QR_SHARD_LOCK_TSAN
#include "unique-id.h"

namespace qr {

struct SeqlockWindowTable : TagTableBase {
  /// Bytes a window matches; also the smallest capacity.
  static constexpr uint64_t kWidth = 16;
  static constexpr uint64_t kGroup = kWidth;

  /// The slot mask (capacity - 1; the map's name for what a reader's probe is bounded by).
  /// Never changes: a stale reader's probe stays in bounds.
  uint64_t group_mask;
  uint64_t padding;

  static SeqlockWindowTable* Create(uint64_t capacity) {
    auto* mem = static_cast<char*>(::operator new(Bytes(capacity), std::align_val_t{64}));
    auto* t = new (mem + CtrlBytes(capacity)) SeqlockWindowTable{{}, capacity - 1, 0};
    for (uint64_t i = 0; i < CtrlBytes(capacity); ++i) {
      new (&t->Byte(i)) std::atomic<uint8_t>(0);
    }
    for (uint64_t i = 0; i < capacity; ++i) new (&t->slots()[i]) Slot;
    return t;
  }
  static void Destroy(SeqlockWindowTable* t) {
    static_assert(std::is_trivially_destructible_v<Slot>);
    ::operator delete(reinterpret_cast<char*>(t) - CtrlBytes(t->capacity()),
                      std::align_val_t{64});
  }
  /// A byte per slot, the copy of the first kWidth - 1 and a byte of padding (a multiple of 16).
  static constexpr uint64_t CtrlBytes(uint64_t capacity) { return capacity + kWidth; }
  static uint64_t Bytes(uint64_t capacity) {
    return CtrlBytes(capacity) + sizeof(SeqlockWindowTable) + capacity * sizeof(Slot);
  }
  uint64_t capacity() const { return group_mask + 1; }
  Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
  const Slot* slots() const { return reinterpret_cast<const Slot*>(this + 1); }

  /// The first control byte of a table whose slot mask is 'mask': a reader passes its own mask
  /// (at most this table's; a smaller one only moves the bytes it reads nearer the header, and
  /// the version check discards what it found).
  [[gnu::always_inline]] const char* CtrlOf(uint64_t mask) const {
    return reinterpret_cast<const char*>(this) - CtrlBytes(mask + 1);
  }
  /// Control byte 'i' (the writer's view: this table's own capacity).
  std::atomic<uint8_t>& Byte(uint64_t i) {
    return reinterpret_cast<std::atomic<uint8_t>*>(
        reinterpret_cast<char*>(this) - CtrlBytes(capacity()))[i];
  }
  const std::atomic<uint8_t>& Byte(uint64_t i) const {
    return reinterpret_cast<const std::atomic<uint8_t>*>(CtrlOf(group_mask))[i];
  }

  /// The 16 control bytes from 'p' on, in one load: an SSE move in inline assembly with a
  /// "memory" clobber (SeqlockTagTable::Load16 says why that is sound); under ThreadSanitizer,
  /// 16 atomic byte loads.
  [[gnu::always_inline]] static __m128i Load16(const char* ctrl, uint64_t p) {
#if defined(__x86_64__) && !defined(QR_SHARD_LOCK_TSAN)
    __m128i w;
    asm volatile("movdqu %1, %0"
                 : "=x"(w)
                 : "m"(*reinterpret_cast<const char(*)[16]>(ctrl + p))
                 : "memory");
    return w;
#else
    alignas(16) uint8_t bytes[kWidth];
    const auto* b = reinterpret_cast<const std::atomic<uint8_t>*>(ctrl + p);
    for (uint64_t i = 0; i < kWidth; ++i) bytes[i] = b[i].load(std::memory_order_acquire);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
#endif
  }
  [[gnu::always_inline]] static uint32_t EmptyMask(__m128i w) {
    return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_setzero_si128())));
  }

  /// The reader's probe: at most every window once (a torn view may have no empty byte; the
  /// caller's version check discards the result). 'mask': the shard's slot mask.
  [[gnu::always_inline]] bool Find(uint64_t mask, const UniqueId& id, uint64_t h,
                                   uint64_t* value) const {
    const __m128i tag = _mm_set1_epi8(static_cast<char>(Tag(h)));
    const char* ctrl = CtrlOf(mask);
    const Slot* s = slots();
    uint64_t p = h & mask;
    for (uint64_t n = 0; n <= mask; n += kWidth, p = (p + kWidth) & mask) {
      const __m128i w = Load16(ctrl, p);
      const uint32_t matches = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(w, tag)));
      for (uint32_t m = matches; m != 0; m &= m - 1) {
        const Slot& slot = s[(p + std::countr_zero(m)) & mask];
        if (slot.hi.load(std::memory_order_acquire) == id.hi &&
            slot.lo.load(std::memory_order_acquire) == id.lo) [[likely]] {
          *value = slot.value.load(std::memory_order_acquire);
          return true;
        }
      }
      if (EmptyMask(w) != 0) [[likely]] return false;
    }
    return false;
  }

  /// The writer's probe: true and the slot of 'id' if present, otherwise false and the slot
  /// to insert into (the first free one, empty or deleted, up to the first window with an
  /// empty byte, where the reader stops).
  bool FindSlot(const UniqueId& id, uint64_t h, uint64_t* pos) {
    const __m128i tag = _mm_set1_epi8(static_cast<char>(Tag(h)));
    const __m128i deleted = _mm_set1_epi8(static_cast<char>(kDeletedCtrl));
    const char* ctrl = CtrlOf(group_mask);
    uint64_t first_free = UINT64_MAX;
    uint64_t p = h & group_mask;
    for (uint64_t n = 0; n <= group_mask; n += kWidth, p = (p + kWidth) & group_mask) {
      const __m128i w = Load16(ctrl, p);
      for (uint32_t m = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(w, tag)));
           m != 0; m &= m - 1) {
        const uint64_t i = (p + std::countr_zero(m)) & group_mask;
        if (slots()[i].hi.load(std::memory_order_relaxed) == id.hi &&
            slots()[i].lo.load(std::memory_order_relaxed) == id.lo) {
          *pos = i;
          return true;
        }
      }
      const uint32_t empty = EmptyMask(w);
      const uint32_t free =
          empty | static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(w, deleted)));
      if (first_free == UINT64_MAX && free != 0) {
        first_free = (p + std::countr_zero(free)) & group_mask;
      }
      if (empty != 0) break;
    }
    *pos = first_free;  // Never UINT64_MAX: the map keeps 1/8 of the slots empty.
    return false;
  }

  /// Whether deleting the entry at 'pos' may leave its slot empty: the run of taken slots
  /// (full or deleted) that holds it is shorter than a window, so no window that holds it was
  /// ever full (a run only grows by inserts; this is the only way a taken slot becomes empty).
  bool NeverFull(uint64_t pos) const {
    const char* ctrl = CtrlOf(group_mask);
    // Bit i: slot pos + i is empty; and slot pos - 16 + i.
    const uint32_t after = EmptyMask(Load16(ctrl, pos));
    const uint32_t before = EmptyMask(Load16(ctrl, (pos - kWidth) & group_mask));
    if (after == 0 || before == 0) return false;
    // Taken slots from pos on, and right before pos (the top bits of 'before').
    const int taken_after = std::countr_zero(after);
    const int taken_before = std::countl_zero(static_cast<uint16_t>(before));
    return static_cast<uint64_t>(taken_after + taken_before) < kWidth;
  }
  /// Empties every control byte of a pooled table before its reuse (release stores, as
  /// SeqlockTagTable::ClearCtrl).
  void ClearCtrl() {
    for (uint64_t i = 0; i < CtrlBytes(capacity()); ++i) {
      Byte(i).store(0, std::memory_order_release);
    }
  }
  uint64_t Ctrl(uint64_t pos) const {
    return Byte(pos).load(std::memory_order_relaxed);
  }
  /// Release stores: a reader that sees one also sees the odd version before it. A byte of the
  /// first kWidth - 1 slots is stored twice: in place and in the copy past the last slot.
  void SetCtrl(uint64_t pos, uint64_t byte) {
    const auto b = static_cast<uint8_t>(byte);
    Byte(pos).store(b, std::memory_order_release);
    if (pos < kWidth - 1) Byte(capacity() + pos).store(b, std::memory_order_release);
  }
  void Store(uint64_t pos, const UniqueId& id, uint64_t value, uint64_t tag) {
    slots()[pos].Fill(id, value);
    SetCtrl(pos, tag);
  }
};

}  // namespace qr
