// process-wide-locks-benchmark: the process-wide query registries against one global lock and
// against the concurrent maps one would otherwise pick (DESIGN.md, "benchmarks").
//
//  1. BM_QueryLifecycle<Registry>/queries:Q/accesses:A - the original experiment: one thread per
//     query creates a QueryState through the registry, does A x (GetQueryState +
//     ReleaseQueryState), then releases it. Registries: a global boost::mutex registry (the
//     original "before"), 4 SpinLock shards with every access exclusive (the original
//     "after"), QueryExecMgr itself (type-stable states over a map read without a lock,
//     runtime/stable-query-registry.h) and ShardLockQueryExecMgr (QueryExecMgr before issue
//     20: shared-lock Get, lock-free Release) with 4 shards and with the --registry_num_shards
//     default; and HazardSeqlockTag*Shards and StableSeqlockTag*Shards, the same reference
//     counting over other SeqlockTagMaps, with hazard records or type-stable nodes
//     (hazard-query-registry.h, runtime/stable-query-registry.h).
//  2. BM_RequestLifecycle<Map>/queries:Q/accesses:A - the same for the coordinator side's
//     registries: register, A lookups that take a reference, unregister. ClientRequestStateMap
//     (the daemon's: StableRefs over a map read without a lock, util/stable-ref-registry.h),
//     ShardLockRequestMap (the one before issue 20: shared_ptrs in a ShardedQueryMap) and
//     HazardSeqlockTag*Shards (shared_ptr lookups over a SeqlockTagMap read without a lock,
//     hazard-shared-map.h).
//  3. The map benchmarks of map-benchmarks.h: fixed-thread mixes, lookups during a full
//     iteration, uncontended Get (alone, and interleaved with its bare inner map: BM_GetVsBare;
//     BM_GetRefVsBare does the same with a reference taken to what each Get found and dropped,
//     on both sides, as the daemon's lookups do).
//  4. BM_WalkAll<Mode>/entries:E: one walk over every entry (the walk GetAll made), with
//     each shard held exclusively (DoFuncForAllEntries) or shared (VisitAllShared), over
//     shards that all went read-biased before it, or that never do (*NeverBiased).
//  5. BM_<Mix>Refs<Registry>/entries:E/threads:T: the map mixes over the executor's registries,
//     whose lookups take a reference (QueryExecMgr, ShardLockQueryExecMgr, QueryStateRegistry
//     and the steps to it (QueryStateNewNodes, QueryStateSlabs, QueryStateHugeSlabs,
//     QueryStateGuessOne), and the other StableQueryRegistry and HazardQueryRegistry
//     variants); BM_<Mix>Shared<Map>: the same over the coordinator's registries
//     (StableRefRegistry, the daemon's; ShardLockRequestMap and HazardSharedMap, maps of
//     shared_ptrs). Each with its baseline twice (*Again), as an A/A control of the machine's
//     spread.
// Every throughput benchmark reports ops_per_s, ns_per_op and ctx_switches_per_op counters;
// scripts/bench.sh runs it and renders docs/benchmarks.md.
//
// Items 1, 2 and 5 are registered by registry-benchmarks.cc, 3 by map-benchmarks.cc.
//
// --callgrind_variant=NAME runs only an uncontended Get loop for valgrind --tool=callgrind (for
// a registry of the Refs and Shared mixes, each Get with the release of what it found).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "benchmarks/bench-harness.h"
#include "benchmarks/map-benchmarks.h"
#include "benchmarks/registry-benchmarks.h"
#include "runtime/registry-flags.h"
#include "util/shard-lock.h"
#include "util/sharded-query-map-util.h"
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
    const int registry = RunCallgrindRegistryGets(FLAGS_callgrind_variant, FLAGS_callgrind_entries,
                                                  FLAGS_callgrind_ops);
    if (registry >= 0) return registry;
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
    RegisterLifecycleBenchmarks(FLAGS_grid, FLAGS_grid_min_time_s);
    RegisterMapBenchmarks(options);
    RegisterReferenceMixBenchmarks(options);
    RegisterWalkBenchmarks(options.entries);
    RegisterRoundTrip(pass, "end");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
