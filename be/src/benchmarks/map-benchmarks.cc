#include "benchmarks/map-benchmarks.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <gflags/gflags_declare.h>

#include "benchmarks/boost-peer.h"
#include "benchmarks/get-cost-variants.h"
#include "benchmarks/legacy-spinlock.h"
#include "benchmarks/map-benchmark-templates.h"
#include "benchmarks/mirrored-registry.h"
#include "benchmarks/registry-variants.h"
#include "benchmarks/seqlock-map.h"
#include "runtime/registry-flags.h"
#include "util/seqlock-tag-map.h"

namespace qr::bench {

/// A SeqlockTagMap with holds whose Get takes a hold (VisitShared) instead of reading
/// optimistically: the same table under the registry's lookup protocol, which separates what
/// the table costs a lookup from what the optimistic read saves (docs/benchmarks.md, "Holds
/// beside a Get that stores nothing").
template <typename T, Holds kHolds>
class HeldGetMap : public SeqlockTagMap<T, kHolds> {
 public:
  using SeqlockTagMap<T, kHolds>::SeqlockTagMap;
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    return this->VisitShared(id, [out](const T* v) __attribute__((always_inline)) {
      if (v == nullptr) return false;
      *out = *v;
      return true;
    });
  }
};

/// The bare inner map of a sharded variant.
template <class T, class Inner, ReadBias kBias>
struct BareOf<ShardedQueryMapVariant<T, Inner, kBias>> {
  using type = BareMap<T, Inner>;
};
template <class T, class Lock, class Inner>
struct BareOf<ShardedLockMap<T, Lock, Inner>> {
  using type = BareMap<T, Inner>;
};
template <class T, GetSteps kUpTo, class Inner>
struct BareOf<GetCostMap<T, kUpTo, Inner>> {
  using type = BareMap<T, Inner>;
};
/// SeqlockMap has its own tables; its bare baseline is the flat map the default uses.
template <class T, bool kTypeStable, int kMaxLoadEighths>
struct BareOf<SeqlockMap<T, kTypeStable, kMaxLoadEighths>> {
  using type = BareMap<T, FlatMap<T>>;
};
template <class T, Holds kHolds, int kGroupSlots, Probe kProbe, int kMaxLoadEighths>
struct BareOf<SeqlockTagMap<T, kHolds, kGroupSlots, kProbe, kMaxLoadEighths>> {
  using type = BareMap<T, FlatMap<T>>;
};
template <class T, Holds kHolds>
struct BareOf<HeldGetMap<T, kHolds>> {
  using type = BareMap<T, FlatMap<T>>;
};
template <class T>
struct BareOf<MirroredRegistry<T>> {
  using type = BareMap<T, FlatMap<T>>;
};

namespace {

/// Every variant, in the order of the tables: the baselines, the shard counts, the other maps.
std::vector<Variant> AllVariants() {
  std::vector<Variant> v;
  v.push_back(MakeVariant<BareMap<Value, StdMap<Value>>>("BareStdFind", 1, false));
  v.push_back(MakeVariant<BareMap<Value, FlatMap<Value>>>("BareFlatFind", 1, false));
  v.push_back(MakeVariant<GlobalMutexMap<Value>>("GlobalMutex", 1));
  v.push_back(MakeVariant<SharedMutexMap<Value>>("SharedMutex", 1));
  v.push_back(MakeVariant<ShardedLockMap<Value, std::mutex>>("ShardedStdMutex64", 64));
  // The real ShardedQueryMap (ShardLock shards, its default flat inner map) at several shard
  // counts, then the same with std::unordered_map inside, then the previous default.
  std::vector<int> shard_counts = {4, 16, 64, 256};
  if (std::find(shard_counts.begin(), shard_counts.end(), FLAGS_registry_num_shards) ==
      shard_counts.end()) {
    shard_counts.push_back(FLAGS_registry_num_shards);
  }
  for (int n : shard_counts) {
    v.push_back(MakeVariant<ShardedQueryMapVariant<Value, FlatMap<Value>>>(
        "ShardedQueryMap" + std::to_string(n), n));
  }
  // The default a second time: what identical code scores against itself side by side (an
  // A/A control for the ratios to ShardedQueryMap256).
  v.push_back(
      MakeVariant<ShardedQueryMapVariant<Value, FlatMap<Value>>>("ShardedQueryMap256Again", 256));
  v.push_back(MakeVariant<ShardedQueryMapVariant<Value, StdMap<Value>>>("ShardedQueryMap256Std", 256));
  v.push_back(MakeVariant<ShardedQueryMapVariant<Value, FlatMap<Value>, ReadBias::kNever>>(
      "ShardedQueryMap256Slots", 256));
  // The previous default: the same shards and inner map, every access under the exclusive
  // SpinLock (lookups too), which moves the shard's cache line to each reading core.
  v.push_back(MakeVariant<ShardedLockMap<Value, SpinLock, FlatMap<Value>>>("SpinLockShards256",
                                                                           256));
  v.push_back(MakeVariant<ShardedLockMap<Value, LegacySpinLock, StdMap<Value>>>(
      "LegacySpinShards64Std", 64));
  // The same shards and inner map as the default, without locks: lookup-only mix only.
  v.push_back(MakeVariant<ShardedLockMap<Value, NoLock, FlatMap<Value>>>("UnlockedShards256",
                                                                          256, true, true));
  // ShardedQueryMap256's Get step by step (get-cost-variants.h): single-thread benchmarks only.
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kShard, FlatMap<Value>>>(
      "GetCostShard256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kSlot, FlatMap<Value>>>(
      "GetCostSlot256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kEnter, FlatMap<Value>>>(
      "GetCostEnter256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kExit, FlatMap<Value>>>(
      "GetCostExit256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kExitPlain, FlatMap<Value>>>(
      "GetCostExitPlain256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kExitPacked, FlatMap<Value>>>(
      "GetCostExitPacked256", 256, false));
  v.push_back(MakeVariant<GetCostMap<Value, GetSteps::kBiased, FlatMap<Value>>>(
      "GetCostBiased256", 256, false));
  // Readers that write no shared line (seqlock-map.h): per-shard version-validated reads,
  // epoch-style table reclamation. Not the default; issue 20, item 3.
  v.push_back(MakeVariant<SeqlockMap<Value>>("SeqlockMap256", 256));
  v.push_back(MakeVariant<SeqlockMap<Value>>("SeqlockMap16", 16));
  v.push_back(MakeVariant<SeqlockMap<Value, true>>("SeqlockStable256", 256));
  v.push_back(MakeVariant<SeqlockMap<Value, true, 2>>("SeqlockStableQuarter256", 256));
  // Readers that store nothing, over absl-shaped tables (seqlock-tag-map.h).
  v.push_back(MakeVariant<SeqlockTagMap<Value>>("SeqlockTagMap256", 256));
  v.push_back(MakeVariant<SeqlockTagMap<Value>>("SeqlockTagMap16", 16));
  // The same with the registry's holds (VisitShared) on top: what keeping them costs writers,
  // on slots of their own or on the registry's ShardLock.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kSlots>>("SeqlockHoldMap256", 256));
  v.push_back(
      MakeVariant<SeqlockTagMap<Value, Holds::kShardLock>>("SeqlockShardLockMap256", 256));
  // The latter with Get taking the hold (ShardLock: read-biased, else a slot) instead of
  // reading optimistically.
  v.push_back(MakeVariant<HeldGetMap<Value, Holds::kShardLock>>("SeqlockShardLockMap256HeldGet",
                                                               256));
  // SeqlockTagMap256 and SeqlockShardLockMap256 with absl's group width: 16 slots a group.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 16>>("SeqlockTagMap256G16", 256));
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kShardLock, 16>>(
      "SeqlockShardLockMap256G16", 256));
  // SeqlockTagMap256 and SeqlockShardLockMap256 whose lookups match two 8-slot groups at once.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kPairs>>(
      "SeqlockTagMap256Pair", 256));
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kShardLock, 8, Probe::kPairs>>(
      "SeqlockShardLockMap256Pair", 256));
  // The pair read with one 16-byte load (the last group's next word a copy of the first's).
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kPairsOneLoad>>(
      "SeqlockTagMap256Pair1", 256));
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kShardLock, 8, Probe::kPairsOneLoad>>(
      "SeqlockShardLockMap256Pair1", 256));
  // The pair in one load from 16-byte aligned cells (each group's word and a copy of the next).
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kPairsInCells>>(
      "SeqlockTagMap256Pair2", 256));
  // The pair's load and layout, the home group matched first and alone.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kPairsHomeFirst>>(
      "SeqlockTagMap256Home", 256));
  // absl's probe: 16 control bytes from the key's own slot on (seqlock-window-table.h).
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kWindows>>(
      "SeqlockTagMap256Window", 256));
  // 16-slot groups read with one 16-byte load.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 16, Probe::kGroupsOneLoad>>(
      "SeqlockTagMap256G16One", 256));
  // SeqlockTagMap256 with tables at most half full, so that fewer keys leave their home group.
  v.push_back(MakeVariant<SeqlockTagMap<Value, Holds::kNone, 8, Probe::kGroups, 4>>(
      "SeqlockTagMap256Half", 256));
  // The registry with a SeqlockTagMap beside it that Get reads (mirrored-registry.h).
  v.push_back(MakeVariant<MirroredRegistry<Value>>("MirroredRegistry256", 256));
#ifdef QR_HAVE_TBB
  v.push_back(MakeVariant<TbbMap<Value>>("TbbConcurrentHashMap", 1));
#endif
#ifdef QR_HAVE_LIBCUCKOO
  v.push_back(MakeVariant<CuckooMap<Value>>("LibcuckooMap", 1));
#endif
#ifdef QR_HAVE_BOOST_CFM
  v.push_back(MakeBoostConcurrentFlatMapVariant());
#endif
  return v;
}

std::string PointSuffix(int entries, int threads) {
  return "/entries:" + std::to_string(entries) + "/threads:" + std::to_string(threads);
}

}  // namespace

void RegisterMapBenchmarks(const MapBenchmarkOptions& o) {
  const std::vector<Variant> variants = AllVariants();
  for (Mix mix : {Mix::kLookupOnly, Mix::kReadHeavy, Mix::kChurn, Mix::kHotQuery}) {
    for (int entries : o.entries) {
      for (int threads : o.threads) {
        for (const Variant& v : variants) {
          if (!v.thread_safe || (v.lookup_only && mix != Mix::kLookupOnly)) continue;
          std::string name = std::string("BM_") + MixName(mix) + "<" + v.name + ">" +
                             PointSuffix(entries, threads);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [v, mix, threads, entries, o](benchmark::State& s) {
                                         v.mix(s, v.shards, mix, threads, entries, o.round_ms);
                                       })
              ->UseManualTime()
              ->Iterations(o.rounds)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  const std::vector<std::string>& iteration_names = o.iteration_variants;
  for (int entries : o.entries) {
    for (int threads : o.threads) {
      for (IterationMode mode :
           {IterationMode::kLockHeld, IterationMode::kSnapshot, IterationMode::kNone}) {
        for (const Variant& v : variants) {
          if (v.iteration == nullptr || std::find(iteration_names.begin(), iteration_names.end(),
                                                  v.name) == iteration_names.end()) {
            continue;
          }
          std::string name = "BM_LookupDuringIteration<" + v.name + ">/mode:" +
                             IterationModeName(mode) +
                             PointSuffix(entries, threads);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [v, mode, threads, entries, o](benchmark::State& s) {
                v.iteration(s, v.shards, mode, threads, entries, o);
              })
              ->UseManualTime()
              ->Iterations(o.rounds)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  for (bool dependent : {false, true}) {
    for (int entries : o.entries) {
      for (const Variant& v : variants) {
        std::string name = std::string(dependent ? "BM_UncontendedGetDependent<"
                                                 : "BM_UncontendedGet<") +
                           v.name + ">" + PointSuffix(entries, 1);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [v, entries, dependent](benchmark::State& s) {
                                       v.get(s, v.shards, entries, dependent);
                                     })
            ->MinTime(o.get_min_time_s);
        if (v.get_vs_bare == nullptr) continue;
        for (bool reference : {false, true}) {
          name = std::string(reference ? "BM_GetRefVsBare" : "BM_GetVsBare") +
                 (dependent ? "Dependent<" : "<") + v.name + ">" + PointSuffix(entries, 1);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [v, entries, dependent, reference](benchmark::State& s) {
                                         v.get_vs_bare(s, v.shards, entries, dependent,
                                                       reference);
                                       })
              ->Iterations(o.get_vs_bare_rounds);
        }
      }
    }
  }
}

int RunCallgrindGets(const std::string& variant, int entries, int ops, bool reference) {
  for (const Variant& v : AllVariants()) {
    if (v.name == variant) return v.callgrind(v.shards, entries, ops, reference);
  }
  fprintf(stderr, "unknown variant '%s'; known:", variant.c_str());
  for (const Variant& v : AllVariants()) fprintf(stderr, " %s", v.name.c_str());
  fprintf(stderr, "\n");
  return 2;
}

}  // namespace qr::bench
