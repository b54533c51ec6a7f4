// SeqlockMap (be/src/benchmarks/seqlock-map.h, with epoch-reclaimed and with type-stable
// tables) and SeqlockTagMap (seqlock-tag-map.h): the maps' semantics, the reclamation or pooling
// of retired tables, and a hammer of concurrent Add/Delete/Get with table growth and rehashes in
// which readers check that they never see a torn entry, never miss a key that is always present
// and never read a freed table (the last is ThreadSanitizer's part: run it under the tsan
// preset). And the benchmark's MirroredRegistry (mirrored-registry.h), which pairs the registry
// with a SeqlockTagMap, and SeqlockTagMap with holds (Holds::kSlots, Holds::kShardLock), whose
// VisitShared holds keep writers out.

#include "benchmarks/mirrored-registry.h"
#include "benchmarks/seqlock-map.h"
#include "util/seqlock-tag-map.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

namespace qr::bench {
namespace {

/// Key 'k' of the tests: 'hi' spreads over the shards, 'lo' names the key.
UniqueId Key(int k) { return UniqueId{Mix64(static_cast<uint64_t>(k) + 1), static_cast<uint64_t>(k)}; }

using EpochMap = SeqlockMap<const int*>;
using StableMap = SeqlockMap<const int*, /*kTypeStable=*/true, /*kMaxLoadEighths=*/2>;
using TagMap = SeqlockTagMap<const int*>;
using HoldMap = SeqlockTagMap<const int*, Holds::kSlots>;
using ShardLockHoldMap = SeqlockTagMap<const int*, Holds::kShardLock>;
using WideTagMap = SeqlockTagMap<const int*, Holds::kNone, 16>;
using WideShardLockHoldMap = SeqlockTagMap<const int*, Holds::kShardLock, 16>;
using PairTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kPairs>;
using HalfTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kGroups, /*kMaxLoadEighths=*/4>;
using PairShardLockHoldMap = SeqlockTagMap<const int*, Holds::kShardLock, 8, Probe::kPairs>;
using PairOneLoadTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kPairsOneLoad>;
using PairOneLoadShardLockHoldMap = SeqlockTagMap<const int*, Holds::kShardLock, 8, Probe::kPairsOneLoad>;
using WideOneLoadTagMap = SeqlockTagMap<const int*, Holds::kNone, 16, Probe::kGroupsOneLoad>;
using PairCellsTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kPairsInCells>;
using HomeFirstTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kPairsHomeFirst>;
using WindowTagMap = SeqlockTagMap<const int*, Holds::kNone, 8, Probe::kWindows>;

template <typename Map>
constexpr bool kPools = !std::is_same_v<Map, EpochMap>;

/// Every retired table is accounted for: freed (epochs, once no reader is inside) or, for the
/// type-stable maps, either back in use or waiting in its shard's pool, never freed.
template <typename Map>
void ExpectRetiredTablesAccountedFor(const SeqlockMapStats& st) {
  if constexpr (kPools<Map>) {
    EXPECT_EQ(st.tables_freed, 0u);
    EXPECT_EQ(st.tables_reused + st.tables_pooled, st.tables_retired);
  } else {
    EXPECT_EQ(st.tables_freed, st.tables_retired);
  }
}

template <typename Map>
void ReclaimIfEpochs(Map& map) {
  if constexpr (!kPools<Map>) map.Reclaim();
}

template <typename Map>
class SeqlockMapsTest : public ::testing::Test {};
using Maps = ::testing::Types<EpochMap, StableMap, TagMap, HoldMap, ShardLockHoldMap, WideTagMap,
                               WideShardLockHoldMap, PairTagMap, PairShardLockHoldMap,
                               PairOneLoadTagMap, PairOneLoadShardLockHoldMap,
                               WideOneLoadTagMap, PairCellsTagMap, HomeFirstTagMap,
                               WindowTagMap>;
TYPED_TEST_SUITE(SeqlockMapsTest, Maps);

TYPED_TEST(SeqlockMapsTest, AddGetDelete) {
  std::vector<int> vals(1000);
  for (int i = 0; i < 1000; ++i) vals[i] = i;
  TypeParam map(4, 4);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  EXPECT_FALSE(map.Add(Key(7), &vals[8]));
  for (int i = 0; i < 1000; ++i) {
    const int* v = nullptr;
    ASSERT_TRUE(map.Get(Key(i), &v));
    EXPECT_EQ(v, &vals[i]);
  }
  const int* v = nullptr;
  EXPECT_FALSE(map.Get(Key(1000), &v));
  EXPECT_EQ(v, nullptr);
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(map.Delete(Key(i)));
  EXPECT_FALSE(map.Delete(Key(0)));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(map.Get(Key(i), &v), i % 2 == 1) << i;
  // Re-adding reuses tombstones.
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(map.Get(Key(i), &v));
    EXPECT_EQ(*v, i);
  }
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, 1000u);
  EXPECT_GT(st.tables_retired, 0u);  // 4 shards of 4 (or 8) slots grew to hold 1,000 entries.
  ExpectRetiredTablesAccountedFor<TypeParam>(st);  // No reader was inside any of them.
}

TYPED_TEST(SeqlockMapsTest, AFullTableFindsEveryEntryAndNoAbsentOne) {
  // 56 entries in one shard of 64 slots (7/8, the most before a rehash): groups fill up, so
  // entries overflow into the next group, and from the last group into the first.
  constexpr int kLive = 56;
  std::vector<int> vals(kLive);
  TypeParam map(1, 64);
  for (int i = 0; i < kLive; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  if constexpr (!std::is_same_v<TypeParam, StableMap>) {  // Which rehashes past 1/4.
    ASSERT_EQ(map.Stats().tables_retired, 0u);            // Still the first table.
  }
  auto expect_present = [&](auto present) {
    for (int i = 0; i < kLive + 2000; ++i) {
      const int* v = nullptr;
      ASSERT_EQ(map.Get(Key(i), &v), present(i)) << i;
      if (present(i)) {
        ASSERT_EQ(v, &vals[i]) << i;
      }
    }
  };
  expect_present([](int i) { return i < kLive; });
  // Deletes leave tombstones in the full groups; the entries past them are still found.
  for (int i = 0; i < kLive; i += 3) ASSERT_TRUE(map.Delete(Key(i)));
  expect_present([](int i) { return i < kLive && i % 3 != 0; });
}

TEST(SeqlockTagMapTest, AHalfFullTableGrowsPastHalfAndFindsEveryEntry) {
  // kMaxLoadEighths 4: 32 entries fill one shard of 64 slots, the 33rd doubles it; the other
  // typed tests assume absl's 7/8.
  constexpr int kLive = 200;
  std::vector<int> vals(kLive);
  HalfTagMap map(1, 64);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  ASSERT_EQ(map.Stats().tables_retired, 0u);
  ASSERT_TRUE(map.Add(Key(32), &vals[32]));
  ASSERT_EQ(map.Stats().tables_retired, 1u);
  for (int i = 33; i < kLive; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  for (int i = 0; i < kLive + 2000; ++i) {
    const int* v = nullptr;
    ASSERT_EQ(map.Get(Key(i), &v), i < kLive) << i;
    if (i < kLive) {
      ASSERT_EQ(v, &vals[i]) << i;
    }
  }
  for (int i = 0; i < kLive; i += 2) ASSERT_TRUE(map.Delete(Key(i)));
  for (int i = 0; i < kLive; ++i) {
    const int* v = nullptr;
    ASSERT_EQ(map.Get(Key(i), &v), i % 2 == 1) << i;
  }
}

TYPED_TEST(SeqlockMapsTest, ChurnAtConstantSizeRehashesAwayTombstones) {
  constexpr int kLive = 48;
  std::vector<int> vals(kLive);
  TypeParam map(1, 64);
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < kLive; ++i) ASSERT_TRUE(map.Add(Key(round * kLive + i), &vals[i]));
    for (int i = 0; i < kLive; ++i) ASSERT_TRUE(map.Delete(Key(round * kLive + i)));
  }
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, 0u);
  // 4,800 distinct keys through one shard of at most 48 live: reused tombstones are not
  // enough, rehashes (at the same capacity once grown) make room.
  EXPECT_GT(st.tables_retired, 5u);
  ExpectRetiredTablesAccountedFor<TypeParam>(st);
  if constexpr (kPools<TypeParam>) {
    // Rehashes at one capacity take the pooled table back instead of allocating; the pool
    // holds at most two tables of each capacity (and this shard has had fewer than eight).
    EXPECT_GT(st.tables_reused, 0u);
    EXPECT_LE(st.tables_pooled, 2u * 8);
  }
  const int* v = nullptr;
  EXPECT_FALSE(map.Get(Key(5), &v));
}

TEST(SeqlockTagMapTest, SparseChurnLeavesNoTombstones) {
  // 16 live in 64 slots: every group keeps an empty byte, so a delete empties its slot
  // instead of leaving a tombstone and 1,600 keys go through without a single rehash.
  std::vector<int> vals(16);
  SeqlockTagMap<const int*> map(1, 64);
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(map.Add(Key(round * 16 + i), &vals[i]));
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(map.Delete(Key(round * 16 + i)));
    const int* v = nullptr;
    ASSERT_FALSE(map.Get(Key(round * 16), &v));
  }
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, 0u);
  EXPECT_EQ(st.tables_retired, 0u);
}

TEST(SeqlockMapTest, RetiredTableOutlivesAReaderInsideIt) {
  std::vector<int> vals(100);
  SeqlockMap<const int*> map(1, 4);
  ASSERT_TRUE(map.Add(Key(0), &vals[0]));
  uint64_t retired = 0;
  {
    // This thread is "inside a Get" while it grows the table from the writer side.
    seqlock_internal::ReadSection section;
    for (int i = 1; i < 100; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
    const SeqlockMapStats st = map.Stats();
    retired = st.tables_retired;
    ASSERT_GT(retired, 0u);
    EXPECT_EQ(st.tables_freed, 0u);
    map.Reclaim();
    EXPECT_EQ(map.Stats().tables_freed, 0u);
  }
  map.Reclaim();
  EXPECT_EQ(map.Stats().tables_freed, retired);
}

/// How the hammer's writers change the map.
enum class Writes {
  /// Two shards; random adds and deletes of each writer's keys, mostly adds for the first third
  /// (growth), then half and half: tables grow while readers probe them.
  kRandom,
  /// One shard; each writer slides a window of 16 live keys through its 1,024 (delete the
  /// oldest, add the next): with the 64 stable keys the shard holds 96 entries and churns
  /// distinct keys through a table too dense to avoid tombstones, so it rehashes at one
  /// capacity again and again while readers probe, and a type-stable map reuses the tables
  /// that readers may still be in.
  kSlidingWindow,
};

template <typename Map>
void Hammer(Writes writes) {
  constexpr int kStable = 64;          // Present throughout: a reader must always find them.
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 1024;     // Each writer's own keys.
  constexpr int kOpsPerWriter = 100000;
  constexpr int kReaders = 3;
  constexpr uint64_t kMinGetsPerReader = 20000;
  constexpr int kKeys = kStable + kWriters * kPerWriter;
  constexpr int kWindow = 16;
  std::vector<int> vals(kKeys);
  for (int i = 0; i < kKeys; ++i) vals[i] = i;
  // Shards of four (or eight) slots at first.
  Map map(writes == Writes::kRandom ? 2 : 1, 4);
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));

  std::atomic<int> writers_running{kWriters};
  std::vector<std::vector<bool>> present(kWriters, std::vector<bool>(kPerWriter, false));
  std::vector<uint64_t> write_mismatches(kWriters, 0);
  std::vector<uint64_t> torn(kReaders, 0), stable_misses(kReaders, 0), gets(kReaders, 0),
      found(kReaders, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      uint64_t x = 0x9e3779b97f4a7c15ULL * (w + 1);
      auto add = [&](int i) {
        const int k = kStable + w * kPerWriter + i;
        if (map.Add(Key(k), &vals[k]) == present[w][i]) ++write_mismatches[w];
        present[w][i] = true;
      };
      auto remove = [&](int i) {
        const int k = kStable + w * kPerWriter + i;
        if (map.Delete(Key(k)) != present[w][i]) ++write_mismatches[w];
        present[w][i] = false;
      };
      for (int op = 0; op < kOpsPerWriter; ++op) {
        if (writes == Writes::kSlidingWindow) {
          if (op >= kWindow) remove((op - kWindow) % kPerWriter);
          add(op % kPerWriter);
          continue;
        }
        x = Mix64(x + op);
        const int i = static_cast<int>(x % kPerWriter);
        const bool adding = op < kOpsPerWriter / 3 ? (x >> 32) % 4 != 0 : (x >> 32) % 2 == 0;
        if (adding) {
          add(i);
        } else {
          remove(i);
        }
      }
      writers_running.fetch_sub(1, std::memory_order_release);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      uint64_t x = 12345 + r;
      while (writers_running.load(std::memory_order_acquire) > 0 ||
             gets[r] < kMinGetsPerReader) {
        x = Mix64(x + 1);
        const int k = static_cast<int>(x % kKeys);
        const int* v = nullptr;
        const bool hit = map.Get(Key(k), &v);
        ++gets[r];
        if (hit) {
          ++found[r];
          // A torn read would pair one entry's key with another's value.
          if (v != &vals[k] || *v != k) ++torn[r];
        } else if (k < kStable) {
          ++stable_misses[r];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  uint64_t expected_entries = kStable;
  for (int w = 0; w < kWriters; ++w) {
    EXPECT_EQ(write_mismatches[w], 0u) << "writer " << w;
    for (int i = 0; i < kPerWriter; ++i) {
      const int k = kStable + w * kPerWriter + i;
      const int* v = nullptr;
      EXPECT_EQ(map.Get(Key(k), &v), static_cast<bool>(present[w][i])) << k;
      expected_entries += present[w][i];
    }
  }
  uint64_t all_found = 0;
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(torn[r], 0u) << "reader " << r;
    EXPECT_EQ(stable_misses[r], 0u) << "reader " << r;
    EXPECT_GE(gets[r], kMinGetsPerReader);
    all_found += found[r];
  }
  EXPECT_GT(all_found, 0u);
  ReclaimIfEpochs(map);  // Every reader has left: every retired table can go.
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, expected_entries);
  EXPECT_GT(st.tables_retired, 10u);
  ExpectRetiredTablesAccountedFor<Map>(st);
  if (writes == Writes::kSlidingWindow && kPools<Map>) {
    EXPECT_GT(st.tables_reused, 10u);
    // At most two tables per capacity: shards of one, 4 (8) to 1,024 slots at most.
    EXPECT_LE(st.tables_pooled, 2u * 9);
  }
}

TYPED_TEST(SeqlockMapsTest, ConcurrentWritersAndReadersSeeNoTornOrLostEntries) {
  Hammer<TypeParam>(Writes::kRandom);
}

TYPED_TEST(SeqlockMapsTest, ReadersOfRehashedAndReusedTablesSeeNoTornOrLostEntries) {
  Hammer<TypeParam>(Writes::kSlidingWindow);
}

template <typename Map>
class SeqlockHoldMapsTest : public ::testing::Test {};
using HoldMaps =
    ::testing::Types<HoldMap, ShardLockHoldMap, WideShardLockHoldMap, PairShardLockHoldMap,
                     PairOneLoadShardLockHoldMap>;
TYPED_TEST_SUITE(SeqlockHoldMapsTest, HoldMaps);

TYPED_TEST(SeqlockHoldMapsTest, VisitSharedSeesTheEntryOrNull) {
  std::vector<int> vals(100);
  TypeParam map(4, 4);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  ASSERT_TRUE(map.Delete(Key(3)));
  auto value_of = [](const int* const* v) { return v == nullptr ? nullptr : *v; };
  EXPECT_EQ(map.VisitShared(Key(5), value_of), &vals[5]);
  EXPECT_FALSE(map.VisitShared(Key(3), [](const int* const* v) { return v != nullptr; }));
  EXPECT_FALSE(map.VisitShared(Key(100), [](const int* const* v) { return v != nullptr; }));
}

// Holders and writers of the same keys: a writer deletes a key, bumps its generation and
// re-adds it. A holder that found the key must see the same generation for as long as it holds
// it (it looks twice, with a pause between): the delete waited for it.
TYPED_TEST(SeqlockHoldMapsTest, WritersWaitForHolders) {
  constexpr int kKeys = 64;
  constexpr int kWriters = 2;
  constexpr int kCyclesPerWriter = 20000;
  constexpr int kHolders = 2;
  constexpr uint64_t kMinHitsPerHolder = 2000;
  std::vector<std::atomic<uint64_t>> generation(kKeys);
  // The map's values: one pointer per key.
  std::vector<int> tags(kKeys);
  TypeParam map(2, 4);
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(map.Add(Key(i), &tags[i]));
  std::atomic<int> writers_running{kWriters};
  std::vector<uint64_t> write_failures(kWriters, 0);
  std::vector<uint64_t> changed(kHolders, 0), hits(kHolders, 0), wrong(kHolders, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      // Writer w owns the keys k with k % kWriters == w.
      for (int c = 0; c < kCyclesPerWriter; ++c) {
        const int k = w + kWriters * (c % (kKeys / kWriters));
        if (!map.Delete(Key(k))) ++write_failures[w];
        generation[k].fetch_add(1, std::memory_order_relaxed);
        if (!map.Add(Key(k), &tags[k])) ++write_failures[w];
      }
      writers_running.fetch_sub(1, std::memory_order_release);
    });
  }
  for (int r = 0; r < kHolders; ++r) {
    threads.emplace_back([&, r] {
      uint64_t x = 777 + r;
      while (writers_running.load(std::memory_order_acquire) > 0 || hits[r] < kMinHitsPerHolder) {
        x = Mix64(x + 1);
        const int k = static_cast<int>(x % kKeys);
        map.VisitShared(Key(k), [&](const int* const* v) {
          if (v == nullptr) return;
          ++hits[r];
          if (*v != &tags[k]) ++wrong[r];
          const uint64_t g = generation[k].load(std::memory_order_relaxed);
          for (int i = 0; i < 50; ++i) __builtin_ia32_pause();
          if (generation[k].load(std::memory_order_relaxed) != g) ++changed[r];
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(write_failures[w], 0u) << "writer " << w;
  for (int r = 0; r < kHolders; ++r) {
    EXPECT_EQ(changed[r], 0u) << "holder " << r;
    EXPECT_EQ(wrong[r], 0u) << "holder " << r;
    EXPECT_GE(hits[r], kMinHitsPerHolder) << "holder " << r;
  }
  EXPECT_EQ(map.Stats().entries, static_cast<uint64_t>(kKeys));
}

// The benchmark's MirroredRegistry (mirrored-registry.h): both of its maps agree after every
// Add and Delete, what Get reads (the tag table) and what a walk sees (the registry).
TEST(MirroredRegistryTest, GetAndWalkAgreeAfterAddsAndDeletes) {
  MirroredRegistry<const int*> map(16);
  std::vector<int> vals(1000);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(map.Add(Key(i), &vals[i]));
  EXPECT_FALSE(map.Add(Key(7), &vals[8]));
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(map.Delete(Key(i)));
  EXPECT_FALSE(map.Delete(Key(0)));
  const int* v = nullptr;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(map.Get(Key(i), &v), i % 2 == 1) << i;
    if (i % 2 == 1) {
      EXPECT_EQ(v, &vals[i]);
    }
  }
  EXPECT_EQ(map.Get(Key(7), &v) ? v : nullptr, &vals[7]);  // The refused Add changed nothing.
  int walked = 0;
  map.ForEachSnapshot([&](const UniqueId& id, const int* value) {
    ++walked;
    EXPECT_EQ(value, &vals[id.lo]);
    EXPECT_EQ(id.lo % 2, 1u);
  });
  EXPECT_EQ(walked, 500);
}


}  // namespace
}  // namespace qr::bench
