#pragma once

// SeqlockTagMap: a sharded map of pointers whose readers write nothing at all, over tables as
// compact as absl's (issue 20, items 2 and 3; docs/benchmarks.md, "Readers that write nothing,
// over tagged groups" and the sections after it). QueryExecMgr's registry is one, with absl's
// probe windows (Probe::kWindows; runtime/stable-query-registry.h); the other probes and the
// holds (seqlock-holds.h) are the variants the benchmarks compare. ShardedQueryMap and
// ShardLock, the coordinator's registry, are unchanged. SeqlockQueryMap (at the end) is the
// library's name for the map to use; unlike ShardedQueryMap it holds pointers only, Get copies
// one out, and nothing hands out a reference into the table (a reader holds no lock to keep
// one valid): a value's lifetime is the caller's (QueryExecMgr: type-stable nodes).
//
// Keys are UniqueIds. What it keeps from SeqlockMap (the benchmarks' seqlock-map.h): shards chosen from 'hi' as ShardedQueryMap
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
// - Each table (SeqlockTagTable, seqlock-tag-table.h) is absl's layout, written with atomics:
//   one control byte per slot (0 empty, 1 deleted, 0x80 | 7 hash bits full) in 8-byte groups,
//   and the slots (two key halves and the value). A lookup (Probe::kGroups; the other probes
//   are in the same header, absl's windows in seqlock-window-table.h) loads one group word
//   atomically, matches the tag in all eight bytes at once (SSE2 on the loaded word), and
//   compares the key of a matching slot; it stops at the first group with an empty byte.
//   Tables run up to 7/8 full, as absl's do, so they are no larger than absl's and the probe's
//   branches are as predictable (one group, one candidate, nearly always). A delete in a group
//   that still has an empty byte empties the slot instead of leaving a tombstone (no probe ever
//   went past that group), so churn rarely rehashes.
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

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "check.h"
#include "seqlock-holds.h"
#include "seqlock-tag-table.h"
#include "seqlock-window-table.h"
#include "shard-lock.h"
#include "sharded-query-map-util.h"
#include "spinlock.h"
#include "status.h"
#include "thread-annotations.h"
#include "unique-id.h"

namespace qr {

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

/// kGroupSlots: slots per probe group, 8 (one control word) or 16 (two, absl's group width);
/// kWindows has no groups and ignores it. kProbe: how a lookup walks the table
/// (seqlock-tag-table.h). kMaxLoadEighths: how full a
/// table runs, counting tombstones, before a rehash.
template <typename T, Holds kHolds = Holds::kNone, int kGroupSlots = 8,
          Probe kProbe = Probe::kGroups, int kMaxLoadEighths = 7>
class SeqlockTagMap {
  static_assert(std::is_pointer_v<T>, "SeqlockTagMap stores pointers");

 public:
  /// QR_REQUIRES: ValidateNumShards(num_shards) is OK (checked: a bad value aborts with the
  /// reason). 'initial_capacity': slots of each shard's first table (rounded up to a power of
  /// two >= 8, one group).
  explicit SeqlockTagMap(int num_shards, uint64_t initial_capacity = 8)
      : pick_shard_(CheckedNumShards(num_shards)),
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
      return FromSlowRead(GetSlow(s, id, h), s, out, nullptr);
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
      return FromSlowRead(GetSlow(s, id, h), s, out, ticket);
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
    s.size.store(s.live, std::memory_order_relaxed);
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
    // No probe ever went past the slot (its group, or with kWindows every window that holds it,
    // was never full): it can be empty again instead of a tombstone.
    const bool never_full = t->NeverFull(pos);
    BeginWrite(s);
    t->SetCtrl(pos, never_full ? kEmptyCtrl : kDeletedCtrl);
    EndWrite(s);
    s.live--;
    s.size.store(s.live, std::memory_order_relaxed);
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

  int num_shards() const { return num_shards_; }
  /// Entries over every shard (exact when no writer runs).
  uint64_t Count() const {
    uint64_t n = 0;
    for (int i = 0; i < num_shards_; ++i) n += shards_[i].size.load(std::memory_order_relaxed);
    return n;
  }
  /// Entries of one shard and its writers' lock: acquisitions (Add, Delete, ForEachValue),
  /// contended ones and sleeps. Lookups take no lock, so shared_acquisitions, bias_revocations
  /// and read_biased stay 0. Read without the lock, as ShardedQueryMap's.
  ShardStats GetShardStats(int shard) const {
    QR_CHECK(shard >= 0 && shard < num_shards_, "GetShardStats: no such shard");
    const Shard& s = shards_[shard];
    ShardStats st;
    st.entries = s.size.load(std::memory_order_relaxed);
    st.acquisitions = s.mu.acquisitions();
    st.contended_acquisitions = s.mu.contended_acquisitions();
    st.sleeps = s.mu.sleeps();
    return st;
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
  using Table = std::conditional_t<kProbe == Probe::kWindows, SeqlockWindowTable,
                                   SeqlockTagTable<kGroupSlots, kProbe>>;
  static constexpr uint64_t kGroup = Table::kGroup;
  static constexpr uint64_t kEmptyCtrl = Table::kEmptyCtrl;
  static constexpr uint64_t kDeletedCtrl = Table::kDeletedCtrl;
  static uint64_t Tag(uint64_t h) { return Table::Tag(h); }

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
    /// 'live' as of the last change, readable without the lock.
    std::atomic<uint64_t> size{0};
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
  /// What GetSlow read: the value's bits, and the shard's version (even) with bit 0 set when
  /// the id was found. Sixteen bytes, returned in two registers: the slow path takes no
  /// pointer to the caller's value or ticket, which can then stay in registers on the fast
  /// path (with pointers passed, QueryStateRegistry's lookup stored and reloaded them: 6 of
  /// its 103 instructions; docs/benchmarks.md, "A reference that is one add").
  struct SlowRead {
    uint64_t value;
    uint64_t version_found;
  };
  /// Retries until a read sees no writer, out of line (it keeps the fast path's registers
  /// free).
  [[gnu::noinline]] static SlowRead GetSlow(const Shard& s, const UniqueId& id, uint64_t h) {
    for (uint32_t spins = 0;; ++spins) {
      if (spins >= 64) {
        std::this_thread::yield();  // A preempted writer holds the version odd.
      } else {
        __builtin_ia32_pause();
      }
      T out{};
      bool found = false;
      uint64_t version = 0;
      if (TryGet(s, id, h, &out, &found, &version)) {
        return SlowRead{found ? std::bit_cast<uint64_t>(out) : 0, version | (found ? 1 : 0)};
      }
    }
  }
  /// Get's result from a SlowRead: '*out' if found, '*ticket' unless null.
  static bool FromSlowRead(const SlowRead& r, const Shard& s, T* out, Ticket* ticket) {
    const bool found = (r.version_found & 1) != 0;
    if (found) *out = std::bit_cast<T>(r.value);
    if (ticket != nullptr) *ticket = Ticket{&s, r.version_found & ~uint64_t{1}};
    return found;
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
      t->ClearCtrl();
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

  static int CheckedNumShards(int num_shards) {
    const Status s = ValidateNumShards(num_shards);
    QR_CHECK(s.ok(), s.message());
    return num_shards;
  }

  const FibonacciShardPicker pick_shard_;
  const std::unique_ptr<Shard[]> shards_;
  const int num_shards_;
};

/// The map to use (QueryExecMgr's): values are pointers, lookups take no lock and store
/// nothing, absl's probe windows. The other template arguments are variants the benchmarks
/// compare (docs/benchmarks.md).
template <typename T>
using SeqlockQueryMap = SeqlockTagMap<T, Holds::kNone, 8, Probe::kWindows>;

}  // namespace qr
