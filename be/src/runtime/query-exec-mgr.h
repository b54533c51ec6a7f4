#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include <glog/logging.h>

#include "runtime/query-state.h"
#include "runtime/registry-flags.h"
#include "runtime/stable-query-registry.h"
#include "util/mutex.h"
#include "util/status.h"

namespace qr {

class QueryExecMgr;

/// Holds one reference to a QueryState and releases it when destroyed. Movable, not copyable.
class QueryStateHandle {
 public:
  QueryStateHandle() = default;
  /// Owns one reference to 'qs'; 'mgr' must outlive the handle (QueryExecMgr's destructor
  /// expects every QueryState released).
  QueryStateHandle(QueryExecMgr* mgr, QueryState* qs) : mgr_(mgr), qs_(qs) {}
  ~QueryStateHandle() { Reset(); }
  QueryStateHandle(QueryStateHandle&& o) noexcept : mgr_(o.mgr_), qs_(o.qs_) { o.qs_ = nullptr; }
  QueryStateHandle& operator=(QueryStateHandle&& o) noexcept;
  QueryStateHandle(const QueryStateHandle&) = delete;
  QueryStateHandle& operator=(const QueryStateHandle&) = delete;

  QueryState* get() const { return qs_; }
  QueryState* operator->() const { return qs_; }
  explicit operator bool() const { return qs_ != nullptr; }
  /// Releases the reference now.
  void Reset();
  /// A second reference to the same QueryState.
  QueryStateHandle Clone() const;

 private:
  QueryExecMgr* mgr_ = nullptr;
  QueryState* qs_ = nullptr;
};

/// Executor-side registry of live queries, keyed by query id (QueryStateRegistry,
/// runtime/stable-query-registry.h: issue 20, item 3).
///
/// Each QueryState lives in a node of type-stable memory with an atomic reference count beside
/// it: CreateQueryState() starts it at 1, GetQueryState() finds the node in a sharded map whose
/// lookups take no lock and store nothing (a seqlock per shard: util/seqlock-tag-map.h), adds
/// one with a CAS that never raises it from 0 and checks that the node still holds the query
/// (its shard unchanged, else its id), ReleaseQueryState() removes one without any lock, and the
/// release that reaches 0 deletes the entry under the shard's writer lock, destroys the
/// QueryState and keeps its node for a later query. Between that release and the delete the id
/// is still registered but Get returns nullptr.
/// Bulk operations take references under the shards' writer locks and act after releasing them.
/// Thread-safety: all methods are thread-safe.
/// Ownership: owns every QueryState; one lives while its count is above zero. Nodes are freed
/// with the manager: 2 MiB slabs of 1,927 nodes, as many as the peak of live queries needs
/// (qr_executor_state_memory_bytes).
/// Lock order: a shard's writer lock is a leaf; a QueryState's own lock is never taken under it.
class QueryExecMgr {
 public:
  explicit QueryExecMgr(int num_shards = FLAGS_registry_num_shards);
  /// QR_REQUIRES: every QueryState has been released (checked in debug builds).
  ~QueryExecMgr();

  /// Registers a new QueryState with refcount 1 and returns it in 'out'.
  /// AlreadyExists if 'id' is registered.
  Status CreateQueryState(const UniqueId& id, QueryContext ctx, QueryStateHandle* out);
  /// Raw form of CreateQueryState: the caller owns one reference and must release it.
  Status CreateQueryState(const UniqueId& id, QueryContext ctx, QueryState** out);

  /// A new reference, or nullptr when 'id' is not registered. Inline, as the release: a lookup
  /// that takes no lock is short enough for a call to show (docs/benchmarks.md, "QueryExecMgr
  /// over the window table").
  QueryState* GetQueryState(const UniqueId& id) { return registry_.Get(id); }
  QueryStateHandle GetQueryStateHandle(const UniqueId& id);
  /// Drops one reference; the last one unregisters and deletes the QueryState.
  void ReleaseQueryState(QueryState* qs) {
    DCHECK(qs != nullptr);
    // False unless this was the last reference; then the state is unregistered and destroyed,
    // and the registry is done with it.
    if (registry_.Release(qs)) CountRelease();
  }

  /// Cancels every live query with 'reason'; returns how many were newly cancelled.
  int CancelAll(const QueryError& reason);
  /// Cancels every live query for which 'pred' holds. 'pred' runs with no lock held.
  int CancelIf(const std::function<bool(const QueryState&)>& pred, const QueryError& reason);
  /// References to every live query (each must be released: the handles do it).
  std::vector<QueryStateHandle> GetAll();
  /// Waits until every QueryState created has been released (and the releases are done with
  /// this manager, which may then be destroyed) or 'timeout_ms' passes. True when drained.
  bool WaitForDrain(int64_t timeout_ms);

  int64_t num_live() const { return registry_.Count(); }
  int64_t num_created() const { return created_.load(std::memory_order_relaxed); }
  int64_t num_released() const { return released_.load(std::memory_order_relaxed); }

  using Registry = QueryStateRegistry;
  const Registry& registry() const { return registry_; }

 private:
  /// After a state's last release: counts it for WaitForDrain (out of line).
  void CountRelease();

  Registry registry_;
  std::atomic<int64_t> created_{0};
  /// QueryStates deleted (their last reference released). Raised under drain_lock_ only.
  std::atomic<int64_t> released_{0};
  /// Signalled when a QueryState is deleted while someone waits for drain.
  Mutex drain_lock_;
  CondVar drained_;
  int drain_waiters_ QR_GUARDED_BY(drain_lock_) = 0;
};

}  // namespace qr
