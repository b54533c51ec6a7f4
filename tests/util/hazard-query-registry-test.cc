// HazardQueryRegistry (be/src/benchmarks/hazard-query-registry.h) and StableQueryRegistry
// (stable-query-registry.h): references over a map read without a lock, protected by hazard
// records or by type-stable nodes. Under the tsan preset a state deleted while a reader still
// uses it is a reported race; in every preset the tests count wrong states, failed gets of live
// queries and states never deleted.

#include "benchmarks/hazard-query-registry.h"
#include "runtime/stable-query-registry.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace qr::bench {
namespace {

QueryContext Context() {
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT 1");
  ctx.user = "test";
  return ctx;
}

template <typename Registry>
class HazardQueryRegistryTest : public ::testing::Test {};
using Registries = ::testing::Types<HazardQueryRegistry<true>, HazardQueryRegistry<false>,
                                    StableQueryRegistry, StablePairQueryRegistry,
                                    StableWindowQueryRegistry, StableWindowCheckQueryRegistry,
                                    QueryStateSlabRegistry, QueryStateHugeSlabRegistry,
                                    QueryStateGuessOneRegistry, QueryStateRegistry>;
TYPED_TEST_SUITE(HazardQueryRegistryTest, Registries);

TYPED_TEST(HazardQueryRegistryTest, ReferencesKeepAStateAndTheLastOneDeletesIt) {
  const int64_t live_before = TypeParam::LiveStates();
  {
    TypeParam registry(4);
    const UniqueId id = GenerateQueryId();
    QueryState* qs = registry.Create(id, Context());
    EXPECT_EQ(registry.Get(GenerateQueryId()), nullptr);
    QueryState* again = registry.Get(id);
    ASSERT_EQ(again, qs);
    registry.Release(qs);  // The creator's reference; 'again' keeps it registered.
    EXPECT_EQ(registry.Get(id), qs);
    registry.Release(qs);
    registry.Release(again);  // The last: unregistered, deleted at a later scan.
    EXPECT_EQ(registry.Get(id), nullptr);
    // Hazard records: retired, not yet scanned. Type-stable nodes: destroyed at once.
    EXPECT_EQ(TypeParam::LiveStates(), live_before + (TypeParam::kDefersDeletion ? 1 : 0));
  }
  EXPECT_EQ(TypeParam::LiveStates(), live_before);  // The destructor deletes the retired.
}

TYPED_TEST(HazardQueryRegistryTest, ReadersOfQueriesThatEndSeeOnlyLiveStates) {
  constexpr int kOwners = 3;
  constexpr int kQueriesPerOwner = 400;
  constexpr int kAccesses = 20;
  constexpr int kReaders = 2;
  constexpr int kWaitEvery = 50;  // An owner waits for a reader's reference every 50 queries.
  constexpr int kSlots = kOwners * kQueriesPerOwner;
  const int64_t live_before = TypeParam::LiveStates();
  std::vector<UniqueId> ids(kSlots);
  for (UniqueId& id : ids) id = GenerateQueryId();
  // The query each owner works on (created, or about to be, or just ended).
  std::vector<std::atomic<int>> current(kOwners);
  std::atomic<int> readers_started{0};
  std::atomic<uint64_t> references_taken{0};
  std::atomic<int> owners_running{kOwners};
  std::vector<uint64_t> wrong(kReaders, 0), hits(kReaders, 0), owner_misses(kOwners, 0);
  {
    // The hazard registries scan a list every 16 retirements (the default 512 would hardly scan
    // during the test), so states are deleted while readers run.
    std::unique_ptr<TypeParam> holder;
    if constexpr (std::is_constructible_v<TypeParam, int, size_t>) {
      holder = std::make_unique<TypeParam>(4, 16);
    } else {
      holder = std::make_unique<TypeParam>(4);
    }
    TypeParam& registry = *holder;
    std::vector<std::thread> threads;
    for (int o = 0; o < kOwners; ++o) {
      threads.emplace_back([&, o] {
        while (readers_started.load(std::memory_order_acquire) < kReaders) {
          std::this_thread::yield();
        }
        for (int q = 0; q < kQueriesPerOwner; ++q) {
          const UniqueId& id = ids[o * kQueriesPerOwner + q];
          current[o].store(q, std::memory_order_release);
          QueryState* qs = registry.Create(id, Context());
          if (q % kWaitEvery == 0) {
            // Until some reader has taken a reference since: the readers do race with ending
            // queries however the threads are scheduled (waits on the count, not on time).
            const uint64_t seen = references_taken.load(std::memory_order_acquire);
            while (references_taken.load(std::memory_order_acquire) == seen) {
              std::this_thread::yield();
            }
          }
          for (int a = 0; a < kAccesses; ++a) {
            QueryState* again = registry.Get(id);
            if (again != qs) {
              ++owner_misses[o];  // The owner's own reference keeps it registered.
              continue;
            }
            registry.Release(again);
          }
          registry.Release(qs);
        }
        owners_running.fetch_sub(1, std::memory_order_release);
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&, r] {
        readers_started.fetch_add(1, std::memory_order_release);
        uint64_t x = 777 + r;
        while (owners_running.load(std::memory_order_acquire) > 0) {
          // An owner's current query or the one before: live, being created, or ending (its
          // state being unregistered and deleted while this reader may hold it).
          x = Mix64(x + 1);
          const int o = static_cast<int>(x % kOwners);
          const int q = current[o].load(std::memory_order_acquire) - static_cast<int>(x >> 63);
          if (q < 0) continue;
          const UniqueId& id = ids[o * kQueriesPerOwner + q];
          QueryState* qs = registry.Get(id);
          if (qs == nullptr) continue;
          ++hits[r];
          references_taken.fetch_add(1, std::memory_order_release);
          if (qs->query_id() != id) ++wrong[r];  // Reads the state: TSan checks it is alive.
          registry.Release(qs);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int o = 0; o < kOwners; ++o) EXPECT_EQ(owner_misses[o], 0u) << "owner " << o;
    uint64_t all_hits = 0;
    for (int r = 0; r < kReaders; ++r) {
      EXPECT_EQ(wrong[r], 0u) << "reader " << r;
      all_hits += hits[r];
    }
    // The readers took references to live queries, at least one per owner's wait.
    EXPECT_GE(all_hits, static_cast<uint64_t>(kOwners * kQueriesPerOwner / kWaitEvery));
    for (const UniqueId& id : ids) EXPECT_EQ(registry.Get(id), nullptr);
  }
  EXPECT_EQ(TypeParam::LiveStates(), live_before);  // Every state deleted, none twice.
}

TEST(StableQueryRegistryTest, AnEndedQuerysNodeIsReusedAndItsOldIdMissesIt) {
  const int64_t live_before = StableQueryRegistry::LiveStates();
  StableQueryRegistry registry(4);
  const UniqueId a = GenerateQueryId();
  const UniqueId b = GenerateQueryId();
  QueryState* qa = registry.Create(a, Context());
  registry.Release(qa);  // The last reference: destroyed now, its node pooled.
  EXPECT_EQ(StableQueryRegistry::LiveStates(), live_before);
  EXPECT_EQ(registry.Get(a), nullptr);
  QueryState* qb = registry.Create(b, Context());
  EXPECT_EQ(qb, qa);  // The same node, holding another query.
  EXPECT_EQ(registry.Get(a), nullptr);
  QueryState* again = registry.Get(b);
  ASSERT_EQ(again, qb);
  EXPECT_EQ(again->query_id(), b);
  registry.Release(again);
  registry.Release(qb);
  EXPECT_EQ(StableQueryRegistry::LiveStates(), live_before);
}

/// Ends the query 'victim' and creates 'reuse_id' (which takes the ended query's node) inside
/// a lookup, between its find and its reference, once.
struct EndAndReuseOnce : NoSeams {
  static inline QueryState* victim = nullptr;
  static inline UniqueId reuse_id;
  static inline QueryState* created = nullptr;
  template <class Registry>
  static void AfterFind(Registry* registry) {
    if (victim == nullptr) return;
    registry->Release(std::exchange(victim, nullptr));
    created = registry->Create(reuse_id, Context());
  }
};

template <bool kShardCheck, RefTake kTake = RefTake::kLoadCas>
void ExpectANodeReusedBeforeTheReferenceIsNotReturned() {
  using Registry = BasicStableQueryRegistry<Probe::kWindows, kShardCheck, EndAndReuseOnce,
                                            NodeMemory::kNew, kTake>;
  const int64_t live_before = Registry::LiveStates();
  {
    Registry registry(4);
    const UniqueId a = GenerateQueryId();
    QueryState* qa = registry.Create(a, Context());
    EndAndReuseOnce::victim = qa;
    EndAndReuseOnce::reuse_id = GenerateQueryId();
    // The lookup finds a's node, then a ends and its node now holds another query: the
    // reference the lookup takes is to that query, which it must drop and not return.
    EXPECT_EQ(registry.Get(a), nullptr);
    ASSERT_EQ(EndAndReuseOnce::created, qa);  // The same node (the race did happen).
    EXPECT_EQ(qa->query_id(), EndAndReuseOnce::reuse_id);
    QueryState* again = registry.Get(EndAndReuseOnce::reuse_id);
    ASSERT_EQ(again, qa);
    EXPECT_FALSE(registry.Release(again));
    EXPECT_TRUE(registry.Release(qa));  // The creation reference: the last one.
    EXPECT_EQ(registry.Get(EndAndReuseOnce::reuse_id), nullptr);
    EndAndReuseOnce::created = nullptr;
  }
  EXPECT_EQ(Registry::LiveStates(), live_before);
}

TEST(StableQueryRegistryTest, ANodeReusedBeforeTheReferenceIsNotReturned) {
  ExpectANodeReusedBeforeTheReferenceIsNotReturned</*kShardCheck=*/false>();
}

TEST(StableQueryRegistryTest, ANodeReusedBeforeTheReferenceIsNotReturnedWithTheShardCheck) {
  ExpectANodeReusedBeforeTheReferenceIsNotReturned</*kShardCheck=*/true>();
}

TEST(StableQueryRegistryTest, ANodeReusedBeforeTheReferenceIsNotReturnedWithAnAdd) {
  ExpectANodeReusedBeforeTheReferenceIsNotReturned</*kShardCheck=*/false, RefTake::kAdd>();
  ExpectANodeReusedBeforeTheReferenceIsNotReturned</*kShardCheck=*/true, RefTake::kAdd>();
}

/// Ends the query 'victim' inside a lookup, between its find and its reference, once: the
/// lookup then meets a count that takes no reference (0 for the CAS variants, dead for kAdd)
/// on a node that still holds the victim's id.
struct EndOnce : NoSeams {
  static inline QueryState* victim = nullptr;
  template <class Registry>
  static void AfterFind(Registry* registry) {
    if (victim != nullptr) registry->Release(std::exchange(victim, nullptr));
  }
};

template <RefTake kTake>
void ExpectAnEndingNodeIsNotReferenced() {
  using Registry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true, EndOnce,
                                            NodeMemory::kHugeSlabs, kTake>;
  const int64_t live_before = Registry::LiveStates();
  {
    Registry registry(4);
    const UniqueId a = GenerateQueryId();
    QueryState* qa = registry.Create(a, Context());
    EndOnce::victim = qa;
    // The lookup finds a's node, a's last reference is dropped: the count is 0 and the node
    // still holds a's id, so only the count tells the lookup that a has ended.
    EXPECT_EQ(registry.Get(a), nullptr);
    EXPECT_EQ(EndOnce::victim, nullptr);  // The race did happen.
    EXPECT_EQ(Registry::LiveStates(), live_before);
    const UniqueId b = GenerateQueryId();
    QueryState* qb = registry.Create(b, Context());
    EXPECT_EQ(qb, qa);  // The node was pooled, with no reference left on it.
    EXPECT_EQ(registry.Get(a), nullptr);
    // One reference, the creator's: the failed lookup left none on the node (kAdd: its add to
    // the dead count was replaced by b's count).
    EXPECT_TRUE(registry.Release(qb));
  }
  EXPECT_EQ(Registry::LiveStates(), live_before);
}

TEST(StableQueryRegistryTest, AnEndingNodeIsNotReferenced) {
  ExpectAnEndingNodeIsNotReferenced<RefTake::kLoadCas>();
}

TEST(StableQueryRegistryTest, AnEndingNodeIsNotReferencedWithTheGuessedCount) {
  ExpectAnEndingNodeIsNotReferenced<RefTake::kGuessOne>();
}

TEST(StableQueryRegistryTest, AnEndingNodeIsNotReferencedWithAnAdd) {
  ExpectAnEndingNodeIsNotReferenced<RefTake::kAdd>();
}

/// RefTake::kAdd: looks 'id' up once inside the last Release, between its decrement to 0 and
/// its mark of the count as dead (the query is still registered), and keeps the reference.
struct LookUpBeforeTheMark : NoSeams {
  static inline const UniqueId* id = nullptr;
  static inline QueryState* found = nullptr;
  template <class Registry>
  static void BeforeMarkDead(Registry* registry) {
    if (id != nullptr) found = registry->Get(*std::exchange(id, nullptr));
  }
};

TEST(StableQueryRegistryTest, ALookupBetweenTheLastDecrementAndTheMarkKeepsTheQuery) {
  using Registry = BasicStableQueryRegistry<Probe::kWindows, /*kShardCheck=*/true,
                                            LookUpBeforeTheMark, NodeMemory::kHugeSlabs,
                                            RefTake::kAdd>;
  const int64_t live_before = Registry::LiveStates();
  {
    Registry registry(4);
    const UniqueId a = GenerateQueryId();
    QueryState* qa = registry.Create(a, Context());
    LookUpBeforeTheMark::id = &a;
    // The lookup adds to the 0 before the mark: the mark fails, this Release is not the last,
    // and the lookup holds a state still registered and alive.
    EXPECT_FALSE(registry.Release(qa));
    ASSERT_EQ(LookUpBeforeTheMark::found, qa);  // The race did happen.
    EXPECT_EQ(Registry::LiveStates(), live_before + 1);
    EXPECT_EQ(registry.Count(), 1u);
    EXPECT_EQ(qa->query_id(), a);
    QueryState* again = registry.Get(a);
    ASSERT_EQ(again, qa);
    EXPECT_FALSE(registry.Release(again));
    // The lookup's reference is the last one: its Release ends the query.
    EXPECT_TRUE(registry.Release(std::exchange(LookUpBeforeTheMark::found, nullptr)));
    EXPECT_EQ(Registry::LiveStates(), live_before);
    EXPECT_EQ(registry.Count(), 0u);
    EXPECT_EQ(registry.Get(a), nullptr);
    // The node is reused with a count of 1.
    QueryState* qb = registry.Create(GenerateQueryId(), Context());
    EXPECT_EQ(qb, qa);
    EXPECT_TRUE(registry.Release(qb));
  }
  EXPECT_EQ(Registry::LiveStates(), live_before);
}

/// Nodes over more than two slabs: every state found under its own id, the slabs kept and
/// reused once every query ended, and a count above 1 (kGuessOne: the guess wrong) still
/// referenced.
template <class Registry>
void ExpectNodesFillSlabsAndEndedNodesAreReused() {
  constexpr size_t kSlab = size_t{2} << 20;
  const size_t per_slab = Registry::NodesPerSlab();
  ASSERT_GE(per_slab, 1000u);  // About 1 KiB a node.
  const size_t n = 2 * per_slab + 7;
  const int64_t live_before = Registry::LiveStates();
  {
    Registry registry(8);
    EXPECT_EQ(registry.NodeBytes(), 0u);  // No slab before the first query.
    for (int round = 0; round < 2; ++round) {
      std::vector<UniqueId> ids(n);
      std::vector<QueryState*> states(n);
      for (size_t i = 0; i < n; ++i) {
        ids[i] = GenerateQueryId();
        states[i] = registry.Create(ids[i], Context());
      }
      EXPECT_EQ(registry.NodeBytes(), 3 * kSlab) << "round " << round;
      EXPECT_EQ(registry.Count(), n);
      for (size_t i = 0; i < n; ++i) {
        QueryState* qs = registry.Get(ids[i]);
        ASSERT_EQ(qs, states[i]) << i;
        EXPECT_EQ(qs->query_id(), ids[i]);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(qs) % alignof(QueryState), 0u);
        // A count of 2 (kGuessOne: the guess of 1 fails).
        QueryState* twice = registry.Get(ids[i]);
        ASSERT_EQ(twice, qs);
        registry.Release(twice);
        registry.Release(qs);
      }
      for (size_t i = 0; i < n; ++i) EXPECT_TRUE(registry.Release(states[i]));
      EXPECT_EQ(registry.Count(), 0u);
      EXPECT_EQ(Registry::LiveStates(), live_before);
      for (const UniqueId& id : ids) EXPECT_EQ(registry.Get(id), nullptr);
    }
    // The second round reused the first round's nodes: no slab was added.
    EXPECT_EQ(registry.NodeBytes(), 3 * kSlab);
    QueryState* left = registry.Create(GenerateQueryId(), Context());
    (void)left;  // The destructor destroys a state still registered.
  }
  EXPECT_EQ(Registry::LiveStates(), live_before);
}

TEST(StableQueryRegistryTest, NodesFillSlabsAndEndedNodesAreReused) {
  ExpectNodesFillSlabsAndEndedNodesAreReused<QueryStateRegistry>();
}

TEST(StableQueryRegistryTest, NodesFillSlabsAndEndedNodesAreReusedWithTheGuessedCount) {
  ExpectNodesFillSlabsAndEndedNodesAreReused<QueryStateGuessOneRegistry>();
}

}  // namespace
}  // namespace qr::bench
