#pragma once

// The concurrent maps that process-wide-locks-benchmark compares, behind one small interface
// so that every benchmark is a template over the variant:
//
//   explicit Map(int num_shards);                  // shard count (ignored where meaningless)
//   bool Add(const UniqueId&, T);                  // false if present
//   bool Get(const UniqueId&, T* out) const;       // copy-out; false if absent
//   bool Delete(const UniqueId&);                  // false if absent
//   template <class Fn> void ForEachLocked(Fn);    // fn(id, value) under the map's lock(s)
//   template <class Fn> void ForEachSnapshot(Fn);  // copy out under the lock(s), then fn unlocked
//
// None of the adapters adds work of its own beyond translating the call: the point is to
// measure the maps, not the wrappers. Thread-safety: like the wrapped map (BareMap is not
// thread-safe and is only used single-threaded, as the uncontended baseline).

// Abseil 20220623's legacy absl/base/internal/thread_annotations.h defines the same unprefixed
// QR_GUARDED_BY & co. as ours; util/thread-annotations.h #undefs them first, so the order of the
// includes does not matter.
#include "util/thread-annotations.h"

#include <bit>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <boost/thread/lock_guard.hpp>
#include <boost/thread/mutex.hpp>

#include "util/sharded-query-map-util.h"
#include "util/spinlock.h"
#include "util/unique-id.h"

#ifdef QR_HAVE_TBB
#include <tbb/concurrent_hash_map.h>
#endif
#ifdef QR_HAVE_LIBCUCKOO
#include <libcuckoo/cuckoohash_map.hh>
#endif

namespace qr::bench {

template <typename T>
using StdMap = std::unordered_map<UniqueId, T, UniqueIdHash>;
template <typename T>
using FlatMap = absl::flat_hash_map<UniqueId, T, UniqueIdHash>;

/// The original "before": one process-wide boost::mutex around one std::unordered_map.
template <typename T>
class GlobalMutexMap {
 public:
  explicit GlobalMutexMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) {
    boost::lock_guard<boost::mutex> l(lock_);
    return map_.try_emplace(id, std::move(v)).second;
  }
  bool Get(const UniqueId& id, T* out) const {
    boost::lock_guard<boost::mutex> l(lock_);
    auto it = map_.find(id);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  bool Delete(const UniqueId& id) {
    boost::lock_guard<boost::mutex> l(lock_);
    return map_.erase(id) == 1;
  }
  template <typename Fn>
  void ForEachLocked(Fn&& fn) {
    boost::lock_guard<boost::mutex> l(lock_);
    for (auto& [id, v] : map_) fn(id, v);
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    std::vector<std::pair<UniqueId, T>> copy;
    {
      boost::lock_guard<boost::mutex> l(lock_);
      copy.assign(map_.begin(), map_.end());
    }
    for (auto& [id, v] : copy) fn(id, v);
  }

 private:
  /// Protects 'map_'.
  mutable boost::mutex lock_;
  StdMap<T> map_;
};

/// One std::shared_mutex: lookups take it shared, writers exclusive.
template <typename T>
class SharedMutexMap {
 public:
  explicit SharedMutexMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) {
    std::unique_lock l(lock_);
    return map_.try_emplace(id, std::move(v)).second;
  }
  bool Get(const UniqueId& id, T* out) const {
    std::shared_lock l(lock_);
    auto it = map_.find(id);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  bool Delete(const UniqueId& id) {
    std::unique_lock l(lock_);
    return map_.erase(id) == 1;
  }
  template <typename Fn>
  void ForEachLocked(Fn&& fn) {
    std::shared_lock l(lock_);
    for (auto& [id, v] : map_) fn(id, v);
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    std::vector<std::pair<UniqueId, T>> copy;
    {
      std::shared_lock l(lock_);
      copy.assign(map_.begin(), map_.end());
    }
    for (auto& [id, v] : copy) fn(id, v);
  }

 private:
  /// Protects 'map_'.
  mutable std::shared_mutex lock_;
  StdMap<T> map_;
};

/// ShardedQueryMap's layout and shard choice with another lock type per shard ('Lock': any
/// Lockable): isolates what the lock itself costs.
template <typename T, typename Lock, typename Inner = StdMap<T>>
class ShardedLockMap {
 public:
  explicit ShardedLockMap(int num_shards)
      : num_shards_(num_shards),
        pick_shard_(num_shards),
        shards_(std::make_unique<Shard[]>(num_shards)) {}

  bool Add(const UniqueId& id, T v) {
    Shard& s = ShardFor(id);
    std::lock_guard l(s.lock);
    return s.map.try_emplace(id, std::move(v)).second;
  }
  // Inlined like ShardedQueryMap::Get is, so that instruction counts compare the locks and
  // not GCC's inlining choices for this template.
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    Shard& s = ShardFor(id);
    std::lock_guard l(s.lock);
    auto it = s.map.find(id);
    if (it == s.map.end()) return false;
    *out = it->second;
    return true;
  }
  bool Delete(const UniqueId& id) {
    Shard& s = ShardFor(id);
    std::lock_guard l(s.lock);
    return s.map.erase(id) == 1;
  }
  template <typename Fn>
  void ForEachLocked(Fn&& fn) {
    for (int i = 0; i < num_shards_; ++i) {
      std::lock_guard l(shards_[i].lock);
      for (auto& [id, v] : shards_[i].map) fn(id, v);
    }
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    std::vector<std::pair<UniqueId, T>> copy;
    for (int i = 0; i < num_shards_; ++i) {
      std::lock_guard l(shards_[i].lock);
      copy.insert(copy.end(), shards_[i].map.begin(), shards_[i].map.end());
    }
    for (auto& [id, v] : copy) fn(id, v);
  }

 private:
  struct alignas(128) Shard {
    /// Protects 'map'.
    Lock lock;
    Inner map;
  };
  // The same choice as ShardedQueryMap::ShardIndex.
  Shard& ShardFor(const UniqueId& id) const {
    return shards_[pick_shard_(id.hi)];
  }

  const int num_shards_;
  const FibonacciShardPicker pick_shard_;
  std::unique_ptr<Shard[]> shards_;
};

/// No lock at all, for ShardedLockMap: only in the lookup-only mix, where no thread writes
/// while the others read, so the reads are race-free. It is the ceiling of a read path that
/// writes no shared memory (seqlock- or epoch-validated reads): the difference to the locked
/// maps is what the lock's cache-line transfers between cores cost.
struct NoLock {
  void lock() {}
  void unlock() {}
  bool try_lock() { return true; }
};

/// The real thing: ShardedQueryMap (a ShardLock per shard) with the given inner map; the
/// variants ShardedQueryMap{N} (flat inner map), ShardedQueryMap256Std (std::unordered_map)
/// and ShardedQueryMap256Slots (ReadBias::kNever: every read through the reader slots, the
/// default before read bias).
template <typename T, typename Inner, ReadBias kBias = ReadBias::kAdaptive>
class ShardedQueryMapVariant {
 public:
  explicit ShardedQueryMapVariant(int num_shards) : map_(num_shards, kBias) {}

  bool Add(const UniqueId& id, T v) { return map_.Add(id, std::move(v)).ok(); }
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    std::optional<T> v = map_.Get(id);
    if (!v) return false;
    *out = std::move(*v);
    return true;
  }
  bool Delete(const UniqueId& id) { return map_.Delete(id).ok(); }
  template <typename Fn>
  void ForEachLocked(Fn&& fn) {
    map_.DoFuncForAllEntries(fn);
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    map_.ForEachUnlocked(fn);
  }
  /// Sums of the shards' lock statistics.
  ShardStats TotalLockStats() const {
    ShardStats total;
    for (int i = 0; i < map_.num_shards(); ++i) {
      ShardStats s = map_.GetShardStats(i);
      total.acquisitions += s.acquisitions;
      total.contended_acquisitions += s.contended_acquisitions;
      total.sleeps += s.sleeps;
    }
    return total;
  }

 private:
  ShardedQueryMap<T, UniqueId, Inner> map_;
};

/// The inner map with no lock at all: the floor an uncontended Get is compared against.
/// Thread-safety: none.
template <typename T, typename Inner>
class BareMap {
 public:
  explicit BareMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) { return map_.try_emplace(id, std::move(v)).second; }
  bool Get(const UniqueId& id, T* out) const {
    auto it = map_.find(id);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  bool Delete(const UniqueId& id) { return map_.erase(id) == 1; }

 private:
  Inner map_;
};

#ifdef QR_HAVE_TBB
struct UniqueIdHashCompare {
  static size_t hash(const UniqueId& id) { return UniqueIdHash()(id); }
  static bool equal(const UniqueId& a, const UniqueId& b) { return a == b; }
};

/// oneTBB concurrent_hash_map: per-bucket reader-writer locks plus a per-item lock held by the
/// accessor.
template <typename T>
class TbbMap {
 public:
  explicit TbbMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) { return map_.insert(std::make_pair(id, std::move(v))); }
  bool Get(const UniqueId& id, T* out) const {
    typename Map::const_accessor a;
    if (!map_.find(a, id)) return false;
    *out = a->second;
    return true;
  }
  bool Delete(const UniqueId& id) { return map_.erase(id); }

 private:
  using Map = tbb::concurrent_hash_map<UniqueId, T, UniqueIdHashCompare>;
  Map map_;
};
#endif

#ifdef QR_HAVE_LIBCUCKOO
/// libcuckoo cuckoohash_map: bucketized cuckoo hashing with striped spin locks (a lookup
/// locks the two candidate buckets' stripes).
template <typename T>
class CuckooMap {
 public:
  explicit CuckooMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) { return map_.insert(id, std::move(v)); }
  bool Get(const UniqueId& id, T* out) const { return map_.find(id, *out); }
  bool Delete(const UniqueId& id) { return map_.erase(id); }

 private:
  libcuckoo::cuckoohash_map<UniqueId, T, UniqueIdHash> map_;
};
#endif

}  // namespace qr::bench
