#pragma once

// MirroredRegistry: the route "a validated Get for pointer values, every other operation on
// ShardLock" for issue 20, item 3, measured before building it into ShardedQueryMap. It keeps
// the registry as it is (a ShardedQueryMap, for references taken under the shard lock, walks,
// ScopedShardedMapRef) and a SeqlockTagMap beside it holding the same pointers, which Get
// reads without writing anything. Add and Delete change both.
//
// The two maps have a lock each: a write takes the ShardLock exclusively and then the tag
// table's SpinLock. Built into the registry, the ShardLock would cover both tables and the
// second lock would go, so a write here costs at most one SpinLock acquisition more than the
// integrated design's; Get costs what SeqlockTagMap's Get costs. A benchmark variant only: a
// key added and deleted by different threads at once could leave the two maps apart, which
// the benchmark's mixes never do (each key has one writer at a time).
// Thread-safety: thread-safe (each call on its own, as above).

#include "util/seqlock-tag-map.h"
#include "util/sharded-query-map-util.h"
#include "util/unique-id.h"

namespace qr::bench {

template <typename T>
class MirroredRegistry {
 public:
  explicit MirroredRegistry(int num_shards) : map_(num_shards), mirror_(num_shards) {}

  bool Add(const UniqueId& id, T v) {
    if (!map_.Add(id, v).ok()) return false;
    mirror_.Add(id, v);
    return true;
  }
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    return mirror_.Get(id, out);
  }
  bool Delete(const UniqueId& id) {
    mirror_.Delete(id);
    return map_.Delete(id).ok();
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    map_.ForEachUnlocked(fn);
  }

 private:
  ShardedQueryMap<T> map_;
  SeqlockTagMap<T> mirror_;
};

}  // namespace qr::bench
