#pragma once

// HazardSharedMap: the coordinator's ClientRequestStateMap (id -> shared_ptr, a lookup copies
// the shared_ptr) over a SeqlockTagMap read without a lock, for BM_RequestLifecycle (issue 20):
// what does a lookup that takes a shared_ptr gain when the map stores nothing per read? A
// benchmark variant, not the registry.
//
// The map holds a pointer to a box that owns one shared_ptr. A Get finds the box, publishes it
// in the thread's hazard record (hazard-domain.h), checks that no writer has changed the box's
// shard since (one load of its seqlock version: the box is still registered, so still alive),
// copies the shared_ptr out of it (the control block's locked increment, as every shared_ptr
// copy) and clears the record. A Delete unregisters the box and retires it; the box, and with
// it the map's reference, is deleted once no record holds it (up to ~2R deletions late, where
// ClientRequestStateMap drops its reference at once). Per lookup the reader pays the map's
// loads, two stores to its own line, one load of the version and the shared_ptr's increment;
// ClientRequestStateMap pays ShardLock's two locked RMWs on top of the same increment.
//
// Thread-safety: thread-safe. A thread's Gets do not nest.

#include <memory>
#include <utility>

#include "benchmarks/hazard-domain.h"
#include "util/seqlock-tag-map.h"
#include "util/unique-id.h"

namespace qr::bench {

/// 'kAsymmetric' as HazardDomain's.
template <typename V, bool kAsymmetric>
class HazardSharedMap {
 public:
  /// 'scan_batch': as HazardDomain's.
  explicit HazardSharedMap(int num_shards, size_t scan_batch = Domain::kDefaultScanBatch)
      : map_(num_shards), domain_(scan_batch) {}
  /// No reader or writer may be running.
  ~HazardSharedMap() {
    // The registered boxes; the retired ones are the domain's.
    map_.ForEachValue([](Box* b) { delete b; });
  }
  HazardSharedMap(const HazardSharedMap&) = delete;
  HazardSharedMap& operator=(const HazardSharedMap&) = delete;

  /// Adds 'id' -> 'v'; false if 'id' is present.
  bool Add(const UniqueId& id, std::shared_ptr<V> v) {
    auto* b = new Box{std::move(v)};
    if (!map_.Add(id, b)) {
      delete b;
      return false;
    }
    return true;
  }

  /// Copies the shared_ptr of 'id' to '*out'; false if absent.
  bool Get(const UniqueId& id, std::shared_ptr<V>* out) {
    typename Domain::Record* r = Domain::Mine();
    for (;;) {
      Box* b = nullptr;
      typename SeqlockTagMap<Box*>::Ticket ticket;
      if (!map_.Get(id, &b, &ticket)) {
        Domain::Clear(r);  // Set if this is a retry.
        return false;
      }
      domain_.Protect(r, b);
      // No writer changed the shard since the find: 'b' is still registered, so a Delete that
      // unregisters it later will see the hazard in its scan.
      if (!SeqlockTagMap<Box*>::Unchanged(ticket)) continue;
      *out = b->value;
      Domain::Clear(r);
      return true;
    }
  }

  /// Removes 'id'; false if absent. The map's reference is dropped once no reader holds it.
  bool Delete(const UniqueId& id) {
    Box* b = nullptr;
    if (!map_.Delete(id, &b)) return false;
    domain_.Retire(b);
    return true;
  }

 private:
  struct Box {
    std::shared_ptr<V> value;  // Never changed while registered or retired.
  };
  using Domain = HazardDomain<Box, kAsymmetric>;

  SeqlockTagMap<Box*> map_;
  /// Declared after map_: destroyed first, while no reader runs.
  Domain domain_;
};

}  // namespace qr::bench
