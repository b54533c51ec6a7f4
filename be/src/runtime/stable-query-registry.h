#pragma once

// StableQueryRegistry: reference-counted QueryStates over a SeqlockTagMap, with the states in
// type-stable memory (issue 20, item 3). QueryExecMgr's registry is one (QueryStateRegistry:
// absl's probe windows and the shard check); the other parameters are the variants
// process-wide-locks-benchmark compares (docs/benchmarks.md, "The reference protocol's shard
// check"; compare benchmarks/hazard-query-registry.h, which protects with hazard records).
//
// A state lives in a node that is never freed while the registry lives: the last Release
// unregisters the state, destroys it and returns the node to a pool of the registry (one of 16,
// by thread), and a later Create reuses the node. The node's reference count and query id are
// atomics that outlive the state, so a reader holding a stale node pointer (its find raced with
// the node's end and reuse) touches only them: it takes a reference unless the count says that
// none can be taken (the state is ending or not yet built; RefTake), then checks the node's id
// (or, with the shard check, first that the map's shard is unchanged since the find). A
// reference to a node that now holds another query is dropped again (a Release like any other,
// which ends that query if its owner has let go meanwhile) and the lookup retries. So a Get
// stores nothing but the reference it takes (no hazard record, no fence), and a state is
// destroyed at its last Release (its node's memory stays with the registry: at most the peak of
// live states, about 1 KiB each; QueryStateRegistry keeps its nodes in 2 MiB slabs, see
// NodeMemory).
//
// Ordering: Create builds the state, writes the id and registers the node before the count's
// release store of 1 (a reader that finds the node before it sees 0, or kAdd's dead count: not
// registered yet); a reader's reference acquires it. The last Release's acq_rel decrement orders
// every reader's use before the destruction. Thread-safety: thread-safe.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "runtime/query-state.h"
#include "util/mutex.h"
#include "util/seqlock-tag-map.h"
#include "util/sharded-query-map-util.h"
#include "util/thread-annotations.h"
#include "util/type-stable-nodes.h"
#include "util/unique-id.h"

namespace qr {

/// Test seams (Seams below), here doing nothing.
struct NoSeams {
  /// In a lookup, between its find and its reference.
  template <class Registry>
  static void AfterFind(Registry*) {}
  /// RefTake::kAdd: in the last Release, between its decrement to 0 and its mark of the count
  /// as dead.
  template <class Registry>
  static void BeforeMarkDead(Registry*) {}
};

/// How a lookup takes its reference on the node it found (docs/benchmarks.md, "Node memory and
/// the guessed count" and "A reference that is one add").
/// kLoadCas: load the count, then a CAS from it to one more, failing on 0 (the state ending or
///   not built yet).
/// kGuessOne: the same CAS, expecting a count of 1 (the creator's alone, the common case)
///   without loading the count first: the CAS fetches the line for writing at once, where a
///   load fetches it shared and the CAS then upgrades it. A wrong guess costs one failed CAS,
///   which returns the count to retry with.
/// kAdd: one fetch_add, which cannot fail (Linux's rcuref, over type-stable memory): where
///   other CPUs take and drop references on the same node (the hot query), a CAS fails and
///   retries, a locked add does not. The count word is a generation (high 32 bits) and a count
///   (low 32 bits); a count of kDeadCount or more is dead (the node pooled, or its state not
///   published yet). The last Release decrements to 0 and then marks the count dead with a CAS
///   from (its generation, 0); a lookup that added to that 0 before the mark made the CAS fail
///   and holds the state, whose next last Release tries again. A lookup that adds to a dead
///   count holds nothing and leaves its add there (it changes no live count: the next Create
///   on the node stores a new generation with a count of 1 over it). The generation makes a
///   mark delayed past the node's reuse fail instead of ending the next query.
enum class RefTake { kLoadCas, kGuessOne, kAdd };

/// kNodes: where the nodes live (above). kTake: how a lookup takes its reference (above).
/// kProbe: how the map's lookups walk its table (seqlock-tag-table.h): 8-slot groups one at a
/// time (kGroups), a group and the next one in one 16-byte load (kPairsOneLoad), or absl's
/// windows of 16 control bytes from the key's own slot (kWindows).
/// kShardCheck: after taking its reference, a lookup first checks that the map's shard has not
/// changed since it found the node (Unchanged: one load of the shard's version, a line only
/// writers write), and reads the node's id (the line every reference's CAS takes) only when it
/// has. Seams: NoSeams, or a test's hooks (end the query between a lookup's find and its
/// reference, look it up between the last decrement and the mark).
template <Probe kProbe = Probe::kGroups, bool kShardCheck = false, class Seams = NoSeams,
          NodeMemory kNodes = NodeMemory::kNew, RefTake kTake = RefTake::kLoadCas>
class BasicStableQueryRegistry {
 public:
  /// A state is destroyed at its last Release (for the tests shared with HazardQueryRegistry).
  static constexpr bool kDefersDeletion = false;

  explicit BasicStableQueryRegistry(int num_shards) : map_(num_shards) {}
  /// No Get or Release may be running; the states still registered are destroyed.
  ~BasicStableQueryRegistry() {
    nodes_.ForEachNode([](Node* n) {
      if (!n->live) return;
      n->DestroyState();
      live_states_.fetch_sub(1, std::memory_order_relaxed);
    });
  }
  BasicStableQueryRegistry(const BasicStableQueryRegistry&) = delete;
  BasicStableQueryRegistry& operator=(const BasicStableQueryRegistry&) = delete;

  QueryState* Create(const UniqueId& id, QueryContext ctx) {
    QueryState* qs = TryCreate(id, std::move(ctx));
    CHECK(qs != nullptr);
    return qs;
  }
  /// A new state with one reference, or nullptr if 'id' is registered (a live query, or one
  /// that ended and is still referenced).
  QueryState* TryCreate(const UniqueId& id, QueryContext ctx) {
    Node* n = TakeNode();
    n->BuildState(id, std::move(ctx));
    live_states_.fetch_add(1, std::memory_order_relaxed);
    n->hi.store(id.hi, std::memory_order_relaxed);
    n->lo.store(id.lo, std::memory_order_relaxed);
    // The count stays 0 until the state is registered: a reader that still holds this node
    // from an earlier query gets no reference to a state that may never be registered.
    if (!map_.Add(id, n)) {
      n->DestroyState();
      live_states_.fetch_sub(1, std::memory_order_relaxed);
      PoolNode(n);
      return nullptr;
    }
    // Publishes the state and the id (kAdd: a new generation over whatever dead count the
    // node had, stale lookups' adds included).
    uint64_t one = 1;
    if constexpr (kTake == RefTake::kAdd) {
      one |= ((n->refs.load(std::memory_order_relaxed) >> 32) + 1) << 32;
    }
    n->refs.store(one, std::memory_order_release);
    return n->state();
  }

  /// States built and not destroyed yet, over all registries (for tests).
  static int64_t LiveStates() { return live_states_.load(std::memory_order_relaxed); }

  /// A new reference, or nullptr when 'id' is not registered.
  QueryState* Get(const UniqueId& id) {
    for (;;) {
      Node* n = nullptr;
      typename Map::Ticket ticket;
      if constexpr (kShardCheck) {
        if (!map_.Get(id, &n, &ticket)) return nullptr;
      } else {
        if (!map_.Get(id, &n)) return nullptr;
      }
      Seams::AfterFind(this);
      // Not referenced: the state is ending (its Release unregisters it next) or not built
      // yet; either way 'id' is not registered to this node any more, or not yet.
      if (!n->TryRef()) return nullptr;
      // kShardCheck: the shard's version unchanged means 'id' is still registered to 'n' (a
      // node is reused only after its last Release deleted its id, which changed that
      // version; the reference acquired the count from the node's new owner, which happens
      // after that delete, so this load sees the change).
      if constexpr (kShardCheck) {
        if (Map::Unchanged(ticket)) [[likely]] return n->state();
      }
      if (n->hi.load(std::memory_order_relaxed) == id.hi &&
          n->lo.load(std::memory_order_relaxed) == id.lo) [[likely]] {
        return n->state();
      }
      // The node ended and holds another query now: drop the reference just taken (it may be
      // that query's last) and look again.
      Release(n->state());
    }
  }

  /// Drops one reference; the last one unregisters the state, destroys it and pools its node,
  /// and returns true (its last use of the registry).
  bool Release(QueryState* qs) {
    Node* n = Node::Of(qs);
    // acq_rel: the thread that drops the last reference sees what every other holder wrote.
    const uint64_t before = n->refs.fetch_sub(1, std::memory_order_acq_rel);
    DCHECK_GT(static_cast<uint32_t>(before), 0u);
    DCHECK_LT(static_cast<uint32_t>(before), kDeadCount);
    if (static_cast<uint32_t>(before) > 1) return false;
    if constexpr (kTake == RefTake::kAdd) {
      Seams::BeforeMarkDead(this);
      // A lookup that added to the 0 holds the state now (its last Release ends it).
      uint64_t zero = before - 1;
      if (!n->refs.compare_exchange_strong(zero, zero | kDeadCount, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        return false;
      }
    }
    End(n);
    return true;
  }

  /// Calls 'fn(QueryState*)' with a new reference to every registered state (which 'fn' must
  /// release), skipping the ones ending. Each shard is walked under its writers' lock (no Add
  /// or Delete of that shard meanwhile, lookups go on); 'fn' runs under it, so it must be
  /// short and must not call into the registry.
  template <typename Fn>
  void ForEachReferenced(Fn fn) {
    map_.ForEachValue([&](Node* n) {
      if (n->TryRef()) fn(n->state());  // Else ending, or not published yet.
    });
  }

  /// Nodes a slab holds (kSlabs, kHugeSlabs).
  static constexpr size_t NodesPerSlab() { return Nodes::NodesPerSlab(); }
  /// Bytes of node memory the registry holds (mapped slabs, or allocated nodes for kNew).
  size_t NodeBytes() const { return nodes_.Bytes(); }

  /// Registered states (exact when nothing is created or ended meanwhile).
  uint64_t Count() const { return map_.Count(); }
  int num_shards() const { return map_.num_shards(); }
  /// The map's statistics of one shard (entries, writer-lock acquisitions; lookups take none).
  ShardStats GetShardStats(int shard) const { return map_.GetShardStats(shard); }

 private:
  /// Type-stable: allocated once, never freed while the registry lives. The count and the id,
  /// which stale readers touch, share the first line; the state follows at a fixed offset, so
  /// Release finds the node from the state without a load (a pointer back from the state, at
  /// the end of its ~1 KB, cost a cache miss per Release at 100,000 live states).
  /// kAdd: a count of this or more (the low 32 bits of the count word) is dead; 2^31 stale adds
  /// to a dead count before the node's next Create would be needed to carry into the generation.
  static constexpr uint32_t kDeadCount = uint32_t{1} << 31;

  struct alignas(64) Node {
    /// References (the low 32 bits; 0 and, for kAdd, kDeadCount or more: none can be taken)
    /// and, for kAdd, the node's generation (the high 32 bits; see RefTake).
    std::atomic<uint64_t> refs{kTake == RefTake::kAdd ? kDeadCount : 0};
    std::atomic<uint64_t> hi{0};
    std::atomic<uint64_t> lo{0};
    bool live = false;  // A state is built in 'storage' (changed by its writers only).
    alignas(QueryState) unsigned char storage[sizeof(QueryState)];

    QueryState* state() { return std::launder(reinterpret_cast<QueryState*>(storage)); }
    /// Takes a reference unless none can be taken (acquire: from the Create that published
    /// the state, or a Release that came before).
    bool TryRef() {
      if constexpr (kTake == RefTake::kAdd) {
        const uint64_t before = refs.fetch_add(1, std::memory_order_acquire);
        return static_cast<uint32_t>(before) < kDeadCount;
      } else {
        uint64_t r = kTake == RefTake::kGuessOne ? 1 : refs.load(std::memory_order_relaxed);
        do {
          if (r == 0) return false;
        } while (!refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire,
                                             std::memory_order_relaxed));
        return true;
      }
    }
    void BuildState(const UniqueId& id, QueryContext ctx) {
      new (storage) QueryState(id, std::move(ctx));
      live = true;
    }
    void DestroyState() {
      state()->~QueryState();
      live = false;
    }
    static Node* Of(QueryState* qs);
  };

  /// After the last Release (out of line: it keeps Release's fast path free of its spills).
  [[gnu::noinline]] void End(Node* n) {
    CHECK(map_.Delete(n->state()->query_id()));
    n->DestroyState();
    live_states_.fetch_sub(1, std::memory_order_relaxed);
    PoolNode(n);
  }

  Node* TakeNode() { return nodes_.Take(); }
  void PoolNode(Node* n) { nodes_.Put(n); }

  using Map = SeqlockTagMap<Node*, Holds::kNone, 8, kProbe>;
  Map map_;
  using Nodes = TypeStableNodes<Node, kNodes>;
  Nodes nodes_;
  static inline std::atomic<int64_t> live_states_{0};
};

template <Probe kProbe, bool kShardCheck, class Seams, NodeMemory kNodes, RefTake kTake>
inline auto BasicStableQueryRegistry<kProbe, kShardCheck, Seams, kNodes, kTake>::Node::Of(
    QueryState* qs) -> Node* {
  static_assert(std::is_standard_layout_v<Node>, "offsetof needs a standard-layout node");
  return reinterpret_cast<Node*>(reinterpret_cast<unsigned char*>(qs) - offsetof(Node, storage));
}

using StableQueryRegistry = BasicStableQueryRegistry<>;
using StablePairQueryRegistry = BasicStableQueryRegistry<Probe::kPairsOneLoad>;
using StableWindowQueryRegistry = BasicStableQueryRegistry<Probe::kWindows>;
using StableWindowCheckQueryRegistry =
    BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true>;
/// QueryExecMgr's: absl's windows, the shard check, nodes in huge-page slabs, a reference that
/// is one add.
using QueryStateRegistry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true,
                                                    NoSeams, NodeMemory::kHugeSlabs,
                                                    RefTake::kAdd>;
/// QueryStateRegistry's steps, for the benchmarks: the nodes in slabs of 4 KiB pages, and in
/// huge-page slabs, each with a load and a CAS (StableWindowCheckQueryRegistry: neither), and
/// huge-page slabs with the guessed count.
using QueryStateSlabRegistry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true,
                                                        NoSeams, NodeMemory::kSlabs>;
using QueryStateHugeSlabRegistry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true,
                                                            NoSeams, NodeMemory::kHugeSlabs>;
using QueryStateGuessOneRegistry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true,
                                                            NoSeams, NodeMemory::kHugeSlabs,
                                                            RefTake::kGuessOne>;

}  // namespace qr
