#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/system-tables.h"
#include "util/mutex.h"

namespace qr {

class ClusterView;
class Membership;
class QueryCoordinator;
class Webserver;

/// system.runtime.queries and system.runtime.nodes of one coordinator (and, in a cluster, the
/// members it knows of): its registry's
/// Snapshot() (taken shard by shard) and its completed-query log, each query listed once,
/// filtered by who asks (AccessControl's rule: with authentication, a non-admin sees only
/// their own queries).
/// Thread-safety: thread-safe; set_coordinator() before the first query runs.
class CoordinatorRuntimeTables : public SystemTablesSource {
 public:
  /// How this node appears in system.runtime.nodes (known once the webserver listens).
  void set_node(std::string node_id, std::string http_uri) QR_EXCLUDES(lock_) {
    MutexLock l(&lock_);
    node_id_ = std::move(node_id);
    http_uri_ = std::move(http_uri);
  }

  /// With a cluster, system.runtime.nodes lists its members as the watch last saw them
  /// (this one always). Must outlive every query of the engine.
  void set_membership(const Membership* m) { membership_.store(m, std::memory_order_release); }

  /// The coordinator whose queries are shown; must outlive every query of the engine.
  void set_coordinator(QueryCoordinator* c) { coordinator_.store(c, std::memory_order_release); }

  /// In a cluster (with a view: not with authentication but no secret), system.runtime.queries
  /// also lists every other live member's queries, asked on 'web''s first I/O thread and
  /// waited for on the executor thread up to the view's deadline; a member that does not
  /// answer is left out (counted in qr_cluster_view_*). Both must outlive every query.
  void set_cluster_view(ClusterView* view, Webserver* web) {
    web_.store(web, std::memory_order_release);
    cluster_view_.store(view, std::memory_order_release);
  }

  std::vector<RuntimeQueryRow> Queries(const SqlViewer& viewer) override;
  /// This member's queries only (what another member's fan-out asks for).
  std::vector<RuntimeQueryRow> LocalQueries(const SqlViewer& viewer);
  /// system.runtime.completed_queries: with the query history on, every retained record in
  /// the order written (through its index, a batch of records read per call); without it,
  /// the completed-query log, oldest first.
  bool CompletedQueries(const SqlViewer& viewer, size_t max, uint64_t* position,
                        std::vector<RuntimeQueryRow>* batch) override;
  std::vector<RuntimeNodeRow> Nodes() override QR_EXCLUDES(lock_);

 private:
  Mutex lock_;
  std::string node_id_ QR_GUARDED_BY(lock_);
  std::string http_uri_ QR_GUARDED_BY(lock_);
  std::atomic<QueryCoordinator*> coordinator_{nullptr};
  std::atomic<const Membership*> membership_{nullptr};
  std::atomic<ClusterView*> cluster_view_{nullptr};
  std::atomic<Webserver*> web_{nullptr};
};

}  // namespace qr
