// HazardSharedMap (be/src/benchmarks/hazard-shared-map.h): shared_ptr lookups over a map read
// without a lock, protected by hazard records. Under the tsan preset a box deleted while a
// reader still copies its shared_ptr is a reported race; in every preset the tests count wrong
// values, failed lookups of live entries and values never destroyed.

#include "benchmarks/hazard-shared-map.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr::bench {
namespace {

/// A value that counts its live instances.
struct Tracked {
  explicit Tracked(const UniqueId& i) : id(i) { live.fetch_add(1, std::memory_order_relaxed); }
  ~Tracked() { live.fetch_sub(1, std::memory_order_relaxed); }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  const UniqueId id;
  static inline std::atomic<int64_t> live{0};
};

template <typename Map>
class HazardSharedMapTest : public ::testing::Test {};
using Maps = ::testing::Types<HazardSharedMap<Tracked, true>, HazardSharedMap<Tracked, false>>;
TYPED_TEST_SUITE(HazardSharedMapTest, Maps);

TYPED_TEST(HazardSharedMapTest, AddGetDeleteAndTheMapsReferenceIsDroppedLater) {
  const int64_t live_before = Tracked::live.load();
  std::weak_ptr<Tracked> deleted, kept;
  {
    TypeParam map(4);
    const UniqueId a = GenerateQueryId();
    const UniqueId b = GenerateQueryId();
    auto va = std::make_shared<Tracked>(a);
    deleted = va;
    ASSERT_TRUE(map.Add(a, std::move(va)));
    EXPECT_FALSE(map.Add(a, std::make_shared<Tracked>(a)));  // Present: the new one is dropped.
    EXPECT_EQ(Tracked::live.load(), live_before + 1);
    auto vb = std::make_shared<Tracked>(b);
    kept = vb;
    ASSERT_TRUE(map.Add(b, std::move(vb)));

    std::shared_ptr<Tracked> found;
    EXPECT_FALSE(map.Get(GenerateQueryId(), &found));
    EXPECT_EQ(found, nullptr);
    ASSERT_TRUE(map.Get(a, &found));
    EXPECT_EQ(found, deleted.lock());
    EXPECT_EQ(found.use_count(), 2);  // The map's and 'found'.
    found.reset();

    EXPECT_TRUE(map.Delete(a));
    EXPECT_FALSE(map.Delete(a));
    EXPECT_FALSE(map.Get(a, &found));
    // Unregistered; the map's reference goes with the retired box at a later scan.
    EXPECT_FALSE(deleted.expired());
    ASSERT_TRUE(map.Get(b, &found));
    EXPECT_EQ(found->id, b);
  }
  // The destructor deletes the retired box and the registered one.
  EXPECT_TRUE(deleted.expired());
  EXPECT_TRUE(kept.expired());
  EXPECT_EQ(Tracked::live.load(), live_before);
}

TYPED_TEST(HazardSharedMapTest, ReadersOfEntriesThatGoSeeOnlyLiveValues) {
  constexpr int kOwners = 3;
  constexpr int kEntriesPerOwner = 400;
  constexpr int kAccesses = 20;
  constexpr int kReaders = 2;
  constexpr int kWaitEvery = 50;  // An owner waits for a reader's copy every 50 entries.
  const int64_t live_before = Tracked::live.load();
  std::vector<UniqueId> ids(kOwners * kEntriesPerOwner);
  for (UniqueId& id : ids) id = GenerateQueryId();
  // The entry each owner works on (added, or about to be, or just deleted).
  std::vector<std::atomic<int>> current(kOwners);
  std::atomic<int> readers_started{0};
  std::atomic<uint64_t> copies_taken{0};
  std::atomic<int> owners_running{kOwners};
  std::vector<uint64_t> wrong(kReaders, 0), hits(kReaders, 0), owner_misses(kOwners, 0);
  {
    // A list scans every 16 retirements (the default 512 would never scan during the test: each
    // owner retires 400), so boxes are deleted while readers run.
    TypeParam map(4, 16);
    std::vector<std::thread> threads;
    for (int o = 0; o < kOwners; ++o) {
      threads.emplace_back([&, o] {
        while (readers_started.load(std::memory_order_acquire) < kReaders) {
          std::this_thread::yield();
        }
        for (int q = 0; q < kEntriesPerOwner; ++q) {
          const UniqueId& id = ids[o * kEntriesPerOwner + q];
          current[o].store(q, std::memory_order_release);
          auto value = std::make_shared<Tracked>(id);
          Tracked* const raw = value.get();
          EXPECT_TRUE(map.Add(id, std::move(value)));
          if (q % kWaitEvery == 0) {
            // Until some reader has copied a value since: the readers do race with deletions
            // however the threads are scheduled (waits on the count, not on time).
            const uint64_t seen = copies_taken.load(std::memory_order_acquire);
            while (copies_taken.load(std::memory_order_acquire) == seen) {
              std::this_thread::yield();
            }
          }
          for (int a = 0; a < kAccesses; ++a) {
            std::shared_ptr<Tracked> again;
            if (!map.Get(id, &again) || again.get() != raw) ++owner_misses[o];
          }
          EXPECT_TRUE(map.Delete(id));
        }
        owners_running.fetch_sub(1, std::memory_order_release);
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&, r] {
        readers_started.fetch_add(1, std::memory_order_release);
        uint64_t x = 777 + r;
        while (owners_running.load(std::memory_order_acquire) > 0) {
          // An owner's current entry or the one before: live, being added, or being deleted
          // (its box retired and deleted while this reader may be copying out of it).
          x = Mix64(x + 1);
          const int o = static_cast<int>(x % kOwners);
          const int q = current[o].load(std::memory_order_acquire) - static_cast<int>(x >> 63);
          if (q < 0) continue;
          const UniqueId& id = ids[o * kEntriesPerOwner + q];
          std::shared_ptr<Tracked> found;
          if (!map.Get(id, &found)) continue;
          ++hits[r];
          copies_taken.fetch_add(1, std::memory_order_release);
          if (found->id != id) ++wrong[r];  // Reads the value: TSan checks it is alive.
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
    // The readers copied live values, at least one per owner's wait.
    EXPECT_GE(all_hits, static_cast<uint64_t>(kOwners * kEntriesPerOwner / kWaitEvery));
    std::shared_ptr<Tracked> found;
    for (const UniqueId& id : ids) EXPECT_FALSE(map.Get(id, &found));
  }
  EXPECT_EQ(Tracked::live.load(), live_before);  // Every value destroyed, none twice.
}

}  // namespace
}  // namespace qr::bench
