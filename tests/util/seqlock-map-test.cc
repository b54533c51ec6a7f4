// SeqlockMap (be/src/benchmarks/seqlock-map.h): the map's semantics, the reclamation of retired
// tables, and a hammer of concurrent Add/Delete/Get with table growth and rehashes in which
// readers check that they never see a torn entry, never miss a key that is always present and
// never read a freed table (the last is ThreadSanitizer's part: run it under the tsan preset).

#include "benchmarks/seqlock-map.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr::bench {
namespace {

/// Key 'k' of the tests: 'hi' spreads over the shards, 'lo' names the key.
UniqueId Key(int k) { return UniqueId{Mix64(static_cast<uint64_t>(k) + 1), static_cast<uint64_t>(k)}; }

TEST(SeqlockMapTest, AddGetDelete) {
  std::vector<int> vals(1000);
  for (int i = 0; i < 1000; ++i) vals[i] = i;
  SeqlockMap<const int*> map(4, 4);
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
  EXPECT_GT(st.tables_retired, 0u);  // 4 shards of 4 slots grew to hold 1,000 entries.
  EXPECT_EQ(st.tables_freed, st.tables_retired);  // No reader was inside any of them.
}

TEST(SeqlockMapTest, ChurnAtConstantSizeRehashesAwayTombstones) {
  std::vector<int> vals(64);
  SeqlockMap<const int*> map(1, 64);
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(map.Add(Key(round * 16 + i), &vals[i]));
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(map.Delete(Key(round * 16 + i)));
  }
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, 0u);
  // 1,600 distinct keys through 64 slots: reused tombstones are not enough, rehashes (at the
  // same capacity: at most 16 live) make room.
  EXPECT_GT(st.tables_retired, 5u);
  const int* v = nullptr;
  EXPECT_FALSE(map.Get(Key(5), &v));
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

TEST(SeqlockMapTest, ConcurrentWritersAndReadersSeeNoTornOrLostEntries) {
  constexpr int kStable = 64;          // Present throughout: a reader must always find them.
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 1024;     // Each writer's own keys.
  constexpr int kOpsPerWriter = 100000;
  constexpr int kReaders = 3;
  constexpr uint64_t kMinGetsPerReader = 20000;
  constexpr int kKeys = kStable + kWriters * kPerWriter;
  std::vector<int> vals(kKeys);
  for (int i = 0; i < kKeys; ++i) vals[i] = i;
  // Two shards of four slots: the writers' keys force many growths and, with the deletes,
  // rehashes, while the readers probe.
  SeqlockMap<const int*> map(2, 4);
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
      for (int op = 0; op < kOpsPerWriter; ++op) {
        x = Mix64(x + op);
        const int i = static_cast<int>(x % kPerWriter);
        const int k = kStable + w * kPerWriter + i;
        // Grow first (mostly adds), then churn at a steady size.
        const bool add = op < kOpsPerWriter / 3 ? (x >> 32) % 4 != 0 : (x >> 32) % 2 == 0;
        if (add) {
          if (map.Add(Key(k), &vals[k]) == present[w][i]) ++write_mismatches[w];
          present[w][i] = true;
        } else {
          if (map.Delete(Key(k)) != present[w][i]) ++write_mismatches[w];
          present[w][i] = false;
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
  map.Reclaim();  // Every reader has left: every retired table can go.
  const SeqlockMapStats st = map.Stats();
  EXPECT_EQ(st.entries, expected_entries);
  EXPECT_GT(st.tables_retired, 10u);
  EXPECT_EQ(st.tables_freed, st.tables_retired);
}

}  // namespace
}  // namespace qr::bench
