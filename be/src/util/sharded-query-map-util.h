#pragma once

// Before Abseil's headers: see the note in util/thread-annotations.h.
#include "util/thread-annotations.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <gflags/gflags_declare.h>
#include <glog/logging.h>

#include "util/shard-lock.h"
#include "util/status.h"
#include "util/unique-id.h"

DECLARE_int32(registry_num_shards);

namespace qr {

/// OK if 'num_shards' is a power of two in [1, kMaxRegistryShards]; otherwise an error saying
/// what is accepted.
Status ValidateNumShards(int64_t num_shards);
inline constexpr int kMaxRegistryShards = 4096;

/// Statistics of one shard of a ShardedQueryMap. Read without the shard lock: each number is
/// exact when read but the set is not a consistent snapshot.
struct ShardStats {
  uint64_t entries = 0;
  /// Acquisitions of the shard's lock: exclusive (Add, Delete, ScopedShardedMapRef,
  /// DoFuncForAllEntries) plus shared (Get, Snapshot); the shared ones alone below.
  uint64_t acquisitions = 0;
  uint64_t shared_acquisitions = 0;
  uint64_t contended_acquisitions = 0;
  uint64_t sleeps = 0;
};

namespace internal {
/// The map whose DoFuncForAllEntries() is running on this thread (debug builds only).
inline thread_local const void* tls_iterating_map = nullptr;
[[noreturn]] void DieOnReentry(const char* method);
}  // namespace internal

/// A process-wide registry of values keyed by query id, split into N shards, each an inner hash
/// map guarded by its own ShardLock, so that lookups of different queries rarely contend, and
/// lookups (Get, Snapshot: shared) on different cores do not even write a common cache line.
/// Writers (Add, Delete, ScopedShardedMapRef, DoFuncForAllEntries) hold a shard exclusively. The
/// shard is chosen from the id's 'hi' half (mixed, so sequential ids spread too); all fragment
/// instances of a query (same 'hi') live in the query's shard.
///
/// Thread-safety: all methods are thread-safe. Callbacks of DoFuncForAllEntries() run with a
/// shard lock held: they must be short and must not touch this map (debug builds abort if they
/// do). Snapshot() and ForEachUnlocked() run user code with no lock held.
/// Lock order: a shard lock is a leaf. The map never holds two shard locks at once, and callers
/// must not take other locks while holding one (the coordinator's lock order writes this out).
/// T should be cheap to copy (a pointer or a shared_ptr): Get() and Snapshot() copy it out.
/// The default inner map is an open-addressing table (absl::flat_hash_map): a lookup touches
/// one group of control bytes and one slot instead of a bucket array, a node and its chain,
/// which docs/benchmarks.md measures at 1.2-4x the throughput of std::unordered_map. Entries
/// move when the table grows: nothing may keep a pointer or reference to an entry (or
/// iterator) past the shard lock (copy the value out instead, as Get() and Snapshot() do).
template <typename T, typename InnerMap = absl::flat_hash_map<UniqueId, T, UniqueIdHash>>
class ShardedQueryMap {
 private:
  struct Shard;

 public:
  using Map = InnerMap;

  /// QR_REQUIRES: ValidateNumShards(num_shards) is OK (checked: a bad value is a fatal error;
  /// the --registry_num_shards flag is validated at flag-parsing time).
  explicit ShardedQueryMap(int num_shards = FLAGS_registry_num_shards)
      : num_shards_(num_shards),
        mask_(static_cast<uint64_t>(num_shards) - 1),
        shard_bits_(std::countr_zero(static_cast<uint64_t>(num_shards))) {
    Status s = ValidateNumShards(num_shards);
    CHECK(s.ok()) << s.message();
    shards_ = std::make_unique<Shard[]>(num_shards);
  }
  ShardedQueryMap(const ShardedQueryMap&) = delete;
  ShardedQueryMap& operator=(const ShardedQueryMap&) = delete;

  int num_shards() const { return num_shards_; }

  /// The shard that owns 'id': the top log2(num_shards) bits of hi * 2^64/phi (Fibonacci
  /// hashing). Three instructions instead of a full mix; sequential ids spread as evenly as
  /// random ones (the multiplier's top bits depend on every bit of 'hi'). The inner map's hash
  /// mixes all of 'hi' and 'lo' again, so the shard's fixed top bits do not bias it.
  [[gnu::always_inline]] int ShardIndex(const UniqueId& id) const {
    return static_cast<int>(std::rotl(id.hi * kFibonacci, shard_bits_) & mask_);
  }
  static constexpr uint64_t kFibonacci = 0x9e3779b97f4a7c15ULL;

  /// RAII lock of the shard owning an id; '->' and '*' give that shard's inner map.
  /// Keep it short-lived: no I/O, no other locks, no allocation-heavy work while it lives.
  class ScopedShardedMapRef {
   public:
    /// Holds the shard exclusively (the caller may change the map or its values).
    ScopedShardedMapRef(const UniqueId& id, ShardedQueryMap* map) QR_NO_THREAD_SAFETY_ANALYSIS
        : map_(map), shard_(&map->shards_[map->ShardIndex(id)]) {
      map_->CheckNotIterating("ScopedShardedMapRef");
      shard_->lock.lock();
    }
    ~ScopedShardedMapRef() QR_NO_THREAD_SAFETY_ANALYSIS {
      shard_->PublishSize();
      shard_->lock.unlock();
    }
    ScopedShardedMapRef(const ScopedShardedMapRef&) = delete;
    ScopedShardedMapRef& operator=(const ScopedShardedMapRef&) = delete;

    Map* get() QR_NO_THREAD_SAFETY_ANALYSIS { return &shard_->map; }
    Map* operator->() { return get(); }
    Map& operator*() { return *get(); }

   private:
    ShardedQueryMap* const map_;
    Shard* const shard_;
  };

  /// Inserts ('id', 'value'). AlreadyExists if 'id' is present (the map is unchanged).
  Status Add(const UniqueId& id, T value) {
    CheckNotIterating("Add");
    Shard& s = ShardFor(id);
    {
      WriterLockGuard l(&s.lock);
      if (s.map.try_emplace(id, std::move(value)).second) {
        s.PublishSize();
        return Status::OK();
      }
    }
    return AlreadyExists("query id " + PrintId(id) + " is already registered");
  }

  /// A copy of the value registered for 'id', or nullopt. Holds the shard shared: concurrent
  /// Gets of one shard run in parallel (T's copy must be safe from several threads at once, as
  /// a pointer's or a shared_ptr's is).
  [[gnu::always_inline]] std::optional<T> Get(const UniqueId& id) const {
    CheckNotIterating("Get");
    Shard& s = ShardFor(id);
    ReaderLockGuard l(&s.lock);
    auto it = s.map.find(id);
    if (it == s.map.end()) return std::nullopt;
    return it->second;
  }

  /// Calls 'fn(const T* value)' with the shard held shared, 'value' pointing at the entry of
  /// 'id' or nullptr when it is absent, and returns what 'fn' returns: for work that must see
  /// the entry still registered, such as taking a reference on it (QueryExecMgr). 'fn' runs
  /// beside the shard's other readers, so it may only read the value or change what it points
  /// to atomically; it must be short and must not call into this map.
  template <typename Fn>
  [[gnu::always_inline]] decltype(auto) VisitShared(const UniqueId& id, Fn&& fn) const {
    CheckNotIterating("VisitShared");
    Shard& s = ShardFor(id);
    ReaderLockGuard l(&s.lock);
    auto it = s.map.find(id);
    return fn(it == s.map.end() ? static_cast<const T*>(nullptr) : &it->second);
  }

  /// Removes 'id', moving its value into 'removed' if not null. NotFound if absent.
  /// The value is destroyed (or handed out) after the shard lock is released.
  Status Delete(const UniqueId& id, T* removed = nullptr) {
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
    if (!victim) return NotFound("query id " + PrintId(id) + " is not registered");
    if (removed != nullptr) *removed = std::move(*victim);
    return Status::OK();
  }

  /// Number of entries: the sum of the shards' sizes, each read at a different moment.
  size_t Count() const {
    size_t n = 0;
    for (int i = 0; i < num_shards_; ++i) n += shards_[i].size.load(std::memory_order_relaxed);
    return n;
  }

  /// Calls 'fn(const UniqueId&, T&)' for every entry, holding each shard's lock while visiting
  /// that shard. 'fn' must be short and must not call into this map.
  template <typename Fn>
  void DoFuncForAllEntries(Fn&& fn) {
    CheckNotIterating("DoFuncForAllEntries");
    IterationMarker marker(this);
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      WriterLockGuard l(&s.lock);  // 'fn' gets a mutable value.
      for (auto& [id, value] : s.map) fn(id, value);
    }
  }

  /// Copies every (id, value) out, one shard lock at a time. The result is not an atomic
  /// snapshot of the whole map: entries added or removed during the copy may be missed.
  std::vector<std::pair<UniqueId, T>> Snapshot() const {
    CheckNotIterating("Snapshot");
    std::vector<std::pair<UniqueId, T>> out;
    out.reserve(Count() + 16);
    for (int i = 0; i < num_shards_; ++i) {
      Shard& s = shards_[i];
      ReaderLockGuard l(&s.lock);
      for (const auto& [id, value] : s.map) out.emplace_back(id, value);
    }
    return out;
  }

  /// Calls 'fn(const UniqueId&, const T&)' for every entry of a Snapshot(), with no lock held:
  /// 'fn' may be slow and may call into the map.
  template <typename Fn>
  void ForEachUnlocked(Fn&& fn) const {
    for (const auto& [id, value] : Snapshot()) fn(id, value);
  }

  ShardStats GetShardStats(int shard) const {
    const Shard& s = shards_[shard];
    const uint64_t shared = s.lock.shared_acquisitions();
    return ShardStats{s.size.load(std::memory_order_relaxed), s.lock.acquisitions() + shared,
                      shared, s.lock.contended_acquisitions(), s.lock.sleeps()};
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

  class IterationMarker {
   public:
    explicit IterationMarker(const void* map) {
#ifndef NDEBUG
      prev_ = internal::tls_iterating_map;
      internal::tls_iterating_map = map;
#endif
    }
    ~IterationMarker() {
#ifndef NDEBUG
      internal::tls_iterating_map = prev_;
#endif
    }

   private:
    [[maybe_unused]] const void* prev_ = nullptr;
  };

  Shard& ShardFor(const UniqueId& id) const { return shards_[ShardIndex(id)]; }

  void CheckNotIterating(const char* method) const {
#ifndef NDEBUG
    if (internal::tls_iterating_map == this) internal::DieOnReentry(method);
#endif
  }

  const int num_shards_;
  const uint64_t mask_;
  const int shard_bits_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace qr
