// StableRef and StableRefRegistry (util/stable-ref-registry.h): counted objects in type-stable
// memory and a registry whose lookups take no lock, with the races of a lookup against an
// object's end forced through the seams, and a hammer for ThreadSanitizer.

#include "util/stable-ref-registry.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "util/unique-id.h"

namespace qr {
namespace {

constexpr uint64_t kAlive = 0x5eedc0de5eedc0deULL;

/// A registered object: its id, and a word a reader checks (cleared by the destructor, so a
/// reader of an ended object sees it; ThreadSanitizer sees the race in that case too).
struct Request {
  explicit Request(const UniqueId& i) : id(i) {}
  ~Request() { alive.store(0, std::memory_order_relaxed); }
  const UniqueId id;
  std::atomic<uint64_t> alive{kAlive};
};

using Registry = StableRefRegistry<Request>;

StableRef<Request> Make(const UniqueId& id) { return MakeStable<Request>(id, id); }

TEST(StableRefRegistryTest, ALookupFindsTheObjectUntilItsDelete) {
  Registry registry(4);
  const UniqueId id = GenerateQueryId();
  StableRef<Request> req = Make(id);
  EXPECT_FALSE(registry.Get(id));
  ASSERT_TRUE(registry.Add(req));
  StableRef<Request> found = registry.Get(id);
  EXPECT_EQ(found, req);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(registry.Count(), 1u);
  EXPECT_TRUE(registry.Delete(id));
  EXPECT_FALSE(registry.Delete(id));
  EXPECT_TRUE(registry.Get(id) == nullptr);
  EXPECT_EQ(registry.Count(), 0u);
  // The references outlive the registration.
  EXPECT_EQ(found->alive.load(), kAlive);
}

TEST(StableRefRegistryTest, AnIdIsRegisteredOnce) {
  Registry registry(4);
  const UniqueId id = GenerateQueryId();
  StableRef<Request> a = Make(id);
  StableRef<Request> b = Make(id);
  ASSERT_TRUE(registry.Add(a));
  EXPECT_FALSE(registry.Add(b));
  EXPECT_EQ(registry.Get(id), a);
  // The refused Add took no reference: b's own is its last.
  const int64_t live = StableRef<Request>::Live();
  b.reset();
  EXPECT_EQ(StableRef<Request>::Live(), live - 1);
}

TEST(StableRefRegistryTest, TheLastReferenceDestroysTheObjectRegisteredOrNot) {
  const int64_t before = StableRef<Request>::Live();
  const UniqueId id = GenerateQueryId();
  {
    Registry registry(4);
    StableRef<Request> req = Make(id);
    EXPECT_EQ(StableRef<Request>::Live(), before + 1);
    StableRef<Request> copy = req;
    StableRef<Request> moved = std::move(copy);
    EXPECT_FALSE(copy);
    ASSERT_TRUE(registry.Add(req));
    req.reset();
    moved.reset();
    // The registry's reference keeps it.
    EXPECT_EQ(StableRef<Request>::Live(), before + 1);
    StableRef<Request> again = registry.Get(id);
    ASSERT_TRUE(again);
    EXPECT_TRUE(registry.Delete(id));
    EXPECT_EQ(StableRef<Request>::Live(), before + 1);
    again = StableRef<Request>();
    EXPECT_EQ(StableRef<Request>::Live(), before);
    // A registry destroyed with objects registered drops its references.
    ASSERT_TRUE(registry.Add(Make(GenerateQueryId())));
    EXPECT_EQ(StableRef<Request>::Live(), before + 1);
  }
  EXPECT_EQ(StableRef<Request>::Live(), before);
}

TEST(StableRefRegistryTest, AnEndedObjectsNodeIsReused) {
  StableRef<Request> a = Make(GenerateQueryId());
  Request* first = a.get();
  a.reset();
  // The same thread's pool hands the node back first.
  StableRef<Request> b = Make(GenerateQueryId());
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(b->alive.load(), kAlive);
}

TEST(StableRefRegistryTest, ASnapshotHoldsEveryRegisteredObject) {
  Registry registry(4);
  std::vector<UniqueId> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(GenerateQueryId());
    ASSERT_TRUE(registry.Add(Make(ids.back())));
  }
  std::vector<StableRef<Request>> all = registry.Snapshot();
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(registry.Delete(ids[i]));
  ASSERT_EQ(all.size(), 100u);
  std::vector<UniqueId> seen;
  for (const StableRef<Request>& r : all) {
    EXPECT_EQ(r->alive.load(), kAlive);
    seen.push_back(r->id);
  }
  std::sort(seen.begin(), seen.end());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(seen, ids);
}

/// Runs the test's step (once) in a lookup, between its find and its reference.
struct AfterFindSeam {
  static inline std::function<void()> step;
  template <class R>
  static void AfterFind(const R*) {
    if (step) std::exchange(step, nullptr)();
  }
};
using SeamedRegistry = StableRefRegistry<Request, AfterFindSeam>;

// The node a lookup found is reused for another object before the lookup's reference: the lookup
// must neither return the other object nor leave its count changed.
TEST(StableRefRegistryTest, ALookupOfANodeReusedBeforeItsReferenceFindsNothing) {
  SeamedRegistry registry(4);
  const int64_t before = StableRef<Request>::Live();
  const UniqueId id = GenerateQueryId();
  const UniqueId other = GenerateQueryId();
  StableRef<Request> owner = Make(id);
  ASSERT_TRUE(registry.Add(owner));
  bool ran = false;
  AfterFindSeam::step = [&] {
    ran = true;
    EXPECT_TRUE(registry.Delete(id));
    Request* node = owner.get();
    owner.reset();  // Ends it: its node goes back to this thread's pool.
    StableRef<Request> next = Make(other);
    EXPECT_EQ(next.get(), node);  // Reused.
    EXPECT_TRUE(registry.Add(next));
  };
  StableRef<Request> found = registry.Get(id);
  EXPECT_TRUE(ran);
  EXPECT_FALSE(found);
  // The node's next object holds the registry's reference alone: its Delete ends it.
  EXPECT_EQ(StableRef<Request>::Live(), before + 1);
  EXPECT_TRUE(registry.Delete(other));
  EXPECT_EQ(StableRef<Request>::Live(), before);
}

// The node a lookup found is dead (its object ended, the node pooled) when the lookup adds to
// its count: nothing is returned, and the node's next object starts with a count of exactly 1.
TEST(StableRefRegistryTest, ALookupOfAnEndedObjectFindsNothingAndLeavesTheNodeReusable) {
  SeamedRegistry registry(4);
  const int64_t before = StableRef<Request>::Live();
  const UniqueId id = GenerateQueryId();
  StableRef<Request> owner = Make(id);
  Request* node = owner.get();
  ASSERT_TRUE(registry.Add(owner));
  AfterFindSeam::step = [&] {
    EXPECT_TRUE(registry.Delete(id));
    owner.reset();
  };
  EXPECT_FALSE(registry.Get(id));
  EXPECT_EQ(StableRef<Request>::Live(), before);
  StableRef<Request> next = Make(GenerateQueryId());
  ASSERT_EQ(next.get(), node);
  next.reset();  // Its last reference: the lookup's add to the dead count did not stay.
  EXPECT_EQ(StableRef<Request>::Live(), before);
}

/// Parks a lookup between its find and its reference, and the last release between its
/// decrement and its mark, so that the lookup's add lands on the count of 0.
struct Rendezvous {
  std::mutex mu;
  std::condition_variable cv;
  bool found = false;
  bool go = false;
  bool looked_up = false;
  void Set(bool* flag) {
    std::lock_guard<std::mutex> l(mu);
    *flag = true;
    cv.notify_all();
  }
  void Wait(const bool* flag) {
    std::unique_lock<std::mutex> l(mu);
    // Bounded: a test that deadlocks fails instead of hanging CI.
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return *flag; }));
  }
};
Rendezvous* rendezvous = nullptr;

TEST(StableRefRegistryTest, ALookupBetweenTheLastDecrementAndTheMarkKeepsTheObject) {
  SeamedRegistry registry(4);
  Rendezvous r;
  rendezvous = &r;
  const int64_t before = StableRef<Request>::Live();
  const UniqueId id = GenerateQueryId();
  StableRef<Request> owner = Make(id);
  ASSERT_TRUE(registry.Add(owner));
  AfterFindSeam::step = [] {
    rendezvous->Set(&rendezvous->found);
    rendezvous->Wait(&rendezvous->go);
  };
  StableRef<Request> found;
  std::thread lookup([&] {
    found = registry.Get(id);
    rendezvous->Set(&rendezvous->looked_up);
  });
  r.Wait(&r.found);
  EXPECT_TRUE(registry.Delete(id));
  StableRefTesting<Request>::before_mark_dead = [] {
    rendezvous->Set(&rendezvous->go);
    rendezvous->Wait(&rendezvous->looked_up);
  };
  owner.reset();  // Decrements to 0; the lookup adds; the mark fails.
  StableRefTesting<Request>::before_mark_dead = nullptr;
  lookup.join();
  rendezvous = nullptr;
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->alive.load(), kAlive);
  EXPECT_EQ(StableRef<Request>::Live(), before + 1);
  found.reset();  // The lookup's reference is the last one now.
  EXPECT_EQ(StableRef<Request>::Live(), before);
}

// Owners make, register, look up and end objects while readers look up every id: a reader gets
// the object registered under the id it asked for, alive, or nothing; nothing leaks.
TEST(StableRefRegistryTest, ReadersOfObjectsThatEndSeeOnlyLiveObjects) {
  constexpr int kOwners = 3;
  constexpr int kPerOwner = 400;
  constexpr int kReaders = 2;
  constexpr int kWaitEvery = 50;  // An owner waits for a reader's reference every 50 objects.
  const int64_t before = StableRef<Request>::Live();
  std::vector<UniqueId> ids(kOwners * kPerOwner);
  for (UniqueId& id : ids) id = GenerateQueryId();
  std::vector<std::atomic<int>> current(kOwners);
  std::atomic<int> readers_started{0};
  std::atomic<uint64_t> references_taken{0};
  std::atomic<int> owners_running{kOwners};
  std::vector<uint64_t> wrong(kReaders, 0), owner_misses(kOwners, 0);
  {
    Registry registry(4);
    std::vector<std::thread> threads;
    for (int o = 0; o < kOwners; ++o) {
      threads.emplace_back([&, o] {
        while (readers_started.load(std::memory_order_acquire) < kReaders) {
          std::this_thread::yield();
        }
        for (int q = 0; q < kPerOwner; ++q) {
          const UniqueId& id = ids[o * kPerOwner + q];
          current[o].store(q, std::memory_order_release);
          StableRef<Request> mine = Make(id);
          EXPECT_TRUE(registry.Add(mine));
          if (q % kWaitEvery == 0) {
            // Until a reader has taken a reference since (a wait on the count, not on time).
            const uint64_t seen = references_taken.load(std::memory_order_acquire);
            while (references_taken.load(std::memory_order_acquire) == seen) {
              std::this_thread::yield();
            }
          }
          for (int a = 0; a < 20; ++a) {
            if (registry.Get(id) != mine) ++owner_misses[o];
          }
          EXPECT_TRUE(registry.Delete(id));
        }
        owners_running.fetch_sub(1, std::memory_order_release);
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&, r] {
        readers_started.fetch_add(1, std::memory_order_release);
        uint64_t x = 777 + r;
        while (owners_running.load(std::memory_order_acquire) > 0) {
          x = x * 6364136223846793005ULL + 1442695040888963407ULL;
          const int o = static_cast<int>((x >> 33) % kOwners);
          const int q = current[o].load(std::memory_order_acquire);
          const UniqueId& id = ids[o * kPerOwner + q];
          StableRef<Request> got = registry.Get(id);
          if (!got) continue;
          if (!(got->id == id) || got->alive.load(std::memory_order_relaxed) != kAlive) {
            ++wrong[r];
          }
          references_taken.fetch_add(1, std::memory_order_release);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(registry.Count(), 0u);
  }
  for (int r = 0; r < kReaders; ++r) EXPECT_EQ(wrong[r], 0u) << "reader " << r;
  for (int o = 0; o < kOwners; ++o) EXPECT_EQ(owner_misses[o], 0u) << "owner " << o;
  EXPECT_GE(references_taken.load(), static_cast<uint64_t>(kOwners * kPerOwner / kWaitEvery));
  EXPECT_EQ(StableRef<Request>::Live(), before);
}

}  // namespace
}  // namespace qr
