#pragma once

// SeqlockMap: a candidate registry design whose readers write no shared cache line (issue 20,
// item 3; docs/benchmarks.md, "Readers that write nothing"). A benchmark variant, not the
// registry: ShardedQueryMap and ShardLock are unchanged.
//
// Each shard is an open-addressing table of atomic slots (two key halves and the value, each a
// std::atomic<uint64_t>), linear probing, deletion by tombstones. Writers serialise on the
// shard's mutex and make the shard's version odd while they change the table. A reader loads
// the version (acquire), probes with acquire loads, loads the version again and retries if it
// changed or was odd. No fences: every store of a writer is a release store after the odd
// version, so a reader whose acquire load sees one of them also sees the odd version on its
// second load (Boehm, "Can seqlocks get along with programming language memory models?",
// 2012). On x86 all of these are plain movs.
//
// Growth (and the rehash that drops tombstones) builds a new table and publishes it through an
// atomic pointer; the old one is retired and freed once no reader can still be in it:
// epoch-style reclamation with per-thread announcements. A reader stores the global epoch into
// its own thread's record (its own cache line, never a shared one) before loading the table
// pointer and 0 after its last access. A retiring writer publishes the new table, advances the
// epoch, snapshots the records that are not 0 and frees the old table when each of them has
// announced something else.
// The store-load ordering on the reader's side (announce, then load the table pointer) comes
// from membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) on the retiring writer's side, so the
// reader needs only a compiler barrier. Where membarrier is unavailable, and under
// ThreadSanitizer (which does not model it), the reader's announcement is a seq_cst exchange
// instead and the protocol is a plain seq_cst Dekker handshake.
//
// Two variations, for measuring what each part costs (docs/benchmarks.md): kTypeStable drops
// the epochs (readers announce nothing; retired tables are pooled per shard and reused, never
// freed while the map lives, as SeqlockTagMap does), and kMaxLoadEighths lowers the load factor
// at which a table rehashes (shorter linear probes, larger tables).
//
// Values: T must be a pointer (the registry stores QueryState*; the benchmarks const Entry*),
// never null; the slot stores its bits. See docs/benchmarks.md for what a shared_ptr value
// would need. Thread-safety: thread-safe.

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "util/mutex.h"
#include "util/seqlock-tag-table.h"
#include "util/sharded-query-map-util.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

#if defined(__SANITIZE_THREAD__)
#define QR_SEQLOCK_MAP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QR_SEQLOCK_MAP_TSAN 1
#endif
#endif

namespace qr::bench {

namespace seqlock_internal {

/// One thread's announcement: the global epoch it read on entering a SeqlockMap read, 0
/// outside one. Written only by its thread, read by retiring writers. Records are never freed; a record
/// whose thread exited is reused by the next thread that needs one.
struct alignas(64) ReaderRecord {
  std::atomic<uint64_t> announce{0};
  std::atomic<bool> in_use{false};
  ReaderRecord* next = nullptr;
};

/// The list of all records (push-only).
inline std::atomic<ReaderRecord*> g_records{nullptr};

/// What readers read on entry, on a line of its own that only retiring writers write.
struct alignas(64) ReadMostly {
  /// Odd, advanced by 2 after every retirement: a reader that entered before a retirement and
  /// one that entered after it announce different values, so a writer tells them apart without
  /// the reader deriving its announcement from its own previous one (a store-forwarding chain
  /// from one Get to the next).
  std::atomic<uint64_t> epoch{1};
  /// True once membarrier(PRIVATE_EXPEDITED) is registered: readers then use a compiler barrier.
  std::atomic<bool> asymmetric{false};
};
inline ReadMostly g_read_mostly;

inline constinit thread_local ReaderRecord* tls_record = nullptr;

/// Releases the thread's record at thread exit.
struct RecordReleaser {
  ~RecordReleaser() {
    if (tls_record != nullptr) tls_record->in_use.store(false, std::memory_order_release);
    tls_record = nullptr;
  }
};

/// The calling thread's record, taken from the free ones or allocated (slow path, once a thread).
[[gnu::noinline]] inline ReaderRecord* RegisterThread() {
  thread_local RecordReleaser releaser;
  (void)releaser;
  for (ReaderRecord* r = g_records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool expected = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      tls_record = r;
      return r;
    }
  }
  auto* r = new ReaderRecord;
  r->in_use.store(true, std::memory_order_relaxed);
  ReaderRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  tls_record = r;
  return r;
}

/// Registers the process for expedited private membarrier once; false where unavailable or
/// under ThreadSanitizer.
inline bool EnableAsymmetricBarrier() {
#ifdef QR_SEQLOCK_MAP_TSAN
  return false;
#else
  static const bool enabled =
      syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  if (enabled) g_read_mostly.asymmetric.store(true, std::memory_order_relaxed);
  return enabled;
#endif
}

/// The writer's half of the handshake: after it, every reader either has its announcement
/// visible to the caller or sees the caller's earlier stores (the new table pointer).
inline void HeavyBarrier() {
  if (g_read_mostly.asymmetric.load(std::memory_order_relaxed)) {
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  }
}

/// A reader's critical section: the table it loads stays allocated until the section ends.
/// Sections do not nest (the inner one's end would clear the outer one's announcement).
class ReadSection {
 public:
  [[gnu::always_inline]] ReadSection() {
    ReaderRecord* r = tls_record;
    if (r == nullptr) [[unlikely]] r = RegisterThread();
    record_ = r;
    const uint64_t epoch = g_read_mostly.epoch.load(std::memory_order_acquire);
    if (g_read_mostly.asymmetric.load(std::memory_order_relaxed)) [[likely]] {
      // Release: the accesses of the thread's previous reads happen before this value too.
      r->announce.store(epoch, std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      r->announce.exchange(epoch, std::memory_order_seq_cst);
    }
  }
  [[gnu::always_inline]] ~ReadSection() {
    record_->announce.store(0, std::memory_order_release);
  }
  ReadSection(const ReadSection&) = delete;
  ReadSection& operator=(const ReadSection&) = delete;

 private:
  ReaderRecord* record_;
};

}  // namespace seqlock_internal

/// 'kTypeStable': readers announce nothing; a retired table is kept in its shard's pool and
/// reused by a later rehash of that shard (never freed while the map lives), so a reader still
/// probing it reads memory that stays a table of the same shape; the shard's version, bumped
/// by every retirement, tells the reader to retry. 'kMaxLoadEighths': a rehash when live entries
/// and tombstones would exceed that many eighths of the slots.
template <typename T, bool kTypeStable = false, int kMaxLoadEighths = 7>
class SeqlockMap {
  static_assert(std::is_pointer_v<T>, "SeqlockMap stores pointers");
  static_assert(kMaxLoadEighths >= 2 && kMaxLoadEighths <= 7);

 public:
  /// 'num_shards': a power of two. 'initial_capacity': slots of each shard's first table
  /// (a power of two >= 4).
  explicit SeqlockMap(int num_shards, uint64_t initial_capacity = 8)
      : pick_shard_(num_shards),
        initial_capacity_(std::bit_ceil(std::max<uint64_t>(initial_capacity, 4))),
        shards_(std::make_unique<Shard[]>(num_shards)),
        num_shards_(num_shards) {
    seqlock_internal::EnableAsymmetricBarrier();
    for (int i = 0; i < num_shards; ++i) {
      shards_[i].table.store(Table::Create(initial_capacity_), std::memory_order_relaxed);
    }
  }
  /// No reader or writer may be running.
  ~SeqlockMap() {
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      MutexLock l(&s.mu);
      Table::Destroy(s.table.load(std::memory_order_relaxed));
      for (Retired& r : s.retired) Table::Destroy(r.table);
    }
  }
  SeqlockMap(const SeqlockMap&) = delete;
  SeqlockMap& operator=(const SeqlockMap&) = delete;

  /// Copies the value of 'id' to '*out'; false if absent. Writes no shared cache line.
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    const Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    std::optional<seqlock_internal::ReadSection> section;
    if constexpr (!kTypeStable) section.emplace();
    for (uint32_t spins = 0;; ++spins) {
      const uint64_t v1 = s.version.load(std::memory_order_acquire);
      if ((v1 & 1) == 0) [[likely]] {
        const Table* t = s.table.load(std::memory_order_seq_cst);
        uint64_t value = 0;
        const bool found = t->Find(id, h, &value);
        if (s.version.load(std::memory_order_relaxed) == v1) [[likely]] {
          if (found) *out = std::bit_cast<T>(value);
          return found;
        }
      }
      if (spins >= 64) {
        std::this_thread::yield();  // A preempted writer holds the version odd.
      } else {
        __builtin_ia32_pause();
      }
    }
  }

  /// Adds 'id' -> 'v' (non-null); false if 'id' is present.
  bool Add(const UniqueId& id, T v) {
    Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    MutexLock l(&s.mu);
    Table* t = s.table.load(std::memory_order_relaxed);
    uint64_t pos = 0;
    if (t->FindSlot(id, h, &pos)) return false;
    if (s.used + 1 > (t->mask + 1) * kMaxLoadEighths / 8) {  // Rehash (tombstones count).
      uint64_t capacity = t->mask + 1;
      // Half the limit after a rehash (the default variant: half full).
      while ((s.live + 1) * 16 > capacity * kGrowTo) capacity *= 2;
      t = Replace(s, capacity);
      t->FindSlot(id, h, &pos);
    }
    typename Table::Slot& slot = t->slots()[pos];
    const bool was_empty = slot.value.load(std::memory_order_relaxed) == kEmpty;
    BeginWrite(s);
    slot.hi.store(id.hi, std::memory_order_release);
    slot.lo.store(id.lo, std::memory_order_release);
    slot.value.store(std::bit_cast<uint64_t>(v), std::memory_order_release);
    EndWrite(s);
    s.live++;
    if (was_empty) s.used++;
    return true;
  }

  /// Removes 'id'; false if absent.
  bool Delete(const UniqueId& id) {
    Shard& s = ShardFor(id);
    const uint64_t h = UniqueIdHash()(id);
    MutexLock l(&s.mu);
    Table* t = s.table.load(std::memory_order_relaxed);
    uint64_t pos = 0;
    if (!t->FindSlot(id, h, &pos)) return false;
    BeginWrite(s);
    t->slots()[pos].value.store(kTombstone, std::memory_order_release);
    EndWrite(s);
    s.live--;
    ReclaimLocked(s);
    return true;
  }

  /// Frees every retired table no reader can still be in.
  void Reclaim() {
    for (int i = 0; i < num_shards_; ++i) {
      MutexLock l(&shards_[i].mu);
      ReclaimLocked(shards_[i]);
    }
  }

  SeqlockMapStats Stats() const {
    SeqlockMapStats st;
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      MutexLock l(&s.mu);
      st.tables_retired += s.tables_retired;
      st.tables_freed += s.tables_freed;
      st.tables_reused += s.tables_reused;
      if constexpr (kTypeStable) st.tables_pooled += s.retired.size();
      st.entries += s.live;
    }
    return st;
  }

 private:
  static constexpr uint64_t kGrowTo = kMaxLoadEighths == 7 ? 8 : kMaxLoadEighths;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = 1;  // No valid pointer: not 8-byte aligned.

  /// A table: its mask, then mask + 1 slots, in one allocation.
  struct Table {
    struct Slot {
      std::atomic<uint64_t> hi{0};
      std::atomic<uint64_t> lo{0};
      std::atomic<uint64_t> value{kEmpty};  // kEmpty, kTombstone or the value's bits.
    };
    uint64_t mask;
    uint64_t padding;

    static Table* Create(uint64_t capacity) {
      void* mem = ::operator new(sizeof(Table) + capacity * sizeof(Slot),
                                 std::align_val_t{64});
      auto* t = new (mem) Table{capacity - 1, 0};
      Slot* slots = t->slots();
      for (uint64_t i = 0; i < capacity; ++i) new (&slots[i]) Slot;
      return t;
    }
    static void Destroy(Table* t) {
      static_assert(std::is_trivially_destructible_v<Slot>);
      ::operator delete(t, std::align_val_t{64});
    }
    Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
    const Slot* slots() const { return reinterpret_cast<const Slot*>(this + 1); }

    /// The reader's probe: acquire loads, at most mask + 1 slots (a torn view of a table being
    /// written may have no empty slot; the caller's version check discards the result).
    [[gnu::always_inline]] bool Find(const UniqueId& id, uint64_t h, uint64_t* value) const {
      const Slot* s = slots();
      uint64_t i = h & mask;
      for (uint64_t n = 0; n <= mask; ++n, i = (i + 1) & mask) {
        const uint64_t v = s[i].value.load(std::memory_order_acquire);
        if (v == kEmpty) return false;
        if (s[i].hi.load(std::memory_order_acquire) == id.hi &&
            s[i].lo.load(std::memory_order_acquire) == id.lo && v != kTombstone) {
          *value = v;
          return true;
        }
      }
      return false;
    }
    /// The writer's probe (under the shard mutex): true and the slot of 'id' if present,
    /// otherwise false and the slot to insert into (the first tombstone or the empty slot).
    bool FindSlot(const UniqueId& id, uint64_t h, uint64_t* pos) {
      Slot* s = slots();
      uint64_t i = h & mask;
      uint64_t first_free = UINT64_MAX;
      for (uint64_t n = 0; n <= mask; ++n, i = (i + 1) & mask) {
        const uint64_t v = s[i].value.load(std::memory_order_relaxed);
        if (v == kEmpty) {
          *pos = first_free != UINT64_MAX ? first_free : i;
          return false;
        }
        if (v == kTombstone) {
          if (first_free == UINT64_MAX) first_free = i;
        } else if (s[i].hi.load(std::memory_order_relaxed) == id.hi &&
                   s[i].lo.load(std::memory_order_relaxed) == id.lo) {
          *pos = i;
          return true;
        }
      }
      *pos = first_free;  // Full of live entries and tombstones: Add rehashes first.
      return false;
    }
  };

  struct Retired {
    Table* table;
    /// Records that were inside a read when the table was unpublished, with their epochs: the
    /// table is freed once each has announced something else (0, or a later read's epoch).
    std::vector<std::pair<const seqlock_internal::ReaderRecord*, uint64_t>> readers;
  };

  /// The line readers read (version, table pointer) with the writer's mutex and counters.
  struct alignas(64) Shard {
    std::atomic<uint64_t> version{0};
    std::atomic<Table*> table{nullptr};
    mutable Mutex mu;
    uint64_t live QR_GUARDED_BY(mu) = 0;
    /// Live entries and tombstones of 'table'.
    uint64_t used QR_GUARDED_BY(mu) = 0;
    uint64_t tables_retired QR_GUARDED_BY(mu) = 0;
    uint64_t tables_freed QR_GUARDED_BY(mu) = 0;
    uint64_t tables_reused QR_GUARDED_BY(mu) = 0;
    /// Epochs: retired tables waiting for their readers. Type-stable: the pool.
    std::vector<Retired> retired QR_GUARDED_BY(mu);
  };

  static void BeginWrite(Shard& s) QR_REQUIRES(s.mu) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  static void EndWrite(Shard& s) QR_REQUIRES(s.mu) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  /// Copies the live entries into a new table of 'capacity' slots, publishes it and retires the
  /// old one. Readers of the old table are not disturbed (it is not written again); the version
  /// is bumped so that a reader that loaded the old pointer retries on the new table.
  Table* Replace(Shard& s, uint64_t capacity) QR_REQUIRES(s.mu) {
    Table* old = s.table.load(std::memory_order_relaxed);
    Table* t = nullptr;
    if constexpr (kTypeStable) {
      for (size_t i = 0; i < s.retired.size(); ++i) {
        if (s.retired[i].table->mask + 1 != capacity) continue;
        t = s.retired[i].table;
        s.retired.erase(s.retired.begin() + static_cast<std::ptrdiff_t>(i));
        // Release stores: a stale reader that sees one also sees the version bump that
        // retired this table, and retries.
        for (uint64_t j = 0; j < capacity; ++j) {
          t->slots()[j].value.store(kEmpty, std::memory_order_release);
        }
        s.tables_reused++;
        break;
      }
    }
    if (t == nullptr) t = Table::Create(capacity);
    const typename Table::Slot* from = old->slots();
    typename Table::Slot* to = t->slots();
    for (uint64_t i = 0; i <= old->mask; ++i) {
      const uint64_t v = from[i].value.load(std::memory_order_relaxed);
      if (v == kEmpty || v == kTombstone) continue;
      const UniqueId id{from[i].hi.load(std::memory_order_relaxed),
                        from[i].lo.load(std::memory_order_relaxed)};
      uint64_t pos = 0;
      t->FindSlot(id, UniqueIdHash()(id), &pos);
      to[pos].hi.store(id.hi, std::memory_order_release);
      to[pos].lo.store(id.lo, std::memory_order_release);
      to[pos].value.store(v, std::memory_order_release);
    }
    BeginWrite(s);
    s.table.store(t, std::memory_order_seq_cst);  // Releases the new table's contents.
    EndWrite(s);
    s.used = s.live;
    if constexpr (kTypeStable) {
      s.retired.push_back(Retired{old, {}});
      s.tables_retired++;
      return t;
    }
    seqlock_internal::g_read_mostly.epoch.fetch_add(2, std::memory_order_seq_cst);
    seqlock_internal::HeavyBarrier();
    Retired r{old, {}};
    for (const seqlock_internal::ReaderRecord* rec =
             seqlock_internal::g_records.load(std::memory_order_acquire);
         rec != nullptr; rec = rec->next) {
      const uint64_t a = rec->announce.load(std::memory_order_seq_cst);
      if (a != 0) r.readers.emplace_back(rec, a);
    }
    s.retired.push_back(std::move(r));
    s.tables_retired++;
    ReclaimLocked(s);
    return t;
  }

  void ReclaimLocked(Shard& s) QR_REQUIRES(s.mu) {
    if constexpr (kTypeStable) return;  // Pooled for reuse, freed with the map.
    if (s.retired.empty()) [[likely]] return;
    size_t kept = 0;
    for (size_t i = 0; i < s.retired.size(); ++i) {
      Retired& r = s.retired[i];
      bool busy = false;
      for (const auto& [rec, a] : r.readers) {
        // Acquire: the reader's accesses to the table happen before its next announcement.
        if (rec->announce.load(std::memory_order_acquire) == a) {
          busy = true;
          break;
        }
      }
      if (busy) {
        if (kept != i) s.retired[kept] = std::move(r);  // Not onto itself: that empties it.
        ++kept;
      } else {
        Table::Destroy(r.table);
        s.tables_freed++;
      }
    }
    s.retired.resize(kept);
  }

  [[gnu::always_inline]] Shard& ShardFor(const UniqueId& id) const {
    return shards_[pick_shard_(id.hi)];
  }

  const FibonacciShardPicker pick_shard_;
  const uint64_t initial_capacity_;
  const std::unique_ptr<Shard[]> shards_;
  const int num_shards_;
};

}  // namespace qr::bench
