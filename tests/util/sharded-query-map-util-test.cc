#include "util/sharded-query-map-util.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "testutil/wait.h"

namespace qr {
namespace {

using IntMap = ShardedQueryMap<int>;

UniqueId Id(uint64_t hi, uint64_t lo = 0) { return UniqueId{hi, lo}; }

void ExpectUniform(const std::vector<UniqueId>& ids, int num_shards, const char* what) {
  IntMap map(num_shards);
  std::vector<int64_t> counts(num_shards, 0);
  for (const UniqueId& id : ids) ++counts[map.ShardIndex(id)];
  double mean = static_cast<double>(ids.size()) / num_shards;
  // 5%, or six standard deviations of a binomial count where 5% is tighter than that (256
  // shards of 1M ids: 3,906 +- 375): a bad mix is off by far more, a good one never this much.
  const double tolerance = std::max(mean * 0.05, 6 * std::sqrt(mean));
  for (int i = 0; i < num_shards; ++i) {
    EXPECT_NEAR(counts[i], mean, tolerance)
        << what << " ids, " << num_shards << " shards: shard " << i << " is off the mean";
  }
}

TEST(ShardedQueryMapTest, RandomIdsSpreadEvenly) {
  std::vector<UniqueId> ids(1000000);
  for (auto& id : ids) id = GenerateQueryId();
  for (int n : {4, 16, 64, 256}) ExpectUniform(ids, n, "random");
}

TEST(ShardedQueryMapTest, SequentialIdsSpreadEvenly) {
  std::vector<UniqueId> ids(1000000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = Id(i + 1);
  for (int n : {4, 16, 64, 256}) ExpectUniform(ids, n, "sequential");
  // Sequential from a random base, as a test harness might allocate them.
  uint64_t base = GenerateQueryId().hi;
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = Id(base + i, 0);
  for (int n : {4, 16, 64, 256}) ExpectUniform(ids, n, "sequential from a random base");
}

TEST(ShardedQueryMapTest, ValidateNumShards) {
  for (int64_t ok : std::initializer_list<int64_t>{1, 2, 4, 64, 256, 4096}) EXPECT_TRUE(ValidateNumShards(ok).ok()) << ok;
  for (int64_t bad : std::initializer_list<int64_t>{0, -1, -64, 3, 6, 100, 8192, 1LL << 40}) {
    Status s = ValidateNumShards(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("power of two"), std::string::npos) << s.message();
  }
}

TEST(ShardedQueryMapTest, DefaultShardCountIsTheLibraryConstant) {
  IntMap map;
  EXPECT_EQ(map.num_shards(), kDefaultNumShards);
  EXPECT_TRUE(ValidateNumShards(kDefaultNumShards).ok());
}

TEST(ShardedQueryMapDeathTest, BadShardCountAbortsWithTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(IntMap map(3), "must be a power of two");
}

TEST(ShardedQueryMapTest, IntegerKeys) {
  ShardedQueryMap<std::string, uint64_t> map(16);
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(map.Add(k, std::to_string(k)).ok());
  EXPECT_EQ(map.Count(), 1000u);
  EXPECT_EQ(map.Get(42), "42");
  EXPECT_EQ(map.Get(1000), std::nullopt);
  Status dup = map.Add(7, "x");
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "key 7 is already registered");
  std::string removed;
  ASSERT_TRUE(map.Delete(7, &removed).ok());
  EXPECT_EQ(removed, "7");
  EXPECT_EQ(map.Delete(7).message(), "key 7 is not registered");
  // Sequential integers spread over the shards like sequential query ids do.
  std::vector<int> counts(16, 0);
  for (uint64_t k = 0; k < 16000; ++k) ++counts[map.ShardIndex(k)];
  for (int c : counts) EXPECT_NEAR(c, 1000, 100);
  size_t visited = 0;
  map.DoFuncForAllEntries([&](const uint64_t& k, std::string& v) {
    EXPECT_EQ(v, std::to_string(k));
    ++visited;
  });
  EXPECT_EQ(visited, 999u);
}

TEST(ShardedQueryMapTest, SignedAnd128BitKeys) {
  ShardedQueryMap<int, int32_t> small(4);
  ASSERT_TRUE(small.Add(-1, 1).ok());
  EXPECT_EQ(small.Get(-1), 1);
  EXPECT_EQ(small.Add(-1, 2).message(), "key -1 is already registered");

  ShardedQueryMap<int, absl::uint128> wide(64);
  const absl::uint128 k = absl::MakeUint128(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  ASSERT_TRUE(wide.Add(k, 5).ok());
  EXPECT_EQ(wide.Get(k), 5);
  EXPECT_EQ(wide.Get(k + 1), std::nullopt);
  EXPECT_EQ(wide.Add(k, 6).message(),
            "key 0123456789abcdef:fedcba9876543210 is already registered");
  auto snapshot = wide.Snapshot();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_EQ(snapshot[0].first, k);
}

/// A key type of a consumer's own, with its traits: sessions keyed by (worker, serial), sharded
/// by worker so that one worker's sessions share a shard.
struct SessionKey {
  uint32_t worker = 0;
  uint64_t serial = 0;
  bool operator==(const SessionKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const SessionKey& k) {
    return H::combine(std::move(h), k.worker, k.serial);
  }
};

}  // namespace
template <>
struct ShardKeyTraits<SessionKey> {
  static uint64_t ShardBits(const SessionKey& k) { return k.worker; }
  using Hash = absl::Hash<SessionKey>;
  static std::string ToString(const SessionKey& k) {
    return "session " + std::to_string(k.worker) + "/" + std::to_string(k.serial);
  }
};
namespace {

TEST(ShardedQueryMapTest, CustomKeyTypeWithItsTraits) {
  ShardedQueryMap<int, SessionKey> map(64);
  for (uint64_t serial = 0; serial < 100; ++serial) {
    ASSERT_TRUE(map.Add(SessionKey{3, serial}, static_cast<int>(serial)).ok());
  }
  EXPECT_EQ(map.Get(SessionKey{3, 17}), 17);
  EXPECT_EQ(map.Get(SessionKey{4, 17}), std::nullopt);
  EXPECT_EQ(map.Delete(SessionKey{4, 1}).message(), "session 4/1 is not registered");
  // Every session of worker 3 is in one shard.
  const int shard = map.ShardIndex(SessionKey{3, 0});
  EXPECT_EQ(map.GetShardStats(shard).entries, 100u);
}

TEST(ShardedQueryMapTest, AddGetDelete) {
  IntMap map(8);
  EXPECT_EQ(map.Count(), 0u);
  ASSERT_TRUE(map.Add(Id(1), 10).ok());
  ASSERT_TRUE(map.Add(Id(2), 20).ok());
  EXPECT_EQ(map.Count(), 2u);

  Status dup = map.Add(Id(1), 11);
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.message().find(PrintId(Id(1))), std::string::npos) << dup.message();
  EXPECT_EQ(map.Get(Id(1)), 10) << "a failed Add must not overwrite";

  EXPECT_EQ(map.Get(Id(3)), std::nullopt);
  int removed = 0;
  ASSERT_TRUE(map.Delete(Id(2), &removed).ok());
  EXPECT_EQ(removed, 20);
  EXPECT_EQ(map.Delete(Id(2)).code(), StatusCode::kNotFound);
  EXPECT_EQ(map.Get(Id(2)), std::nullopt);
  EXPECT_EQ(map.Count(), 1u);
}

TEST(ShardedQueryMapTest, VisitSharedSeesTheEntryUnderTheSharedLock) {
  // ReadBias::kNever: every lookup is counted in its shard's statistics.
  ShardedQueryMap<std::shared_ptr<std::atomic<int>>> map(4, ReadBias::kNever);
  ASSERT_TRUE(map.Add(Id(4), std::make_shared<std::atomic<int>>(1)).ok());
  const int before = static_cast<int>(map.GetShardStats(map.ShardIndex(Id(4))).shared_acquisitions);
  // 'fn' may change what the value points to atomically, and its result is returned.
  EXPECT_EQ(map.VisitShared(Id(4), [](const std::shared_ptr<std::atomic<int>>* v) {
              return v == nullptr ? -1 : (*v)->fetch_add(1) + 1;
            }),
            2);
  EXPECT_EQ(*map.Get(Id(4)).value(), 2);
  const ShardStats stats = map.GetShardStats(map.ShardIndex(Id(4)));
  EXPECT_EQ(static_cast<int>(stats.shared_acquisitions) - before, 2) << "shared, not exclusive";
  EXPECT_EQ(stats.acquisitions - stats.shared_acquisitions, 1u) << "only the Add was exclusive";
  EXPECT_TRUE(map.VisitShared(Id(5), [](const auto* v) { return v == nullptr; }));
}

TEST(ShardedQueryMapTest, DeleteReleasesTheValueOutsideTheLock) {
  ShardedQueryMap<std::shared_ptr<int>> map(4);
  auto value = std::make_shared<int>(7);
  ASSERT_TRUE(map.Add(Id(5), value).ok());
  EXPECT_EQ(value.use_count(), 2);
  ASSERT_TRUE(map.Delete(Id(5)).ok());
  EXPECT_EQ(value.use_count(), 1);
}

TEST(ShardedQueryMapTest, ScopedRefLocksTheOwningShard) {
  IntMap map(4);
  {
    IntMap::ScopedShardedMapRef ref(Id(9), &map);
    (*ref)[Id(9)] = 90;
    EXPECT_EQ(ref->size(), 1u);
  }
  EXPECT_EQ(map.Count(), 1u) << "the ref publishes the shard's new size on release";
  EXPECT_EQ(map.Get(Id(9)), 90);
  ShardStats stats = map.GetShardStats(map.ShardIndex(Id(9)));
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.acquisitions, 2u);
  EXPECT_EQ(stats.contended_acquisitions, 0u);
}

TEST(ShardedQueryMapTest, DoFuncForAllEntriesVisitsEveryEntry) {
  IntMap map(16);
  for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(map.Add(Id(i), i).ok());
  int64_t sum = 0;
  int visits = 0;
  map.DoFuncForAllEntries([&](const UniqueId& id, int& v) {
    EXPECT_EQ(static_cast<int>(id.hi), v);
    sum += v;
    ++visits;
    v *= 2;
  });
  EXPECT_EQ(visits, 1000);
  EXPECT_EQ(sum, 500500);
  EXPECT_EQ(map.Get(Id(10)), 20) << "the callback may modify values in place";
}

// VisitAllShared reads every shard under its shared hold: no exclusive acquisition, and no
// revocation of a read bias, where DoFuncForAllEntries (a write of every shard) revokes them.
TEST(ShardedQueryMapTest, VisitAllSharedVisitsEveryEntryAndRevokesNoBias) {
  constexpr int kShards = 4;
  IntMap map(kShards);
  for (int i = 1; i <= 200; ++i) ASSERT_TRUE(map.Add(Id(i), i).ok());
  auto exclusive = [&] {
    uint64_t n = 0;
    for (int i = 0; i < kShards; ++i) {
      const ShardStats st = map.GetShardStats(i);
      n += st.acquisitions - st.shared_acquisitions;
    }
    return n;
  };
  auto revocations = [&] {
    uint64_t n = 0;
    for (int i = 0; i < kShards; ++i) n += map.GetShardStats(i).bias_revocations;
    return n;
  };
  if (ShardLock::ReadBiasSupported()) {
    // Look up one id of each shard until its lookups go read-biased (a slot lookup raises the
    // bias of a shard that no writer has revoked yet).
    std::vector<UniqueId> per_shard(kShards, UniqueId{0, 0});
    for (int i = 1; i <= 200; ++i) per_shard[map.ShardIndex(Id(i))] = Id(i);
    for (const UniqueId& id : per_shard) {
      ASSERT_NE(id.hi, 0u) << "200 ids fill every shard";
      const uint64_t biased = ShardLock::biased_reads();
      ASSERT_TRUE(WaitFor([&] {
        (void)map.Get(id);
        return ShardLock::biased_reads() > biased;
      })) << "shard " << map.ShardIndex(id) << " never went read-biased";
    }
  }
  const uint64_t exclusive_before = exclusive(), revocations_before = revocations();
  const uint64_t fences_before = ShardLock::read_bias_fences();
  int64_t sum = 0;
  int visits = 0;
  map.VisitAllShared([&](const UniqueId& id, const int& v) {
    EXPECT_EQ(static_cast<int>(id.hi), v);
    EXPECT_EQ(map.ShardIndex(id), map.ShardIndex(Id(v)));
    sum += v;
    ++visits;
  });
  EXPECT_EQ(visits, 200);
  EXPECT_EQ(sum, 200 * 201 / 2);
  EXPECT_EQ(exclusive(), exclusive_before) << "no shard was taken exclusively";
  EXPECT_EQ(revocations(), revocations_before) << "no read bias was revoked";
  // The contrast: the mutable walk writes every shard, revoking each bias it finds (all four
  // shards were read-biased above).
  map.DoFuncForAllEntries([](const UniqueId&, int&) {});
  EXPECT_EQ(exclusive(), exclusive_before + kShards);
  if (ShardLock::ReadBiasSupported()) {
    EXPECT_EQ(revocations(), revocations_before + kShards);
    // One membarrier() for the walk, not one per shard (no reader runs here that could raise
    // a bias again between the walk's lowering and its lock).
    EXPECT_EQ(ShardLock::read_bias_fences(), fences_before + 1);
  }
}

// DoFuncForAllEntries changes values while lookups read them read-biased: every walk lowers
// the biases of all shards, fences once, and waits for the lookups still inside, so no lookup
// sees a value half written (a == b), and TSan sees no race. Each round waits until the
// readers have re-biased every shard (the inhibition grows x8 a round: 8 + 64 + 512 ms).
TEST(ShardedQueryMapTest, WalksThatWriteExcludeReadBiasedLookups) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  struct Pair {
    uint64_t a = 0, b = 0;
  };
  constexpr int kShards = 4, kReaders = 2, kRounds = 4, kKeys = 64;
  ShardedQueryMap<Pair> map(kShards);
  for (int i = 1; i <= kKeys; ++i) ASSERT_TRUE(map.Add(Id(i), Pair{}).ok());
  std::atomic<uint64_t> torn{0}, reads{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 1; i <= kKeys; ++i) {
          map.VisitShared(Id(i), [&](const Pair* p) {
            const uint64_t a = p->a;
            reads.fetch_add(1, std::memory_order_relaxed);
            if (a != p->b) torn.fetch_add(1);
          });
        }
      }
    });
  }
  auto all_biased = [&] {
    for (int i = 0; i < kShards; ++i) {
      if (!map.GetShardStats(i).read_biased) return false;
    }
    return true;
  };
  auto revocations = [&] {
    uint64_t n = 0;
    for (int i = 0; i < kShards; ++i) n += map.GetShardStats(i).bias_revocations;
    return n;
  };
  int rounds = 0;
  for (; rounds < kRounds; ++rounds) {
    // EXPECT, not ASSERT, while threads are joinable.
    if (!WaitFor(all_biased)) {
      ADD_FAILURE() << "the readers never re-biased every shard in round " << rounds;
      break;
    }
    const uint64_t before = revocations();
    map.DoFuncForAllEntries([&](const UniqueId&, Pair& p) {
      ++p.a;
      ++p.b;
    });
    EXPECT_EQ(revocations(), before + kShards) << "round " << rounds;
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  for (int i = 1; i <= kKeys; ++i) {
    map.VisitShared(Id(i), [&](const Pair* p) {
      EXPECT_EQ(p->a, static_cast<uint64_t>(kRounds));
      EXPECT_EQ(p->b, static_cast<uint64_t>(kRounds));
    });
  }
}

TEST(ShardedQueryMapTest, SnapshotCallbacksMayCallBackIntoTheMap) {
  IntMap map(16);
  for (int i = 1; i <= 100; ++i) ASSERT_TRUE(map.Add(Id(i), i).ok());
  int seen = 0;
  map.ForEachUnlocked([&](const UniqueId& id, int v) {
    ++seen;
    EXPECT_EQ(map.Get(id), v);
    if (v % 2 == 0) {
      EXPECT_TRUE(map.Delete(id).ok());
    }
    EXPECT_TRUE(map.Add(Id(id.hi + 1000), v).ok());
  });
  EXPECT_EQ(seen, 100);
  EXPECT_EQ(map.Count(), 150u);
  std::vector<std::pair<UniqueId, int>> snap = map.Snapshot();
  EXPECT_EQ(snap.size(), 150u);
}

TEST(ShardedQueryMapDeathTest, ReentryFromDoFuncForAllEntriesAborts) {
#ifdef NDEBUG
  GTEST_SKIP() << "re-entry detection is compiled into debug builds only";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  IntMap map(4);
  ASSERT_TRUE(map.Add(Id(1), 1).ok());
  EXPECT_DEATH(map.DoFuncForAllEntries([&](const UniqueId& id, int&) { (void)map.Get(id); }),
               "called from inside a DoFuncForAllEntries callback");
  EXPECT_DEATH(map.DoFuncForAllEntries([&](const UniqueId&, int&) { (void)map.Add(Id(2), 2); }),
               "ShardedQueryMap::Add");
  // Another map may be used from the callback.
  IntMap other(4);
  map.DoFuncForAllEntries([&](const UniqueId& id, int& v) { EXPECT_TRUE(other.Add(id, v).ok()); });
  EXPECT_EQ(other.Count(), 1u);
  // ... but not to come back to this one: that deadlocked, since the marker held only the
  // innermost map.
  EXPECT_DEATH(map.DoFuncForAllEntries([&](const UniqueId&, int&) {
    other.DoFuncForAllEntries([&](const UniqueId& id, int&) { (void)map.Get(id); });
  }),
               "called from inside a DoFuncForAllEntries callback on the same map");
  // The other holders of a shard lock that run user code: a VisitShared callback (Add there
  // waited for its own reader slot), and a ScopedShardedMapRef's scope (Get there waited for
  // the writer this thread is).
  EXPECT_DEATH((void)map.VisitShared(Id(1), [&](const int*) { return map.Add(Id(5), 5).ok(); }),
               "ShardedQueryMap::Add called from inside a VisitShared callback");
  EXPECT_DEATH(
      {
        IntMap::ScopedShardedMapRef ref(Id(1), &map);
        (void)map.Get(Id(1));
      },
      "ShardedQueryMap::Get called from inside a ScopedShardedMapRef's scope");
  EXPECT_DEATH(map.VisitAllShared([&](const UniqueId& id, const int&) { (void)map.Delete(id); }),
               "ShardedQueryMap::Delete called from inside a VisitAllShared callback");
  // Each scope ends its mark: the map is usable again after each.
  (void)map.VisitShared(Id(1), [](const int* v) { return v != nullptr; });
  {
    IntMap::ScopedShardedMapRef ref(Id(1), &map);
    ref->find(Id(1))->second = 7;
  }
  EXPECT_EQ(map.Get(Id(1)), 7);
#endif
}

// Each thread owns the ids it created and keeps a model of them; all threads share the map and
// also look up and iterate over everyone's entries. At the end the map must hold exactly the
// union of the models.
TEST(ShardedQueryMapTest, StressAgainstPerThreadModels) {
  constexpr int kThreads = 8;
  constexpr int kOpsPerThread = 60000;
  IntMap map(16);
  std::vector<std::map<UniqueId, int>> models(kThreads);
  std::atomic<int64_t> iterated{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      std::map<UniqueId, int>& model = models[t];
      std::vector<UniqueId> owned;
      uint64_t next = 0;
      for (int op = 0; op < kOpsPerThread; ++op) {
        int dice = static_cast<int>(rng() % 100);
        if (op % 2000 == 1999) {
          int64_t n = 0;
          map.DoFuncForAllEntries([&](const UniqueId&, int&) { ++n; });
          iterated.fetch_add(n);
        } else if (dice < 35 || owned.empty()) {
          // Thread index in the top bits keeps ids disjoint between threads.
          UniqueId id{(uint64_t(t) << 56) | ++next, rng() & 0xffffffff00000000ULL};
          int v = static_cast<int>(rng() & 0xffffff);
          ASSERT_TRUE(map.Add(id, v).ok());
          model[id] = v;
          owned.push_back(id);
        } else if (dice < 60) {
          size_t k = rng() % owned.size();
          ASSERT_TRUE(map.Delete(owned[k]).ok());
          model.erase(owned[k]);
          owned[k] = owned.back();
          owned.pop_back();
        } else {
          const UniqueId& id = owned[rng() % owned.size()];
          ASSERT_EQ(map.Get(id), model[id]);
          // Somebody else's id: present or not, but never a wrong type of answer.
          (void)map.Get(UniqueId{(uint64_t((t + 1) % kThreads) << 56) | (rng() % next + 1), 0});
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  std::map<UniqueId, int> expected;
  for (auto& m : models) expected.insert(m.begin(), m.end());
  std::vector<std::pair<UniqueId, int>> snap = map.Snapshot();
  std::map<UniqueId, int> actual(snap.begin(), snap.end());
  EXPECT_EQ(actual.size(), snap.size()) << "snapshot has duplicates";
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(map.Count(), expected.size());
  EXPECT_GT(iterated.load(), 0);
  uint64_t acquisitions = 0;
  for (int i = 0; i < map.num_shards(); ++i) acquisitions += map.GetShardStats(i).acquisitions;
  EXPECT_GE(acquisitions, uint64_t{kThreads} * kOpsPerThread);
}

// Get and VisitShared run their lookup once per way into the shard (read-biased, or through a
// reader slot): both must hold the shard against a writer. A writer changes a pair's two
// halves under ScopedShardedMapRef; before each write it waits until a reader
// went read-biased since the previous one, so every write revokes a bias with readers inside
// or arriving (the inhibition grows x8 per round: 1 + 8 + 64 + 512 ms). A VisitShared callback
// reads one half, waits, then reads the other: halves that differ mean a write ran while it
// held the shard (and TSan reports the race).
TEST(ShardedQueryMapTest, ReadBiasedLookupsNeverSeeAHalfDoneWrite) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  constexpr int kReaders = 2, kRounds = 4;
  using Pair = std::pair<uint64_t, uint64_t>;
  ShardedQueryMap<Pair> map(1);
  const UniqueId id = Id(7);
  ASSERT_TRUE(map.Add(id, Pair{0, 0}).ok());
  std::atomic<uint64_t> torn{0}, lookups{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      for (uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        bool whole;
        if ((n + t) % 2 == 0) {
          const std::optional<Pair> v = map.Get(id);
          whole = v.has_value() && v->first == v->second;
        } else {
          whole = map.VisitShared(id, [](const Pair* p) {
            const uint64_t first = p->first;
            // A longer hold, so that a writer often arrives while a reader is inside.
            for (int i = 0; i < 2000; ++i) asm volatile("");
            return first == p->second;
          });
        }
        if (!whole) torn.fetch_add(1);
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int round = 1; round <= kRounds; ++round) {
    // EXPECT, not ASSERT, while threads are joinable.
    const uint64_t biased = ShardLock::biased_reads();
    if (!WaitFor([&] { return ShardLock::biased_reads() > biased; })) {
      ADD_FAILURE() << "no lookup went read-biased before round " << round;
      break;
    }
    ShardedQueryMap<Pair>::ScopedShardedMapRef ref(id, &map);
    Pair& v = ref->find(id)->second;
    v.first = round;
    v.second = round;
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(map.Get(id), (Pair{kRounds, kRounds}));
  EXPECT_EQ(map.GetShardStats(0).bias_revocations, static_cast<uint64_t>(kRounds))
      << "every write found the shard read-biased";
  EXPECT_GT(lookups.load(), 0u);
}

// A query's owner (a cluster member id, in 'lo') never moves it to another shard: the
// registry's shard choice is the same for an owned id as for the id without an owner.
TEST(ShardedQueryMapTest, QueryOwnerDoesNotChangeTheShard) {
  for (int num_shards : {1, 16, 256, 4096}) {
    IntMap map(num_shards);
    for (int i = 0; i < 10000; ++i) {
      const UniqueId id = GenerateQueryId();
      for (uint32_t owner : {1u, 2u, 513u, kMaxQueryOwner}) {
        ASSERT_EQ(map.ShardIndex(WithQueryOwner(id, owner)), map.ShardIndex(id));
      }
    }
  }
}

}  // namespace
}  // namespace qr
