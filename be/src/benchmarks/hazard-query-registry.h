#pragma once

// HazardQueryRegistry: QueryExecMgr's reference counting over a SeqlockTagMap, the question
// docs/benchmarks.md leaves for adopting a reader that stores nothing (issue 20): what does the
// executor's lookup, which must take a reference to the QueryState it finds, gain when the map
// itself is read without a lock? A benchmark variant for BM_QueryLifecycle, not the registry.
//
// A Get finds the state optimistically, publishes it in the thread's hazard record
// (hazard-domain.h), checks that no writer has changed the state's shard since (its seqlock
// version: one load; the state is still registered), then takes a reference unless the count is
// already 0, and clears the record. The last Release unregisters the state and retires it to the
// domain, which deletes it once no record holds it, up to ~2R deletions late: a difference from
// QueryExecMgr that adopting this would have to answer. Per access the reader pays the map's
// loads, two stores to its own line, one load of the shard's version and the reference count's
// CAS; ShardLockQueryRegistry (QueryExecMgr before issue 20) pays ShardLock's two locked RMWs
// on top of the same CAS.
//
// Thread-safety: thread-safe. A thread's Gets do not nest.

#include <atomic>
#include <cstdint>

#include <glog/logging.h>

#include "benchmarks/hazard-domain.h"
#include "runtime/query-state.h"
#include "util/seqlock-tag-map.h"
#include "util/unique-id.h"

namespace qr::bench {

/// 'kAsymmetric': membarrier on the deleting side where available; false: a seq_cst fence on
/// both sides (the reader's costs a locked instruction's store-buffer drain).
template <bool kAsymmetric>
class HazardQueryRegistry {
 public:
  /// A state is deleted at a scan after its last Release (for the tests shared with
  /// StableQueryRegistry).
  static constexpr bool kDefersDeletion = true;

  /// 'scan_batch': as HazardDomain's.
  explicit HazardQueryRegistry(int num_shards, size_t scan_batch = Domain::kDefaultScanBatch)
      : map_(num_shards), domain_(scan_batch) {}

  QueryState* Create(const UniqueId& id, const QueryContext& ctx) {
    QueryState* qs = TryCreate(id, ctx);
    CHECK(qs != nullptr);
    return qs;
  }
  /// Create, or nullptr if 'id' is registered (a query that ended, still referenced).
  QueryState* TryCreate(const UniqueId& id, const QueryContext& ctx) {
    auto* e = new Entry(id, ctx);
    if (!map_.Add(id, e)) {
      delete e;  // Never registered, so no reader can hold it.
      return nullptr;
    }
    return e;
  }

  /// States created and not deleted yet, over all registries (for tests).
  static int64_t LiveStates() { return live_states_.load(std::memory_order_relaxed); }

  /// A new reference, or nullptr when 'id' is not registered.
  QueryState* Get(const UniqueId& id) {
    typename Domain::Record* r = Domain::Mine();
    for (;;) {
      Entry* e = nullptr;
      typename SeqlockTagMap<Entry*>::Ticket ticket;
      if (!map_.Get(id, &e, &ticket)) {
        Domain::Clear(r);  // Set if this is a retry.
        return nullptr;
      }
      domain_.Protect(r, e);
      // No writer changed the shard since the find: 'e' is still registered, so a deleter
      // that unregisters it later will see the hazard in its scan.
      if (!SeqlockTagMap<Entry*>::Unchanged(ticket)) continue;
      const bool ok = TryAddRef(e);
      Domain::Clear(r);
      return ok ? e : nullptr;
    }
  }

  /// Drops one reference; the last one unregisters the state and deletes it once unprotected.
  void Release(QueryState* qs) {
    auto* e = static_cast<Entry*>(qs);
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) > 1) return;
    CHECK(map_.Delete(e->query_id()));
    domain_.Retire(e);
  }

 private:
  struct Entry : QueryState {
    Entry(const UniqueId& id, const QueryContext& ctx) : QueryState(id, ctx) {
      live_states_.fetch_add(1, std::memory_order_relaxed);
    }
    ~Entry() { live_states_.fetch_sub(1, std::memory_order_relaxed); }
    std::atomic<int32_t> refs{1};
  };
  using Domain = HazardDomain<Entry, kAsymmetric>;

  static bool TryAddRef(Entry* e) {
    int32_t n = e->refs.load(std::memory_order_relaxed);
    do {
      if (n == 0) return false;
    } while (!e->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
  }

  SeqlockTagMap<Entry*> map_;
  /// Declared after map_: destroyed first, while no reader runs.
  Domain domain_;
  static inline std::atomic<int64_t> live_states_{0};
};

}  // namespace qr::bench
