#pragma once

// StableQueryRegistry: QueryExecMgr's reference counting over a SeqlockTagMap, with the states in
// type-stable memory instead of hazard records (issue 20, item 3; compare
// hazard-query-registry.h). A benchmark variant for BM_QueryLifecycle, not the registry.
//
// A state lives in a node that is never freed while the registry lives: the last Release
// unregisters the state, destroys it and returns the node to the registry's pool, and a later
// Create reuses the node. The node's reference count and query id are atomics that outlive the
// state, so a reader holding a stale node pointer (its find raced with the node's end and reuse)
// touches only them: it takes a reference with the same CAS as QueryExecMgr::TryAddRef, which
// fails on a count of 0 (the state is ending or not yet built), then checks the node's id. A
// reference to a node that now holds another query is dropped again (a Release like any other,
// which ends that query if its owner has let go meanwhile) and the lookup retries. So a Get stores
// nothing but the reference it takes (no hazard record, no fence), and a state is destroyed at
// its last Release, as QueryExecMgr's are (its node's memory stays with the registry, at most the
// peak of live states).
//
// Ordering: Create builds the state and writes the id before the count's release store of 1; a
// reader's CAS acquires it. The last Release's acq_rel decrement orders every reader's use before
// the destruction. Thread-safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <glog/logging.h>

#include "benchmarks/seqlock-tag-map.h"
#include "runtime/query-state.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr::bench {

class StableQueryRegistry {
 public:
  /// A state is destroyed at its last Release (for the tests shared with HazardQueryRegistry).
  static constexpr bool kDefersDeletion = false;

  explicit StableQueryRegistry(int num_shards) : map_(num_shards) {}
  /// No Get or Release may be running; the states still registered are destroyed.
  ~StableQueryRegistry() {
    MutexLock l(&mu_);
    for (const std::unique_ptr<Node>& n : nodes_) {
      if (!n->state.has_value()) continue;
      n->state.reset();
      live_states_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  StableQueryRegistry(const StableQueryRegistry&) = delete;
  StableQueryRegistry& operator=(const StableQueryRegistry&) = delete;

  QueryState* Create(const UniqueId& id, const QueryContext& ctx) {
    Node* n = TakeNode();
    n->state.emplace(n, id, ctx);
    live_states_.fetch_add(1, std::memory_order_relaxed);
    n->hi.store(id.hi, std::memory_order_relaxed);
    n->lo.store(id.lo, std::memory_order_relaxed);
    n->refs.store(1, std::memory_order_release);  // Publishes the state and the id.
    CHECK(map_.Add(id, n));
    return &*n->state;
  }

  /// States built and not destroyed yet, over all registries (for tests).
  static int64_t LiveStates() { return live_states_.load(std::memory_order_relaxed); }

  /// A new reference, or nullptr when 'id' is not registered.
  QueryState* Get(const UniqueId& id) {
    for (;;) {
      Node* n = nullptr;
      if (!map_.Get(id, &n)) return nullptr;
      int32_t refs = n->refs.load(std::memory_order_relaxed);
      do {
        // 0: the state is ending (its Release unregisters it next) or not built yet; either
        // way 'id' is not registered to this node any more, or not yet.
        if (refs == 0) return nullptr;
      } while (!n->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed));
      if (n->hi.load(std::memory_order_relaxed) == id.hi &&
          n->lo.load(std::memory_order_relaxed) == id.lo) [[likely]] {
        return &*n->state;
      }
      // The node ended and holds another query now: drop the reference just taken (it may be
      // that query's last) and look again.
      Release(&*n->state);
    }
  }

  /// Drops one reference; the last one unregisters the state, destroys it and pools its node.
  void Release(QueryState* qs) {
    Node* n = static_cast<Stated*>(qs)->node;
    if (n->refs.fetch_sub(1, std::memory_order_acq_rel) > 1) return;
    End(n);
  }

 private:
  struct Node;
  /// A state that knows its node (for Release).
  struct Stated : QueryState {
    Stated(Node* n, const UniqueId& id, const QueryContext& ctx) : QueryState(id, ctx), node(n) {}
    Node* const node;
  };
  /// Type-stable: allocated once, never freed while the registry lives. The count and the id,
  /// which stale readers touch, share the first line.
  struct alignas(64) Node {
    std::atomic<int32_t> refs{0};
    std::atomic<uint64_t> hi{0};
    std::atomic<uint64_t> lo{0};
    std::optional<Stated> state;
  };

  /// After the last Release (out of line: it keeps Release's fast path free of its spills).
  [[gnu::noinline]] void End(Node* n) {
    CHECK(map_.Delete(n->state->query_id()));
    n->state.reset();
    live_states_.fetch_sub(1, std::memory_order_relaxed);
    MutexLock l(&mu_);
    free_.push_back(n);
  }

  Node* TakeNode() {
    MutexLock l(&mu_);
    if (!free_.empty()) {
      Node* n = free_.back();
      free_.pop_back();
      return n;
    }
    nodes_.push_back(std::make_unique<Node>());
    return nodes_.back().get();
  }

  SeqlockTagMap<Node*> map_;
  Mutex mu_;
  /// Every node ever allocated.
  std::vector<std::unique_ptr<Node>> nodes_ QR_GUARDED_BY(mu_);
  std::vector<Node*> free_ QR_GUARDED_BY(mu_);
  static inline std::atomic<int64_t> live_states_{0};
};

}  // namespace qr::bench
