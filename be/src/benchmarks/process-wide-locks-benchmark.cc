// process-wide-locks-benchmark: the process-wide query registries against one global lock and
// against the concurrent maps one would otherwise pick (DESIGN.md, "benchmarks").
//
//  1. BM_QueryLifecycle<Registry>/queries:Q/accesses:A - the original experiment: one thread per
//     query creates a QueryState through the registry, does A x (GetQueryState +
//     ReleaseQueryState), then releases it. Registries: a global boost::mutex registry (the
//     original "before"), 4 SpinLock shards with every access exclusive (the original
//     "after"), and QueryExecMgr itself (shared-lock Get, lock-free Release) with 4 shards and
//     with the --registry_num_shards default; and HazardSeqlockTag*Shards and
//     StableSeqlockTag*Shards, the same reference counting over a SeqlockTagMap read without a
//     lock, with hazard records or type-stable nodes (hazard-query-registry.h,
//     stable-query-registry.h).
//  2. BM_RequestLifecycle<Map>/queries:Q/accesses:A - the same for the coordinator side's
//     ClientRequestStateMap: register, A lookups that copy the shared_ptr, unregister; and
//     HazardSeqlockTag*Shards, the same lookups over a SeqlockTagMap read without a lock
//     (hazard-shared-map.h).
//  3. The map benchmarks of map-benchmarks.h: fixed-thread mixes, lookups during a full
//     iteration, uncontended Get (alone, and interleaved with its bare inner map: BM_GetVsBare;
//     BM_GetRefVsBare does the same with a reference taken to what each Get found and dropped,
//     on both sides, as the daemon's lookups do).
//  4. BM_WalkAll<Mode>/entries:E: one walk over every entry (QueryExecMgr::GetAll's), with
//     each shard held exclusively (DoFuncForAllEntries) or shared (VisitAllShared), over
//     shards that all went read-biased before it, or that never do (*NeverBiased).
//  5. BM_<Mix>Refs<Registry>/entries:E/threads:T: the map mixes over the executor's registries,
//     whose lookups take a reference (QueryExecMgr, and the lock-free StableQueryRegistry and
//     HazardQueryRegistry); BM_<Mix>Shared<Map>: the same over maps of shared_ptrs
//     (ClientRequestStateMap and HazardSharedMap). Each with its default twice (*Again), as an
//     A/A control of the machine's spread.
// Every throughput benchmark reports ops_per_s, ns_per_op and ctx_switches_per_op counters;
// scripts/bench.sh runs it and renders docs/benchmarks.md.
//
// --callgrind_variant=NAME runs only an uncontended Get loop for valgrind --tool=callgrind.

#include <bit>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/thread/mutex.hpp>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "benchmarks/bench-harness.h"
#include "benchmarks/hazard-query-registry.h"
#include "benchmarks/hazard-shared-map.h"
#include "benchmarks/map-benchmark-templates.h"
#include "benchmarks/map-benchmarks.h"
#include "benchmarks/registry-variants.h"
#include "benchmarks/stable-query-registry.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/query-state.h"
#include "runtime/registry-flags.h"
#include "service/client-request-state.h"
#include "util/spinlock.h"
#include "util/unique-id.h"

DEFINE_string(grid, "5x100,50x100,50x1000,500x100,500x1000,500x5000,1000x1000,1000x5000",
              "Points QxA of the lifecycle benchmarks: Q threads (one per query), A accesses each");
DEFINE_double(grid_min_time_s, 0.1, "Minimum timed seconds of each lifecycle benchmark run");
DEFINE_string(mix_threads, "1,2,4,8,16,32,64", "Thread counts of the map mixes");
DEFINE_string(mix_entries, "1000,100000", "Live entries of the map mixes");
DEFINE_int32(mix_round_ms, 50, "Milliseconds of one timed round of a map mix");
DEFINE_int32(mix_rounds, 1, "Timed rounds per repetition of a map mix");
DEFINE_int32(iteration_round_ms, 100,
             "Milliseconds of one timed round of BM_LookupDuringIteration");
DEFINE_int32(iteration_nice, 0,
             "Nice value of BM_LookupDuringIteration's lookup and iterator threads (lowering it "
             "needs CAP_SYS_NICE; without it the value stays)");
DEFINE_bool(iteration_probe_realtime, true,
            "Run BM_LookupDuringIteration's probe thread at SCHED_FIFO when permitted (the "
            "probe_realtime counter says whether it was): a latency percentile taken by a "
            "normal thread on an oversubscribed machine mostly measures the wait for a CPU");
DEFINE_int32(iteration_probe_interval_us, 50,
             "BM_LookupDuringIteration: the probe thread's sleep between two probes");
DEFINE_int32(iteration_sample_every, 16,
             "BM_LookupDuringIteration also times one lookup in this many of the lookup threads");
DEFINE_string(iteration_variants,
              "GlobalMutex,LegacySpinShards64Std,ShardedQueryMap4,ShardedQueryMap16,ShardedQueryMap64,ShardedQueryMap256",
              "Variants of BM_LookupDuringIteration");
DEFINE_double(get_min_time_s, 0.05, "Minimum time of each BM_UncontendedGet run");
DEFINE_int32(get_vs_bare_rounds, 200,
             "Rounds of BM_GetVsBare (4096 Gets on the variant and 4096 on its bare inner map)");
DEFINE_int32(passes, 1,
             "Register every benchmark this many times, one whole pass after the other: "
             "repetitions spread over the run, so a burst of load from other processes hits one "
             "repetition of each variant instead of all repetitions of one (render-benchmarks.py "
             "takes the median over the passes)");
DEFINE_int32(hot_key_offset, 0,
             "BM_HotQuery's key: live key number entries / 2 + this (modulo entries). Where a "
             "key sits in a hash table differs from key to key; other offsets show the spread");
DEFINE_double(placement_far_ns, 150,
              "A cache-line round trip between the two CPUs from this many ns on marks a point "
              "'placement:far' (the CPUs share no cache), below it 'near'");
DEFINE_string(callgrind_variant, "",
              "Run only the uncontended Get loop of this variant (for callgrind) and exit");
DEFINE_int32(callgrind_entries, 1000, "Live entries for --callgrind_variant");
DEFINE_int32(callgrind_ops, 200000, "Gets for --callgrind_variant");
DEFINE_bool(callgrind_reference, false,
            "--callgrind_variant: each Get also takes and drops a reference to what it found "
            "(a CAS and a fetch_sub, as QueryExecMgr's lookups)");

namespace qr::bench {
namespace {

/// The original experiment's registries, with QueryExecMgr's refcounting done the original
/// way: every access holds the shard's lock exclusively (create at 1, +1 per get, -1 per
/// release, the last release erases under the lock and deletes after it). With one shard and
/// a boost::mutex it is the original "before"; with 4 shards and a SpinLock, the original
/// "after" (IMPALA-4456), shard chosen as ShardedQueryMap chooses it.
template <typename Lock>
class ExclusiveQueryRegistry {
 public:
  explicit ExclusiveQueryRegistry(int num_shards)
      : pick_shard_(num_shards),
        shards_(std::make_unique<Shard[]>(num_shards)) {}

  QueryState* Create(const UniqueId& id, const QueryContext& ctx) {
    auto qs = std::make_unique<QueryState>(id, ctx);
    bool inserted;
    {
      Shard& s = ShardFor(id);
      std::lock_guard l(s.lock);
      inserted = s.map.try_emplace(id, Slot{qs.get(), 1}).second;
    }
    CHECK(inserted);
    return qs.release();
  }
  QueryState* Get(const UniqueId& id) {
    Shard& s = ShardFor(id);
    std::lock_guard l(s.lock);
    auto it = s.map.find(id);
    if (it == s.map.end()) return nullptr;
    ++it->second.refcount;
    return it->second.qs;
  }
  void Release(QueryState* qs) {
    {
      Shard& s = ShardFor(qs->query_id());
      std::lock_guard l(s.lock);
      auto it = s.map.find(qs->query_id());
      if (--it->second.refcount > 0) return;
      s.map.erase(it);
    }
    delete qs;
  }

 private:
  struct Slot {
    QueryState* qs;
    int32_t refcount;
  };
  struct alignas(128) Shard {
    /// Protects 'map'.
    Lock lock;
    std::unordered_map<UniqueId, Slot, UniqueIdHash> map;
  };
  Shard& ShardFor(const UniqueId& id) {
    return shards_[pick_shard_(id.hi)];
  }

  const FibonacciShardPicker pick_shard_;
  std::unique_ptr<Shard[]> shards_;
};

/// QueryExecMgr itself, with 'num_shards' shards.
class ShardedQueryRegistry {
 public:
  explicit ShardedQueryRegistry(int num_shards) : mgr_(num_shards) {}

  QueryState* Create(const UniqueId& id, const QueryContext& ctx) {
    QueryState* qs = nullptr;
    Status s = mgr_.CreateQueryState(id, ctx, &qs);
    CHECK(s.ok()) << s.message();
    return qs;
  }
  /// Create, or nullptr if 'id' is registered (a query that ended, still referenced).
  QueryState* TryCreate(const UniqueId& id, const QueryContext& ctx) {
    QueryState* qs = nullptr;
    return mgr_.CreateQueryState(id, ctx, &qs).ok() ? qs : nullptr;
  }
  QueryState* Get(const UniqueId& id) { return mgr_.GetQueryState(id); }
  void Release(QueryState* qs) { mgr_.ReleaseQueryState(qs); }

 private:
  QueryExecMgr mgr_;
};

using RequestPtr = std::shared_ptr<ClientRequestState>;
static_assert(std::is_same_v<ShardedQueryMap<RequestPtr, UniqueId, FlatMap<RequestPtr>>,
                             ClientRequestStateMap>,
              "the coordinator variant must be the real ClientRequestStateMap");

/// BM_QueryLifecycle<Registry>/queries:Q/accesses:A (see the file comment).
template <class Registry>
void BM_QueryLifecycle(benchmark::State& state, int num_shards) {
  const int queries = static_cast<int>(state.range(0));
  const int accesses = static_cast<int>(state.range(1));
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT count(*) FROM lineitem");
  ctx.user = "bench";
  std::vector<UniqueId> ids(queries);
  for (UniqueId& id : ids) id = GenerateQueryId();
  Registry registry(num_shards);
  Totals totals;
  for (auto _ : state) {
    RoundResult r = RunThreadsToCompletion(queries, [&](int t) {
      QueryState* qs = registry.Create(ids[t], ctx);
      for (int a = 0; a < accesses; ++a) {
        QueryState* again = registry.Get(ids[t]);
        benchmark::DoNotOptimize(again);
        registry.Release(again);
      }
      registry.Release(qs);
    });
    r.ops = static_cast<uint64_t>(queries) * accesses;
    state.SetIterationTime(r.seconds);
    totals.Add(r);
  }
  ReportThroughput(totals, &state);
}

/// BM_RequestLifecycle<Map>/queries:Q/accesses:A (see the file comment).
template <class Map>
void BM_RequestLifecycle(benchmark::State& state, int num_shards) {
  const int queries = static_cast<int>(state.range(0));
  const int accesses = static_cast<int>(state.range(1));
  auto statement = std::make_shared<const std::string>("SELECT count(*) FROM lineitem");
  SessionInfo session;
  session.user = "bench";
  session.source = "process-wide-locks-benchmark";
  std::vector<UniqueId> ids(queries);
  for (UniqueId& id : ids) id = GenerateQueryId();
  Map map(num_shards);
  Totals totals;
  for (auto _ : state) {
    RoundResult r = RunThreadsToCompletion(queries, [&](int t) {
      auto request = std::make_shared<ClientRequestState>(ids[t], statement, session);
      CHECK(map.Add(ids[t], request));
      for (int a = 0; a < accesses; ++a) {
        RequestPtr found;
        map.Get(ids[t], &found);
        benchmark::DoNotOptimize(found.get());
      }
      CHECK(map.Delete(ids[t]));
    });
    r.ops = static_cast<uint64_t>(queries) * accesses;
    state.SetIterationTime(r.seconds);
    totals.Add(r);
  }
  ReportThroughput(totals, &state);
}

std::vector<int> ParseInts(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

std::vector<std::string> ParseNames(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// "QxA,QxA" -> {{Q, A}, ...}.
std::vector<std::pair<int, int>> ParseGrid(const std::string& list) {
  std::vector<std::pair<int, int>> out;
  for (const std::string& point : ParseNames(list)) {
    size_t x = point.find('x');
    CHECK(x != std::string::npos) << "--grid: expected QxA, got '" << point << "'";
    out.emplace_back(std::stoi(point.substr(0, x)), std::stoi(point.substr(x + 1)));
  }
  return out;
}

template <typename Fn>
void RegisterLifecycle(const std::string& name, Fn fn, int num_shards, int queries,
                       int accesses) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [fn, num_shards](benchmark::State& s) { fn(s, num_shards); })
      ->Args({queries, accesses})
      ->ArgNames({"queries", "accesses"})
      ->UseManualTime()
      ->MinTime(FLAGS_grid_min_time_s)
      ->Unit(benchmark::kMillisecond);
}

/// The lifecycle grids, point by point with the variants of a point back to back.
void RegisterLifecycleBenchmarks() {
  const int def = FLAGS_registry_num_shards;
  std::vector<int> shard_counts = {4};
  if (def != 4) shard_counts.push_back(def);
  const auto grid = ParseGrid(FLAGS_grid);
  for (const auto& [queries, accesses] : grid) {
    RegisterLifecycle("BM_QueryLifecycle<GlobalBoostMutex>",
                      &BM_QueryLifecycle<ExclusiveQueryRegistry<boost::mutex>>, 1, queries,
                      accesses);
    RegisterLifecycle("BM_QueryLifecycle<SpinLock4ShardsExclusive>",
                      &BM_QueryLifecycle<ExclusiveQueryRegistry<SpinLock>>, 4, queries,
                      accesses);
    for (int n : shard_counts) {
      RegisterLifecycle("BM_QueryLifecycle<QueryExecMgr" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<ShardedQueryRegistry>, n, queries, accesses);
    }
    // QueryExecMgr's references over a map read without a lock (hazard-query-registry.h,
    // stable-query-registry.h).
    for (int n : shard_counts) {
      RegisterLifecycle("BM_QueryLifecycle<StableSeqlockTag" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<StableQueryRegistry>, n, queries, accesses);
      RegisterLifecycle("BM_QueryLifecycle<HazardSeqlockTag" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<HazardQueryRegistry<true>>, n, queries, accesses);
      RegisterLifecycle(
          "BM_QueryLifecycle<HazardFenceSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_QueryLifecycle<HazardQueryRegistry<false>>, n, queries, accesses);
    }
  }
  for (const auto& [queries, accesses] : grid) {
    RegisterLifecycle("BM_RequestLifecycle<GlobalBoostMutex>",
                      &BM_RequestLifecycle<GlobalMutexMap<RequestPtr>>, 1, queries, accesses);
    for (int n : shard_counts) {
      RegisterLifecycle(
          "BM_RequestLifecycle<ClientRequestStateMap" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<ShardedQueryMapVariant<RequestPtr, FlatMap<RequestPtr>>>, n, queries,
          accesses);
    }
    // The same shared_ptr lookups over a map read without a lock (hazard-shared-map.h).
    for (int n : shard_counts) {
      RegisterLifecycle(
          "BM_RequestLifecycle<HazardSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<HazardSharedMap<ClientRequestState, true>>, n, queries, accesses);
      RegisterLifecycle(
          "BM_RequestLifecycle<HazardFenceSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<HazardSharedMap<ClientRequestState, false>>, n, queries,
          accesses);
    }
  }
}

/// BM_<Mix>Refs<Registry>: the map mixes over a query registry, as the executor uses one: a Get
/// takes a reference to the state it finds and releases it at once; an Add creates a state (its
/// creation reference kept in 'created', by key); a Delete releases that reference, which ends
/// the query and unregisters it unless a reader still holds one (then its Release does). An Add
/// of a key whose ended query a reader still holds finds it registered: a write failure, and the
/// Delete after it has nothing to release (another failure).
template <class Registry>
void BM_RegistryMix(benchmark::State& state, int shards, Mix mix, int threads, int entries,
                    int round_ms) {
  const Workload& w = GetWorkload(mix, threads, entries);
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT count(*) FROM lineitem");
  ctx.user = "bench";
  auto registry = std::make_unique<Registry>(shards);
  // Each key's writes come from one thread (its ring's), so 'created[k]' is that thread's.
  std::vector<QueryState*> created(w.keys.size(), nullptr);
  for (int i = 0; i < w.entries; ++i) created[i] = registry->Create(w.keys[i], ctx);
  const UniqueId* keys = w.keys.data();
  TimeMix(state, threads, round_ms,
          [&](int t, size_t* pos, uint64_t* failures, const std::atomic<bool>& stop) {
            return ReplayOps(
                w, t, pos, failures, stop,
                [&](uint32_t k) {
                  QueryState* qs = registry->Get(keys[k]);
                  if (qs != nullptr) registry->Release(qs);
                  return qs != nullptr;
                },
                [&](uint32_t k) {
                  created[k] = registry->TryCreate(keys[k], ctx);
                  return created[k] != nullptr;
                },
                [&](uint32_t k) {
                  if (created[k] == nullptr) return false;
                  registry->Release(created[k]);
                  created[k] = nullptr;
                  return true;
                });
          });
  for (QueryState* qs : created) {
    if (qs != nullptr) registry->Release(qs);
  }
}

using MixBenchmark = void (*)(benchmark::State&, int, Mix, int, int, int);

/// Registers BM_<Mix><family><variant>/entries:E/threads:T for every mix, point and variant (the
/// variants of a point back to back), 256 shards each.
void RegisterMixFamily(const std::string& family,
                       const std::vector<std::pair<std::string, MixBenchmark>>& variants,
                       const MapBenchmarkOptions& o) {
  for (Mix mix : {Mix::kLookupOnly, Mix::kReadHeavy, Mix::kChurn, Mix::kHotQuery}) {
    for (int entries : o.entries) {
      for (int threads : o.threads) {
        for (const auto& v : variants) {
          const std::string name = std::string("BM_") + MixName(mix) + family + "<" + v.first +
                                   ">/entries:" + std::to_string(entries) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [fn = v.second, mix, threads, entries, o](
                                           benchmark::State& s) {
                                         fn(s, 256, mix, threads, entries, o.round_ms);
                                       })
              ->UseManualTime()
              ->Iterations(o.rounds)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

/// The mixes over the executor's registries (BM_<Mix>Refs: QueryExecMgr and the lock-free
/// ones) and over the coordinator's maps of shared_ptrs (BM_<Mix>Shared: ClientRequestStateMap
/// and HazardSharedMap), each default twice: *Again is the spread of identical code side by side
/// (an A/A control).
void RegisterReferenceMixBenchmarks(const MapBenchmarkOptions& o) {
  RegisterMixFamily("Refs",
                    {{"QueryExecMgr256", &BM_RegistryMix<ShardedQueryRegistry>},
                     {"QueryExecMgr256Again", &BM_RegistryMix<ShardedQueryRegistry>},
                     {"StableSeqlockTag256", &BM_RegistryMix<StableQueryRegistry>},
                     {"HazardSeqlockTag256", &BM_RegistryMix<HazardQueryRegistry<true>>},
                     {"HazardFenceSeqlockTag256", &BM_RegistryMix<HazardQueryRegistry<false>>}},
                    o);
  using SharedMap = ShardedQueryMapVariant<SharedValue, FlatMap<SharedValue>>;
  RegisterMixFamily(
      "Shared",
      {{"ClientRequestStateMap256", &BM_SharedMix<SharedMap>},
       {"ClientRequestStateMap256Again", &BM_SharedMix<SharedMap>},
       {"HazardSeqlockTag256", &BM_SharedMix<HazardSharedMap<const Entry, true>>},
       {"HazardFenceSeqlockTag256", &BM_SharedMix<HazardSharedMap<const Entry, false>>}},
      o);
}

/// How a BM_WalkAll walk holds each shard: kExclusive is DoFuncForAllEntries (lowers every
/// bias, one membarrier(), then each shard exclusively); kShardByShard holds each shard
/// exclusively through a ScopedShardedMapRef, so each biased shard's lock() revokes its own
/// bias (a membarrier() each: what DoFuncForAllEntries did before 2026-12-02); kShared is
/// VisitAllShared.
enum class WalkMode { kExclusive, kShardByShard, kShared };

/// BM_WalkAll<Mode>/entries:E: one walk over every entry of a 256-shard map of E entries
/// (QueryExecMgr::GetAll's walk: a relaxed load per value), on a fresh map each time whose
/// shards all went read-biased before the walk ('biased'), or that never turns read-biased.
/// Reports the walk's wall time (manual time), revocations and membarrier() calls per walk.
void BM_WalkAll(benchmark::State& state, WalkMode mode, bool biased) {
  const int entries = static_cast<int>(state.range(0));
  std::vector<UniqueId> ids(entries);
  for (UniqueId& id : ids) id = GenerateQueryId();
  uint64_t revocations = 0, fences = 0, walks = 0;
  for (auto _ : state) {
    ShardedQueryMap<std::atomic<int>*> map(kDefaultNumShards,
                                           biased ? ReadBias::kAdaptive : ReadBias::kNever);
    std::atomic<int> value{1};
    for (const UniqueId& id : ids) CHECK(map.Add(id, &value).ok());
    // The first slot lookup of a shard raises its bias; the second goes in read-biased.
    for (int round = 0; round < 2; ++round) {
      for (const UniqueId& id : ids) benchmark::DoNotOptimize(map.Get(id));
    }
    // One key of each shard, for kShardByShard's ScopedShardedMapRef.
    std::vector<const UniqueId*> shard_keys(map.num_shards(), nullptr);
    for (const UniqueId& id : ids) shard_keys[map.ShardIndex(id)] = &id;
    int64_t sum = 0;
    const uint64_t fences_before = ShardLock::read_bias_fences();
    const auto start = std::chrono::steady_clock::now();
    if (mode == WalkMode::kShardByShard) {
      for (const UniqueId* key : shard_keys) {
        if (key == nullptr) continue;
        ShardedQueryMap<std::atomic<int>*>::ScopedShardedMapRef shard(*key, &map);
        for (auto& [id, v] : *shard) sum += v->load(std::memory_order_relaxed);
      }
    } else if (mode == WalkMode::kExclusive) {
      map.DoFuncForAllEntries([&](const UniqueId&, std::atomic<int>*& v) {
        sum += v->load(std::memory_order_relaxed);
      });
    } else {
      map.VisitAllShared([&](const UniqueId&, std::atomic<int>* const& v) {
        sum += v->load(std::memory_order_relaxed);
      });
    }
    const auto end = std::chrono::steady_clock::now();
    CHECK_EQ(sum, entries);
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    fences += ShardLock::read_bias_fences() - fences_before;
    for (int i = 0; i < map.num_shards(); ++i) {
      revocations += map.GetShardStats(i).bias_revocations;
    }
    ++walks;
  }
  state.counters["revocations_per_walk"] =
      walks == 0 ? 0 : static_cast<double>(revocations) / static_cast<double>(walks);
  state.counters["membarriers_per_walk"] =
      walks == 0 ? 0 : static_cast<double>(fences) / static_cast<double>(walks);
}

void RegisterWalkBenchmarks(const std::vector<int>& entries) {
  for (int e : entries) {
    for (bool biased : {true, false}) {
      for (WalkMode mode : {WalkMode::kExclusive, WalkMode::kShardByShard, WalkMode::kShared}) {
        const std::string name =
            std::string("BM_WalkAll<") +
            (mode == WalkMode::kExclusive      ? "DoFuncForAllEntries"
             : mode == WalkMode::kShardByShard ? "ShardByShard"
                                               : "VisitAllShared") +
            (biased ? "" : "NeverBiased") + ">";
        benchmark::RegisterBenchmark(name.c_str(),
                                     [mode, biased](benchmark::State& st) {
                                       BM_WalkAll(st, mode, biased);
                                     })
            ->Arg(e)
            ->ArgName("entries")
            ->UseManualTime()
            ->Iterations(e >= 100000 ? 20 : 200)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

/// BM_CacheLineRoundTrip<Machine>/pass:P/at:start|end: the cache-line round trip between the
/// two CPUs at the start and at the end of pass P (MeasureCacheLineRoundTrip, 21 batches).
void RegisterRoundTrip(int pass, const char* at) {
  const std::string name =
      "BM_CacheLineRoundTrip<Machine>/pass:" + std::to_string(pass) + "/at:" + at;
  benchmark::RegisterBenchmark(name.c_str(), [](benchmark::State& state) {
    CacheLineRoundTrip r;
    for (auto _ : state) r = MeasureCacheLineRoundTrip(21, 1000);
    state.counters["round_trip_ns"] = r.ns;
    state.counters["cpu_a"] = r.cpu_a;
    state.counters["cpu_b"] = r.cpu_b;
    state.SetLabel(std::string("placement:") + PlacementName(r.ns));
  })->Iterations(1);
}

void AddContext() {
  benchmark::AddCustomContext("registry_num_shards", std::to_string(FLAGS_registry_num_shards));
  benchmark::AddCustomContext("hardware_concurrency",
                              std::to_string(std::thread::hardware_concurrency()));
#ifdef QR_HAVE_TBB
  benchmark::AddCustomContext("tbb", "yes");
#else
  benchmark::AddCustomContext("tbb", "no (libtbb-dev not found at configure time)");
#endif
#ifdef QR_HAVE_LIBCUCKOO
  benchmark::AddCustomContext("libcuckoo", "yes");
#else
  benchmark::AddCustomContext("libcuckoo", "no (libcuckoo-dev not found at configure time)");
#endif
#ifdef QR_HAVE_BOOST_CFM
  benchmark::AddCustomContext("boost_concurrent_flat_map", "yes (Boost 1.88)");
#else
  benchmark::AddCustomContext("boost_concurrent_flat_map",
                              "no (Boost 1.88 headers not found at configure time: "
                              "scripts/fetch-boost-headers.sh)");
#endif
  benchmark::AddCustomContext("mix_round_ms", std::to_string(FLAGS_mix_round_ms));
  benchmark::AddCustomContext("mix_rounds", std::to_string(FLAGS_mix_rounds));
  benchmark::AddCustomContext("passes", std::to_string(FLAGS_passes));
  const CacheLineRoundTrip rtt = MeasureCacheLineRoundTrip(21, 1000);
  benchmark::AddCustomContext(
      "cache_line_round_trip_at_start",
      std::to_string(static_cast<int>(rtt.ns)) + " ns (CPUs " + std::to_string(rtt.cpu_a) + "/" +
          std::to_string(rtt.cpu_b) + ", placement:" + PlacementName(rtt.ns) + ")");
  benchmark::AddCustomContext("placement_far_ns", std::to_string(FLAGS_placement_far_ns));
  benchmark::AddCustomContext("hot_key_offset", std::to_string(FLAGS_hot_key_offset));
}

}  // namespace
}  // namespace qr::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  using namespace qr::bench;
  if (!FLAGS_callgrind_variant.empty()) {
    return RunCallgrindGets(FLAGS_callgrind_variant, FLAGS_callgrind_entries,
                            FLAGS_callgrind_ops, FLAGS_callgrind_reference);
  }
  SetPlacementFarNs(FLAGS_placement_far_ns);
  SetHotKeyOffset(FLAGS_hot_key_offset);
  AddContext();
  MapBenchmarkOptions options;
  options.threads = ParseInts(FLAGS_mix_threads);
  options.entries = ParseInts(FLAGS_mix_entries);
  options.round_ms = FLAGS_mix_round_ms;
  options.rounds = FLAGS_mix_rounds;
  options.iteration_round_ms = FLAGS_iteration_round_ms;
  options.probe_interval_us = FLAGS_iteration_probe_interval_us;
  options.iteration_nice = FLAGS_iteration_nice;
  options.probe_realtime = FLAGS_iteration_probe_realtime;
  options.sample_every = FLAGS_iteration_sample_every;
  options.iteration_variants = ParseNames(FLAGS_iteration_variants);
  options.get_min_time_s = FLAGS_get_min_time_s;
  options.get_vs_bare_rounds = FLAGS_get_vs_bare_rounds;
  for (int pass = 0; pass < FLAGS_passes; ++pass) {
    RegisterRoundTrip(pass, "start");
    RegisterLifecycleBenchmarks();
    RegisterMapBenchmarks(options);
    RegisterReferenceMixBenchmarks(options);
    RegisterWalkBenchmarks(options.entries);
    RegisterRoundTrip(pass, "end");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
