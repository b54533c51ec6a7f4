#include "runtime/query-exec-mgr.h"

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

QueryContext Ctx(const std::string& user = "alice") {
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT 1");
  ctx.user = user;
  return ctx;
}

TEST(QueryExecMgrTest, LastReleaseDeletesState) {
  QueryExecMgr mgr(8);
  UniqueId id = GenerateQueryId();
  QueryState* qs = nullptr;
  ASSERT_TRUE(mgr.CreateQueryState(id, Ctx(), &qs).ok());
  EXPECT_EQ(mgr.num_live(), 1);
  QueryState* again = mgr.GetQueryState(id);
  EXPECT_EQ(again, qs);
  mgr.ReleaseQueryState(again);
  EXPECT_EQ(mgr.num_live(), 1) << "one reference is still held";
  EXPECT_EQ(mgr.num_released(), 0);
  mgr.ReleaseQueryState(qs);
  EXPECT_EQ(mgr.num_live(), 0);
  EXPECT_EQ(mgr.num_created(), 1);
  EXPECT_EQ(mgr.num_released(), 1);
  EXPECT_EQ(mgr.GetQueryState(id), nullptr) << "Get after the last release is null";
}

TEST(QueryExecMgrTest, DuplicateIdIsAnError) {
  QueryExecMgr mgr(4);
  UniqueId id = GenerateQueryId();
  QueryStateHandle h;
  ASSERT_TRUE(mgr.CreateQueryState(id, Ctx(), &h).ok());
  QueryStateHandle dup;
  Status s = mgr.CreateQueryState(id, Ctx(), &dup);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(dup);
  EXPECT_EQ(mgr.num_created(), 1);
}

TEST(QueryExecMgrTest, HandlesReleaseOnDestructionAndMove) {
  QueryExecMgr mgr(4);
  UniqueId id = GenerateQueryId();
  {
    QueryStateHandle h;
    ASSERT_TRUE(mgr.CreateQueryState(id, Ctx(), &h).ok());
    QueryStateHandle clone = h.Clone();
    EXPECT_EQ(clone.get(), h.get());
    QueryStateHandle moved = std::move(clone);
    EXPECT_FALSE(clone);
    QueryStateHandle got = mgr.GetQueryStateHandle(id);
    ASSERT_TRUE(got);
    got = std::move(moved);  // releases got's reference, takes moved's
    EXPECT_EQ(mgr.num_live(), 1);
  }
  EXPECT_EQ(mgr.num_live(), 0);
  EXPECT_EQ(mgr.num_released(), 1);
  EXPECT_FALSE(mgr.GetQueryStateHandle(id));
}

TEST(QueryExecMgrTest, CancelIfActsOnMatchingQueriesOnly) {
  QueryExecMgr mgr(4);
  std::vector<QueryStateHandle> handles(6);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(mgr.CreateQueryState(GenerateQueryId(), Ctx(i % 2 ? "bob" : "alice"),
                                     &handles[i]).ok());
  }
  int n = mgr.CancelIf([](const QueryState& qs) { return qs.query_ctx().user == "bob"; },
                       QueryError::UserCanceled());
  EXPECT_EQ(n, 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(handles[i]->is_cancelled(), i % 2 == 1);
  EXPECT_EQ(mgr.CancelAll(QueryError::ShuttingDown("stop")), 3) << "already cancelled are not counted";
  ASSERT_TRUE(handles[0]->cancel_reason().has_value());
  EXPECT_EQ(handles[0]->cancel_reason()->name, "SERVER_SHUTTING_DOWN");
  EXPECT_EQ(handles[1]->cancel_reason()->name, "USER_CANCELED") << "the first reason wins";
  EXPECT_EQ(mgr.num_live(), 6) << "bulk operations release their references";
}

TEST(QueryExecMgrTest, WaitForDrainReturnsWhenTheLastStateGoes) {
  QueryExecMgr mgr(4);
  QueryStateHandle h;
  ASSERT_TRUE(mgr.CreateQueryState(GenerateQueryId(), Ctx(), &h).ok());
  EXPECT_FALSE(mgr.WaitForDrain(1)) << "a live query must time out the wait";
  std::thread releaser([&] { h.Reset(); });
  EXPECT_TRUE(mgr.WaitForDrain(60000));
  releaser.join();
  EXPECT_EQ(mgr.num_live(), 0);
}

// The owner destroys the manager as soon as WaitForDrain() returns (as the daemon does at
// shutdown): the releasing thread must be done with the manager by then. Under ASan or TSan a
// release that still touches it after the wait returns is reported as a use after free.
TEST(QueryExecMgrTest, ManagerMayBeDestroyedWhenWaitForDrainReturns) {
  constexpr int kRounds = 500;
  for (int round = 0; round < kRounds; ++round) {
    auto mgr = std::make_unique<QueryExecMgr>(4);
    QueryState* qs = nullptr;
    ASSERT_TRUE(mgr->CreateQueryState(GenerateQueryId(), Ctx(), &qs).ok());
    QueryExecMgr* raw = mgr.get();
    std::atomic<bool> go{false};
    std::thread releaser([&] {
      while (!go.load()) std::this_thread::yield();
      raw->ReleaseQueryState(qs);
    });
    go.store(true);
    const bool drained = mgr->WaitForDrain(60000);
    mgr.reset();
    releaser.join();
    ASSERT_TRUE(drained) << "round " << round;
  }
}

// 8 threads: each creates private queries and gets/releases them, and all of them hammer a set
// of shared queries. Refcounts must balance exactly: at the end only what is still held lives.
TEST(QueryExecMgrTest, ConcurrentGetReleaseOnSharedAndPrivateIds) {
  constexpr int kThreads = 8;
  constexpr int kShared = 16;
  constexpr int kIters = 20000;
  QueryExecMgr mgr(16);
  std::vector<QueryStateHandle> shared(kShared);
  std::vector<UniqueId> shared_ids(kShared);
  for (int i = 0; i < kShared; ++i) {
    shared_ids[i] = GenerateQueryId();
    ASSERT_TRUE(mgr.CreateQueryState(shared_ids[i], Ctx(), &shared[i]).ok());
  }
  std::atomic<int64_t> misses{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<QueryStateHandle> mine;
      for (int i = 0; i < kIters; ++i) {
        QueryState* qs = mgr.GetQueryState(shared_ids[rng() % kShared]);
        if (qs == nullptr) {
          misses.fetch_add(1);
        } else {
          qs->rows_produced.fetch_add(1, std::memory_order_relaxed);
          mgr.ReleaseQueryState(qs);
        }
        if (i % 10 == 0) {
          QueryStateHandle h;
          ASSERT_TRUE(mgr.CreateQueryState(GenerateQueryId(), Ctx(), &h).ok());
          mine.push_back(std::move(h));
        } else if (!mine.empty() && i % 10 == 5) {
          QueryStateHandle again = mine.back().Clone();
          ASSERT_TRUE(again);
          mine.pop_back();  // 'again' now holds the last reference; it dies at scope end
        }
      }
      EXPECT_EQ(static_cast<int64_t>(mine.size()), 0);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(misses.load(), 0) << "shared queries are held, so they must always be found";
  int64_t total = 0;
  for (auto& h : shared) total += h->rows_produced.load();
  EXPECT_EQ(total, int64_t{kThreads} * kIters);
  EXPECT_EQ(mgr.num_live(), kShared);
  EXPECT_EQ(mgr.num_created() - mgr.num_released(), kShared);
  shared.clear();
  EXPECT_EQ(mgr.num_live(), 0);
}

// The last release races with Gets from other threads: a Get either takes a reference while
// one is still held (and the state lives on until that one is released) or sees nullptr, never
// a state being deleted. Bounded: each thread makes at most kTries attempts per round.
TEST(QueryExecMgrTest, LastReleaseRacesWithGets) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  constexpr int kTries = 2000;
  QueryExecMgr mgr(4);
  for (int round = 0; round < kRounds; ++round) {
    const UniqueId id = GenerateQueryId();
    QueryState* creator = nullptr;
    ASSERT_TRUE(mgr.CreateQueryState(id, Ctx(), &creator).ok());
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ready.fetch_add(1);
        for (int i = 0; i < kTries; ++i) {
          QueryState* qs = mgr.GetQueryState(id);
          if (qs == nullptr) break;  // Once gone, it stays gone.
          EXPECT_EQ(qs->query_id(), id);
          qs->rows_produced.fetch_add(1, std::memory_order_relaxed);
          mgr.ReleaseQueryState(qs);
        }
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    mgr.ReleaseQueryState(creator);  // Usually not the last one: a Get holds another.
    for (auto& th : threads) th.join();
    EXPECT_EQ(mgr.GetQueryState(id), nullptr) << "round " << round;
    EXPECT_EQ(mgr.num_live(), 0) << "round " << round;
    EXPECT_EQ(mgr.num_released(), round + 1) << "deleted exactly once";
  }
  EXPECT_EQ(mgr.num_created(), kRounds);
}

// GetAll's references keep the states alive after their creators let go. (Its skipping of a
// state whose last reference is gone but which is not yet unregistered is exercised only by
// races: the window between the two has no hook to hold it open.)
TEST(QueryExecMgrTest, GetAllHoldsReferences) {
  QueryExecMgr mgr(4);
  std::vector<QueryStateHandle> held(3);
  for (auto& h : held) ASSERT_TRUE(mgr.CreateQueryState(GenerateQueryId(), Ctx(), &h).ok());
  std::vector<QueryStateHandle> all = mgr.GetAll();
  ASSERT_EQ(all.size(), 3u);
  held.clear();
  EXPECT_EQ(mgr.num_live(), 3) << "GetAll's handles keep every state alive";
  all.clear();
  EXPECT_EQ(mgr.num_live(), 0);
  EXPECT_EQ(mgr.num_released(), 3);
}

// A state's memory is reused: the node of an ended query holds the next query created on the
// thread, and a lookup of the ended query's id does not return it (the node's count and id
// outlive the state, runtime/stable-query-registry.h).
TEST(QueryExecMgrTest, AnEndedQuerysNodeIsReusedAndItsIdStaysGone) {
  QueryExecMgr mgr(4);
  const UniqueId first = GenerateQueryId();
  QueryState* a = nullptr;
  ASSERT_TRUE(mgr.CreateQueryState(first, Ctx(), &a).ok());
  mgr.ReleaseQueryState(a);
  const UniqueId second = GenerateQueryId();
  QueryState* b = nullptr;
  ASSERT_TRUE(mgr.CreateQueryState(second, Ctx("bob"), &b).ok());
  EXPECT_EQ(b, a) << "the ended query's node is reused";
  EXPECT_EQ(b->query_id(), second);
  EXPECT_EQ(b->query_ctx().user, "bob");
  EXPECT_EQ(mgr.GetQueryState(first), nullptr);
  QueryState* again = mgr.GetQueryState(second);
  EXPECT_EQ(again, b);
  mgr.ReleaseQueryState(again);
  // The same id may be registered again once its query has ended.
  mgr.ReleaseQueryState(b);
  QueryState* c = nullptr;
  ASSERT_TRUE(mgr.CreateQueryState(first, Ctx(), &c).ok());
  EXPECT_EQ(mgr.GetQueryState(second), nullptr);
  QueryState* found = mgr.GetQueryState(first);
  EXPECT_EQ(found, c);
  mgr.ReleaseQueryState(found);
  mgr.ReleaseQueryState(c);
  EXPECT_EQ(mgr.num_live(), 0);
  EXPECT_EQ(mgr.num_released(), 3);
}

// Lookups race with queries that end and whose nodes are reused at once: writers create and
// end queries in a loop (each thread reusing its own nodes), readers look up ids of queries
// that are live, ending or long gone, and GetAll walks meanwhile. Every state a lookup or a
// walk returns must be the query it names (a lookup: the id it asked for), alive until
// released; at the end the counts balance. Bounded by iterations, not time. (The interleaving
// that needs the lookup's check, a node ended and reused between its find and its reference,
// is forced in tests/util/hazard-query-registry-test.cc,
// StableQueryRegistryTest.ANodeReusedBeforeTheReferenceIsNotReturned*; here it is left to chance.)
TEST(QueryExecMgrTest, LookupsNeverReturnAReusedNodesOtherQuery) {
  constexpr int kWriters = 3;
  constexpr int kReaders = 3;
  constexpr int kIds = 64;
  constexpr int kWrites = 20000;
  QueryExecMgr mgr(4);
  std::vector<UniqueId> ids(kIds * kWriters);
  for (UniqueId& id : ids) id = GenerateQueryId();
  std::atomic<int> readers_ready{0};
  std::atomic<int> writers_done{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      std::vector<QueryStateHandle> live(kIds);
      while (readers_ready.load() < kReaders) std::this_thread::yield();
      for (int i = 0; i < kWrites; ++i) {
        const int k = static_cast<int>(rng() % kIds);
        if (live[k]) {
          live[k].Reset();  // Ends it unless a reader holds it.
        } else {
          // Fails while a reader still holds the ended query of this id: it is registered.
          QueryStateHandle h;
          if (mgr.CreateQueryState(ids[w * kIds + k], Ctx(), &h).ok()) live[k] = std::move(h);
        }
      }
      writers_done.fetch_add(1);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(100 + r);
      readers_ready.fetch_add(1);
      while (writers_done.load() < kWriters) {
        if (rng() % 64 == 0) {
          for (QueryStateHandle& h : mgr.GetAll()) {
            const UniqueId id = h->query_id();
            QueryState* again = mgr.GetQueryState(id);
            ASSERT_EQ(again, h.get()) << "a held query stays registered";
            mgr.ReleaseQueryState(again);
          }
          continue;
        }
        const UniqueId& id = ids[rng() % ids.size()];
        QueryState* qs = mgr.GetQueryState(id);
        if (qs == nullptr) continue;
        ASSERT_EQ(qs->query_id(), id);
        qs->rows_produced.fetch_add(1, std::memory_order_relaxed);
        mgr.ReleaseQueryState(qs);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mgr.num_live(), mgr.num_created() - mgr.num_released());
  EXPECT_EQ(mgr.GetAll().size(), static_cast<size_t>(mgr.num_live()));
  EXPECT_GT(mgr.num_released(), 0);
  // The writers' handles are gone with their threads: everything ended.
  EXPECT_EQ(mgr.num_live(), 0);
}

}  // namespace
}  // namespace qr
