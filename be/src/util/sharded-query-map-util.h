#pragma once

// Public header of the query_registry library (installed as <query_registry/...>): it includes
// only the standard library, Abseil and its sibling headers, by sibling-relative quotes.

#include <algorithm>
#include <atomic>
#include <bit>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/numeric/int128.h>

#include "check.h"
#include "shard-lock.h"
#include "status.h"
#include "thread-annotations.h"
#include "unique-id.h"

namespace qr {

/// OK if 'num_shards' is a power of two in [1, kMaxRegistryShards]; otherwise an error saying
/// what is accepted.
Status ValidateNumShards(int64_t num_shards);
inline constexpr int kMaxRegistryShards = 4096;
/// The shard count of a ShardedQueryMap constructed without one (docs/benchmarks.md chose it).
inline constexpr int kDefaultNumShards = 256;

/// What ShardedQueryMap needs to know about its key type; specialize it for your own key.
/// A specialization provides:
///   static uint64_t ShardBits(const Key&): 64 bits the shard is chosen from (the map mixes
///       them by Fibonacci hashing, so sequential values are fine). Keys that must share a
///       shard return the same bits. Cheap: it runs on every operation.
///   using Hash: the inner hash map's hash functor, good in all 64 bits.
///   static std::string ToString(const Key&): the key in error messages.
/// The key itself must be copyable and equality comparable.
template <typename Key>
struct ShardKeyTraits;

/// Query ids: the shard comes from 'hi' alone, so every fragment instance of a query (same
/// 'hi', different 'lo') lives in the query's shard.
template <>
struct ShardKeyTraits<UniqueId> {
  [[gnu::always_inline]] static constexpr uint64_t ShardBits(const UniqueId& id) {
    return id.hi;
  }
  using Hash = UniqueIdHash;
  static std::string ToString(const UniqueId& id) { return "query id " + PrintId(id); }
};

/// Integer ids (sequential or random; signed ones by their two's complement bits).
template <std::integral Key>
struct ShardKeyTraits<Key> {
  static constexpr uint64_t ShardBits(Key key) { return static_cast<uint64_t>(key); }
  using Hash = absl::Hash<Key>;
  static std::string ToString(Key key) { return "key " + std::to_string(key); }
};

/// 128-bit integer ids: both halves choose the shard, the low one multiplied and rotated
/// first (a plain XOR put every key whose halves are equal, or differ by a constant, in one
/// shard).
template <>
struct ShardKeyTraits<absl::uint128> {
  static constexpr uint64_t ShardBits(absl::uint128 key) {
    return absl::Uint128High64(key) ^
           std::rotl(absl::Uint128Low64(key) * 0xc2b2ae3d27d4eb4fULL, 31);
  }
  using Hash = absl::Hash<absl::uint128>;
  static std::string ToString(absl::uint128 key) {
    return "key " + PrintId(UniqueId{absl::Uint128High64(key), absl::Uint128Low64(key)});
  }
};

/// The shard of a key's shard bits among a power of two of shards: the top log2(num_shards)
/// bits of bits * 2^64/phi (Fibonacci hashing). Two instructions (a multiply and a shift)
/// instead of a full mix; sequential ids spread as evenly as random ones (the multiplier's top
/// bits depend on every input bit). The inner map's hash mixes the whole key again, so the
/// shard's fixed top bits do not bias it.
class FibonacciShardPicker {
 public:
  static constexpr uint64_t kFibonacci = 0x9e3779b97f4a7c15ULL;
  /// QR_REQUIRES: num_shards is a power of two (ValidateNumShards()).
  explicit FibonacciShardPicker(int num_shards)
      // One shard: a multiplier of 0, since a shift by 64 would be undefined.
      : multiplier_(num_shards == 1 ? 0 : kFibonacci),
        shift_(num_shards == 1 ? 0 : 64 - std::countr_zero(static_cast<uint64_t>(num_shards))) {}
  /// In [0, num_shards).
  [[gnu::always_inline]] uint64_t operator()(uint64_t bits) const {
    return (bits * multiplier_) >> shift_;
  }

 private:
  const uint64_t multiplier_;
  const int shift_;
};

/// Statistics of one shard of a ShardedQueryMap. Read without the shard lock: each number is
/// exact when read but the set is not a consistent snapshot.
struct ShardStats {
  uint64_t entries = 0;
  /// Acquisitions of the shard's lock: exclusive (Add, Delete, ScopedShardedMapRef,
  /// DoFuncForAllEntries) plus shared (Get, VisitShared, Snapshot) through the reader slots;
  /// the shared ones alone below. Read-biased lookups are not in either (ShardLock).
  uint64_t acquisitions = 0;
  uint64_t shared_acquisitions = 0;
  uint64_t contended_acquisitions = 0;
  uint64_t sleeps = 0;
  /// Times a writer found the shard's lock read-biased and revoked the bias (a membarrier()).
  /// Read-biased lookups are not in shared_acquisitions: see ShardLock::biased_reads().
  uint64_t bias_revocations = 0;
  /// Whether the shard's lock is read-biased now (a snapshot).
  bool read_biased = false;
};

namespace internal {
/// The maps that hold a shard lock on this thread while user code runs (a callback of
/// DoFuncForAllEntries() or VisitShared(), the scope of a ScopedShardedMapRef), with what holds
/// it, innermost last (debug builds only; nesting deeper than this is not tracked).
inline constexpr int kMaxTrackedMaps = 8;
inline thread_local const void* tls_locked_maps[kMaxTrackedMaps] = {};
inline thread_local const char* tls_lock_holders[kMaxTrackedMaps] = {};
inline thread_local int tls_num_locked_maps = 0;
[[noreturn]] void DieOnReentry(const char* method, const char* holder);
}  // namespace internal

/// A process-wide registry of values keyed by query id (or by any 'Key' that has a
/// ShardKeyTraits), split into N shards, each an inner hash map guarded by its own ShardLock,
/// so that lookups of different queries rarely contend, and lookups (Get, Snapshot: shared) on
/// different cores do not even write a common cache line.
/// Writers (Add, Delete, ScopedShardedMapRef, DoFuncForAllEntries) hold a shard exclusively. The
/// shard is chosen from ShardKeyTraits<Key>::ShardBits (for a UniqueId its 'hi' half), mixed, so
/// sequential ids spread too; all fragment instances of a query (same 'hi') live in its shard.
///
/// Thread-safety: all methods are thread-safe. Callbacks of DoFuncForAllEntries() and
/// VisitShared(), and the scope of a ScopedShardedMapRef, run with a shard lock held: they must
/// be short and must not touch this map, which would deadlock (debug builds abort instead,
/// also through another map's callback in between). Snapshot() and ForEachUnlocked() run user
/// code with no lock held.
/// Lock order: a shard lock is a leaf. The map never holds two shard locks at once, and callers
/// must not take other locks while holding one (the coordinator's lock order writes this out).
/// T should be cheap to copy (a pointer or a shared_ptr): Get() and Snapshot() copy it out.
/// The default inner map is an open-addressing table (absl::flat_hash_map): a lookup touches
/// one group of control bytes and one slot instead of a bucket array, a node and its chain,
/// which docs/benchmarks.md measures at 1.2-4x the throughput of std::unordered_map. Entries
/// move when the table grows: nothing may keep a pointer or reference to an entry (or
/// iterator) past the shard lock (copy the value out instead, as Get() and Snapshot() do).
template <typename T, typename Key = UniqueId,
          typename InnerMap = absl::flat_hash_map<Key, T, typename ShardKeyTraits<Key>::Hash>>
class ShardedQueryMap {
 private:
  struct Shard;
  using Traits = ShardKeyTraits<Key>;

 public:
  using Map = InnerMap;
  using key_type = Key;
  using mapped_type = T;

  /// QR_REQUIRES: ValidateNumShards(num_shards) is OK (checked: a bad value aborts with the
  /// reason; the daemon validates its --registry_num_shards flag when parsing flags).
  /// 'read_bias': whether a shard that writers leave alone for a while may serve lookups
  /// read-biased (ShardLock); ReadBias::kNever counts every lookup in its shard's statistics.
  explicit ShardedQueryMap(int num_shards = kDefaultNumShards,
                           ReadBias read_bias = ReadBias::kAdaptive)
      : num_shards_(num_shards),
        pick_shard_(num_shards) {
    Status s = ValidateNumShards(num_shards);
    QR_CHECK(s.ok(), s.message());
    shards_ = std::make_unique<Shard[]>(num_shards);
    for (int i = 0; i < num_shards; ++i) shards_[i].lock.set_read_bias(read_bias);
  }
  ShardedQueryMap(const ShardedQueryMap&) = delete;
  ShardedQueryMap& operator=(const ShardedQueryMap&) = delete;

  int num_shards() const { return num_shards_; }

  /// The shard that owns 'id': FibonacciShardPicker of ShardKeyTraits<Key>::ShardBits(id)
  /// ('hi' for a UniqueId).
  [[gnu::always_inline]] int ShardIndex(const Key& id) const {
    return static_cast<int>(pick_shard_(Traits::ShardBits(id)));
  }

  /// RAII lock of the shard owning an id; '->' and '*' give that shard's inner map.
  /// Keep it short-lived: no I/O, no other locks, no allocation-heavy work while it lives.
  class ScopedShardedMapRef {
   public:
    /// Holds the shard exclusively (the caller may change the map or its values).
    /// No analysis here, in the destructor and in get(): which shard's lock is held depends on
    /// 'id' at run time, and the analysis can only name a lock known when compiling; the
    /// constructor/destructor pair is the (unannotatable) scope of that lock.
    /// Insert or change only 'id' (or keys of the same shard): a key of another shard put
    /// here is not found by Get() and can be added a second time.
    [[nodiscard]] ScopedShardedMapRef(const Key& id, ShardedQueryMap* map)
        QR_NO_THREAD_SAFETY_ANALYSIS : map_(map),
                                       shard_(&map->shards_[map->ShardIndex(id)]) {
      map_->CheckNotIterating("ScopedShardedMapRef");
      shard_->lock.lock();
      LockedMapMarker::Push(map_, "ScopedShardedMapRef's scope");
    }
    ~ScopedShardedMapRef() QR_NO_THREAD_SAFETY_ANALYSIS {
      LockedMapMarker::Pop(map_);
      shard_->PublishSize();
      shard_->lock.unlock();
    }
    ScopedShardedMapRef(const ScopedShardedMapRef&) = delete;
    ScopedShardedMapRef& operator=(const ScopedShardedMapRef&) = delete;

    /// The lock this object holds guards the map (see the constructor for the missing analysis).
    Map* get() QR_NO_THREAD_SAFETY_ANALYSIS { return &shard_->map; }
    Map* operator->() { return get(); }
    Map& operator*() { return *get(); }

   private:
    ShardedQueryMap* const map_;
    Shard* const shard_;
  };

  /// Inserts ('id', 'value'). AlreadyExists if 'id' is present (the map is unchanged).
  Status Add(const Key& id, T value) {
    CheckNotIterating("Add");
    Shard& s = ShardFor(id);
    {
      WriterLockGuard l(&s.lock);
      if (s.map.try_emplace(id, std::move(value)).second) {
        s.PublishSize();
        return Status::OK();
      }
    }
    return AlreadyExists(Traits::ToString(id) + " is already registered");
  }

  /// A copy of the value registered for 'id', or nullopt. Holds the shard shared: concurrent
  /// Gets of one shard run in parallel (T's copy must be safe from several threads at once, as
  /// a pointer's or a shared_ptr's is).
  [[nodiscard, gnu::always_inline]] std::optional<T> Get(const Key& id) const {
    CheckNotIterating("Get");
    return ReadShard(ShardFor(id),
                     [&id](const Map& map) __attribute__((always_inline)) -> std::optional<T> {
                       auto it = map.find(id);
                       if (it == map.end()) return std::nullopt;
                       return it->second;
                     });
  }

  /// Calls 'fn(const T* value)' with the shard held shared, 'value' pointing at the entry of
  /// 'id' or nullptr when it is absent, and returns what 'fn' returns: for work that must see
  /// the entry still registered, such as taking a reference on it (QueryExecMgr). 'fn' runs
  /// beside the shard's other readers, so it may only read the value or change what it points
  /// to atomically; it must be short and must not call into this map.
  template <typename Fn>
  [[gnu::always_inline]] decltype(auto) VisitShared(const Key& id, Fn&& fn) const {
    CheckNotIterating("VisitShared");
    return ReadShard(ShardFor(id),
                     [&](const Map& map) __attribute__((always_inline)) -> decltype(auto) {
                       LockedMapMarker marker(this, "VisitShared callback");
                       auto it = map.find(id);
                       return fn(it == map.end() ? static_cast<const T*>(nullptr) : &it->second);
                     });
  }

  /// Removes 'id', moving its value into 'removed' if not null. NotFound if absent.
  /// The value is destroyed (or handed out) after the shard lock is released.
  Status Delete(const Key& id, T* removed = nullptr) {
    CheckNotIterating("Delete");
    Shard& s = ShardFor(id);
    std::optional<T> victim;
    {
      WriterLockGuard l(&s.lock);
      auto it = s.map.find(id);
      if (it != s.map.end()) {
        victim.emplace(std::move(it->second));
        s.map.erase(it);
        s.PublishSize();
      }
    }
    if (!victim) return NotFound(Traits::ToString(id) + " is not registered");
    if (removed != nullptr) *removed = std::move(*victim);
    return Status::OK();
  }

  /// Number of entries: the sum of the shards' sizes, each read at a different moment.
  size_t Count() const {
    size_t n = 0;
    for (int i = 0; i < num_shards_; ++i) n += shards_[i].size.load(std::memory_order_relaxed);
    return n;
  }

  /// Calls 'fn(const Key&, T&)' for every entry, holding each shard exclusively while
  /// visiting that shard, so 'fn' may change the values. Each shard is a write: lookups of it
  /// wait, and a read-biased shard has its bias revoked (one membarrier() per walk for all of
  /// them, made before the first shard is visited); a walk that only reads should use
  /// VisitAllShared(), which revokes nothing. 'fn' must be short and must not call into this
  /// map.
  template <typename Fn>
  void DoFuncForAllEntries(Fn&& fn) {
    CheckNotIterating("DoFuncForAllEntries");
    LockedMapMarker marker(this, "DoFuncForAllEntries callback");
    // Lower every read-biased shard's bias, then fence once: each shard's lock() below only
    // waits for the read-biased lookups still inside, with no membarrier() of its own (256
    // biased shards took 256 of them; docs/benchmarks.md, "One membarrier per walk").
    ReadBiasBatch biases;
    for (int i = 0; i < num_shards_; ++i) biases.Lower(&shards_[i].lock);
    biases.Fence();
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      WriterLockGuard l(&s.lock);  // 'fn' gets a mutable value.
      for (auto& [id, value] : s.map) fn(id, value);
    }
  }

  /// Calls 'fn(const Key&, const T&)' for every entry, holding each shard shared while
  /// visiting it: beside that shard's lookups, never beside a writer of it. For walks that
  /// only read the values or change what they point to atomically (taking a reference to a
  /// refcounted value): unlike DoFuncForAllEntries(), it makes lookups wait for
  /// nobody and revokes no shard's read bias (each revocation is a membarrier(), ~1 us or
  /// more). 'fn' must be short and must not call into this map.
  template <typename Fn>
  void VisitAllShared(Fn&& fn) const {
    CheckNotIterating("VisitAllShared");
    LockedMapMarker marker(this, "VisitAllShared callback");
    for (int i = 0; i < num_shards_; ++i) {
      const Shard& s = shards_[i];
      ReaderLockGuard l(&s.lock);
      for (const auto& [id, value] : s.map) fn(id, value);
    }
  }

  /// Copies every (id, value) out, one shard lock at a time (shared). The result is not an
  /// atomic snapshot of the whole map: entries added or removed during the copy may be missed.
  [[nodiscard]] std::vector<std::pair<Key, T>> Snapshot() const {
    CheckNotIterating("Snapshot");
    std::vector<std::pair<Key, T>> out;
    out.reserve(Count() + 16);
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      ReaderLockGuard l(&s.lock);
      for (const auto& [id, value] : s.map) out.emplace_back(id, value);
    }
    return out;
  }

  /// Calls 'fn(const Key&, const T&)' for every entry of a Snapshot(), with no lock held:
  /// 'fn' may be slow and may call into the map.
  template <typename Fn>
  void ForEachUnlocked(Fn&& fn) const {
    for (const auto& [id, value] : Snapshot()) fn(id, value);
  }

  /// QR_REQUIRES: 0 <= shard < num_shards() (checked).
  ShardStats GetShardStats(int shard) const {
    QR_CHECK(shard >= 0 && shard < num_shards_, "GetShardStats: no such shard");
    const Shard& s = shards_[shard];
    const uint64_t shared = s.lock.shared_acquisitions();
    return ShardStats{s.size.load(std::memory_order_relaxed), s.lock.acquisitions() + shared,
                      shared, s.lock.contended_acquisitions(), s.lock.sleeps(),
                      s.lock.bias_revocations(), s.lock.read_biased()};
  }

 private:
  struct alignas(128) Shard {
    /// Protects 'map' (and 'size''s writes).
    mutable ShardLock lock;
    Map map QR_GUARDED_BY(lock);
    /// map.size() as of the last change, readable without the lock.
    std::atomic<uint64_t> size{0};

    void PublishSize() QR_REQUIRES(lock) { size.store(map.size(), std::memory_order_relaxed); }
  };

  /// Returns 'read(const Map&)' run on 's''s map with 's' held shared. 'read' is inlined
  /// twice (always_inline on the callers' lambdas), once per way in: read-biased
  /// (ShardLock::try_lock_shared_biased()), which then keeps no slot number, tests none at the
  /// release and keeps the thread's record in a register, or through a reader slot. With the
  /// shard choice, 97 instructions per Get became 85 (docs/benchmarks.md, "The read-biased
  /// Get, trimmed").
  // No analysis: each branch holds s.lock shared around read(s.map) and releases it in a
  // guard's destructor, which the analysis cannot pair with the acquisition.
  template <typename Read>
  [[gnu::always_inline]] static decltype(auto) ReadShard(Shard& s, Read&& read)
      QR_NO_THREAD_SAFETY_ANALYSIS {
    if (internal::BiasedReader* hold = s.lock.try_lock_shared_biased()) [[likely]] {
      struct Release {
        ShardLock& lock;
        internal::BiasedReader* const hold;
        [[gnu::always_inline]] ~Release() QR_NO_THREAD_SAFETY_ANALYSIS {
          lock.unlock_shared_biased(hold);
        }
      } release{s.lock, hold};
      return read(std::as_const(s.map));
    }
    struct ReleaseSlot {
      ShardLock& lock;
      const uint32_t slot;
      [[gnu::always_inline]] ~ReleaseSlot() QR_NO_THREAD_SAFETY_ANALYSIS {
        lock.unlock_shared_slot(slot);
      }
    } release{s.lock, s.lock.lock_shared_slot()};
    return read(std::as_const(s.map));
  }

  /// Marks this thread as holding a shard lock of 'map' while user code runs (debug builds).
  class LockedMapMarker {
   public:
    LockedMapMarker(const void* map, const char* holder) : map_(map) { Push(map, holder); }
    ~LockedMapMarker() { Pop(map_); }
    LockedMapMarker(const LockedMapMarker&) = delete;
    LockedMapMarker& operator=(const LockedMapMarker&) = delete;

    static void Push([[maybe_unused]] const void* map, [[maybe_unused]] const char* holder) {
#ifndef NDEBUG
      const int n = internal::tls_num_locked_maps++;
      if (n < internal::kMaxTrackedMaps) {
        internal::tls_locked_maps[n] = map;
        internal::tls_lock_holders[n] = holder;
      }
#endif
    }
    static void Pop([[maybe_unused]] const void* map) {
#ifndef NDEBUG
      // Scopes end in reverse order, so this is the innermost one.
      const int n = --internal::tls_num_locked_maps;
      if (n < internal::kMaxTrackedMaps) internal::tls_locked_maps[n] = nullptr;
#endif
    }

   private:
    [[maybe_unused]] const void* const map_;
  };

  // Indexed by the unsigned number (no sign extension of ShardIndex()'s int).
  [[gnu::always_inline]] Shard& ShardFor(const Key& id) const {
    return shards_[pick_shard_(Traits::ShardBits(id))];
  }

  void CheckNotIterating([[maybe_unused]] const char* method) const {
#ifndef NDEBUG
    const int n = std::min(internal::tls_num_locked_maps, internal::kMaxTrackedMaps);
    for (int i = 0; i < n; ++i) {
      if (internal::tls_locked_maps[i] == this) {
        internal::DieOnReentry(method, internal::tls_lock_holders[i]);
      }
    }
#endif
  }

  const int num_shards_;
  const FibonacciShardPicker pick_shard_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace qr
