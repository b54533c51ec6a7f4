// The registries' lifecycle grids and reference mixes (registry-benchmarks.h).

#include "benchmarks/registry-benchmarks.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/thread/mutex.hpp>
#include <glog/logging.h>

#include "benchmarks/bench-harness.h"
#include "benchmarks/hazard-query-registry.h"
#include "benchmarks/hazard-shared-map.h"
#include "benchmarks/map-benchmark-templates.h"
#include "benchmarks/registry-variants.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/query-state.h"
#include "runtime/registry-flags.h"
#include "runtime/stable-query-registry.h"
#include "service/client-request-state.h"
#include "util/mutex.h"
#include "util/spinlock.h"
#include "util/stable-ref-registry.h"
#include "util/unique-id.h"

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

/// QueryExecMgr as it was before issue 20 (commit 2910cbf and earlier), for comparison: the
/// states in ShardedQueryMap<Box*>, a Box being a state with its reference count in front (a
/// heap allocation per query, freed at its last Release). A Get adds a reference with a CAS
/// inside the shard's shared hold (VisitShared: read-biased, or a reader slot), a Release
/// subtracts one with no lock, and the last Release erases the entry under the shard's
/// exclusive lock (which waits for the readers that found it) and deletes the box after it.
/// With QueryExecMgr's accounting (a creation counter, each deletion counted under the drain
/// lock), so that it compares with QueryExecMgr itself.
class ShardLockQueryRegistry {
 public:
  explicit ShardLockQueryRegistry(int num_shards) : map_(num_shards) {}
  ~ShardLockQueryRegistry() {
    map_.DoFuncForAllEntries([](const UniqueId&, Box*& b) { delete b; });
  }

  QueryState* Create(const UniqueId& id, QueryContext ctx) {
    QueryState* qs = TryCreate(id, std::move(ctx));
    CHECK(qs != nullptr);
    return qs;
  }
  QueryState* TryCreate(const UniqueId& id, QueryContext ctx) {
    auto b = std::make_unique<Box>(id, std::move(ctx));
    if (!map_.Add(id, b.get()).ok()) return nullptr;
    created_.fetch_add(1, std::memory_order_relaxed);
    return b.release()->state();
  }
  QueryState* Get(const UniqueId& id) {
    return map_.VisitShared(id, [](Box* const* entry) -> QueryState* {
      if (entry == nullptr) return nullptr;
      Box* b = *entry;
      int32_t n = b->refs.load(std::memory_order_relaxed);
      do {
        if (n == 0) return nullptr;  // Being unregistered.
      } while (!b->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
      return b->state();
    });
  }
  void Release(QueryState* qs) {
    Box* b = Box::Of(qs);
    if (b->refs.fetch_sub(1, std::memory_order_acq_rel) > 1) return;
    {
      Map::ScopedShardedMapRef ref(qs->query_id(), &map_);
      ref->erase(qs->query_id());
    }
    delete b;
    MutexLock l(&drain_lock_);
    released_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  /// The count in front of the state, as QueryState's own count was (on its first lines).
  struct Box {
    std::atomic<int32_t> refs{1};
    alignas(QueryState) unsigned char storage[sizeof(QueryState)];

    Box(const UniqueId& id, QueryContext ctx) { new (storage) QueryState(id, std::move(ctx)); }
    ~Box() { state()->~QueryState(); }
    QueryState* state() { return std::launder(reinterpret_cast<QueryState*>(storage)); }
    static Box* Of(QueryState* qs) {
      static_assert(std::is_standard_layout_v<Box>, "offsetof needs a standard-layout box");
      return reinterpret_cast<Box*>(reinterpret_cast<unsigned char*>(qs) -
                                    offsetof(Box, storage));
    }
  };
  using Map = ShardedQueryMap<Box*>;
  Map map_;
  std::atomic<int64_t> created_{0};
  Mutex drain_lock_;
  std::atomic<int64_t> released_{0};
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

/// The coordinator's registry before issue 20 (ShardLockRequestMap): shared_ptrs in a
/// ShardedQueryMap, a lookup copying one under the shard's shared lock.
using RequestPtr = std::shared_ptr<ClientRequestState>;

/// The coordinator's registry (ClientRequestStateMap, util/stable-ref-registry.h) with the
/// benchmark's map interface.
class StableRequestMap {
 public:
  explicit StableRequestMap(int num_shards) : map_(num_shards) {}
  bool Add(const UniqueId& id, const ClientRequestStatePtr& req) {
    DCHECK(id == req->query_id());
    return map_.Add(req);
  }
  bool Get(const UniqueId& id, ClientRequestStatePtr* out) const {
    *out = map_.Get(id);
    return static_cast<bool>(*out);
  }
  bool Delete(const UniqueId& id) { return map_.Delete(id); }

 private:
  ClientRequestStateMap map_;
};

/// A request for 'Map': a StableRef for the coordinator's registry, a shared_ptr for the others.
template <class Map>
auto MakeRequestFor(const UniqueId& id, const std::shared_ptr<const std::string>& statement,
                    const SessionInfo& session) {
  if constexpr (std::is_same_v<Map, StableRequestMap>) {
    return MakeClientRequestState(id, statement, session);
  } else {
    return std::make_shared<ClientRequestState>(id, statement, session);
  }
}

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
      auto request = MakeRequestFor<Map>(ids[t], statement, session);
      CHECK(map.Add(ids[t], request));
      for (int a = 0; a < accesses; ++a) {
        decltype(request) found;
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
                       int accesses, double min_time_s) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [fn, num_shards](benchmark::State& s) { fn(s, num_shards); })
      ->Args({queries, accesses})
      ->ArgNames({"queries", "accesses"})
      ->UseManualTime()
      ->MinTime(min_time_s)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void RegisterLifecycleBenchmarks(const std::string& grid_points, double min_time_s) {
  const int def = FLAGS_registry_num_shards;
  std::vector<int> shard_counts = {4};
  if (def != 4) shard_counts.push_back(def);
  const auto grid = ParseGrid(grid_points);
  for (const auto& [queries, accesses] : grid) {
    RegisterLifecycle("BM_QueryLifecycle<GlobalBoostMutex>",
                      &BM_QueryLifecycle<ExclusiveQueryRegistry<boost::mutex>>, 1, queries,
                      accesses, min_time_s);
    RegisterLifecycle("BM_QueryLifecycle<SpinLock4ShardsExclusive>",
                      &BM_QueryLifecycle<ExclusiveQueryRegistry<SpinLock>>, 4, queries,
                      accesses, min_time_s);
    for (int n : shard_counts) {
      RegisterLifecycle("BM_QueryLifecycle<QueryExecMgr" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<ShardedQueryRegistry>, n, queries, accesses,
                        min_time_s);
      RegisterLifecycle(
          "BM_QueryLifecycle<ShardLockQueryExecMgr" + std::to_string(n) + "Shards>",
          &BM_QueryLifecycle<ShardLockQueryRegistry>, n, queries, accesses, min_time_s);
    }
    // QueryExecMgr's references over a map read without a lock (hazard-query-registry.h,
    // stable-query-registry.h).
    for (int n : shard_counts) {
      RegisterLifecycle("BM_QueryLifecycle<StableSeqlockTag" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<StableQueryRegistry>, n, queries, accesses,
                        min_time_s);
      RegisterLifecycle("BM_QueryLifecycle<HazardSeqlockTag" + std::to_string(n) + "Shards>",
                        &BM_QueryLifecycle<HazardQueryRegistry<true>>, n, queries, accesses,
                        min_time_s);
      RegisterLifecycle(
          "BM_QueryLifecycle<HazardFenceSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_QueryLifecycle<HazardQueryRegistry<false>>, n, queries, accesses, min_time_s);
    }
  }
  for (const auto& [queries, accesses] : grid) {
    RegisterLifecycle("BM_RequestLifecycle<GlobalBoostMutex>",
                      &BM_RequestLifecycle<GlobalMutexMap<RequestPtr>>, 1, queries, accesses,
                      min_time_s);
    for (int n : shard_counts) {
      RegisterLifecycle(
          "BM_RequestLifecycle<ShardLockRequestMap" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<ShardedQueryMapVariant<RequestPtr, FlatMap<RequestPtr>>>, n, queries,
          accesses, min_time_s);
      RegisterLifecycle(
          "BM_RequestLifecycle<ClientRequestStateMap" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<StableRequestMap>, n, queries, accesses, min_time_s);
    }
    // The same shared_ptr lookups over a map read without a lock (hazard-shared-map.h).
    for (int n : shard_counts) {
      RegisterLifecycle(
          "BM_RequestLifecycle<HazardSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<HazardSharedMap<ClientRequestState, true>>, n, queries, accesses,
          min_time_s);
      RegisterLifecycle(
          "BM_RequestLifecycle<HazardFenceSeqlockTag" + std::to_string(n) + "Shards>",
          &BM_RequestLifecycle<HazardSharedMap<ClientRequestState, false>>, n, queries,
          accesses, min_time_s);
    }
  }
}

namespace {

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

}  // namespace

namespace {

/// The executor's registries of the Refs mixes, each with its mix and its callgrind loop.
struct RegistryVariant {
  const char* name;
  MixBenchmark mix;
  int (*callgrind)(int entries, int ops);
};

/// The loop callgrind measures for a registry (--toggle-collect=*CallgrindRegistryLoop*): 'ops'
/// lookups of the lookup-only mix's keys, each a Get and the Release of what it found, as a
/// Refs mix's lookups are; flattened, as CallgrindGetLoop is.
template <class Registry>
[[gnu::noinline, gnu::flatten]] uint64_t CallgrindRegistryLoop(Registry& registry,
                                                               const Workload& w, int ops) {
  const std::vector<uint32_t>& seq = w.ops[0];
  const size_t mask = seq.size() - 1;
  uint64_t found = 0;
  size_t p = 0;
  for (int i = 0; i < ops; ++i) {
    QueryState* qs = registry.Get(w.keys[seq[p] & kOpKeyMask]);
    if (qs != nullptr) {
      registry.Release(qs);
      ++found;
    }
    benchmark::DoNotOptimize(qs);
    p = (p + 1) & mask;
  }
  return found;
}

template <class Registry>
int CallgrindRegistryGets(int entries, int ops) {
  const Workload& w = GetWorkload(Mix::kLookupOnly, 1, entries);
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT count(*) FROM lineitem");
  ctx.user = "bench";
  auto registry = std::make_unique<Registry>(256);
  std::vector<QueryState*> created(w.entries);
  for (int i = 0; i < w.entries; ++i) created[i] = registry->Create(w.keys[i], ctx);
  CHECK_EQ(CallgrindRegistryLoop(*registry, w, ops), static_cast<uint64_t>(ops));
  for (QueryState* qs : created) registry->Release(qs);
  return 0;
}

template <class Registry>
RegistryVariant MakeRegistryVariant(const char* name) {
  return {name, &BM_RegistryMix<Registry>, &CallgrindRegistryGets<Registry>};
}

const std::vector<RegistryVariant>& RegistryVariants() {
  static const std::vector<RegistryVariant> variants = {
      MakeRegistryVariant<ShardedQueryRegistry>("QueryExecMgr256"),
      MakeRegistryVariant<ShardedQueryRegistry>("QueryExecMgr256Again"),
      MakeRegistryVariant<StableQueryRegistry>("StableSeqlockTag256"),
      MakeRegistryVariant<StablePairQueryRegistry>("StableSeqlockPair1256"),
      MakeRegistryVariant<StableWindowQueryRegistry>("StableSeqlockWindow256"),
      MakeRegistryVariant<ShardLockQueryRegistry>("ShardLockQueryExecMgr256"),
      MakeRegistryVariant<ShardLockQueryRegistry>("ShardLockQueryExecMgr256Again"),
      MakeRegistryVariant<QueryStateRegistry>("QueryStateRegistry256"),
      MakeRegistryVariant<StableWindowCheckQueryRegistry>("QueryStateNewNodes256"),
      MakeRegistryVariant<QueryStateSlabRegistry>("QueryStateSlabs256"),
      MakeRegistryVariant<QueryStateHugeSlabRegistry>("QueryStateHugeSlabs256"),
      MakeRegistryVariant<QueryStateGuessOneRegistry>("QueryStateGuessOne256"),
      MakeRegistryVariant<HazardQueryRegistry<true>>("HazardSeqlockTag256"),
      MakeRegistryVariant<HazardQueryRegistry<false>>("HazardFenceSeqlockTag256"),
  };
  return variants;
}

/// BM_<Mix>Shared<StableRefRegistry256>: BM_SharedMix's operations over the coordinator's
/// lock-free registry (util/stable-ref-registry.h): one StableRef per key, made once (the
/// workload's entries copied into type-stable nodes); a Get takes a reference and drops it, an
/// Add registers the key's object, a Delete unregisters it.
void BM_StableRefMix(benchmark::State& state, int shards, Mix mix, int threads, int entries,
                     int round_ms) {
  const Workload& w = GetWorkload(mix, threads, entries);
  std::vector<StableRef<Entry>> values;
  values.reserve(w.values.size());
  for (size_t i = 0; i < w.values.size(); ++i) {
    values.push_back(MakeStable<Entry>(w.keys[i], w.values[i]));
  }
  auto map = std::make_unique<StableRefRegistry<Entry>>(shards);
  for (int i = 0; i < w.entries; ++i) CHECK(map->Add(values[i]));
  const UniqueId* keys = w.keys.data();
  const Totals totals = TimeMix(
      state, threads, round_ms,
      [&](int t, size_t* pos, uint64_t* failures, const std::atomic<bool>& stop) {
        return ReplayOps(
            w, t, pos, failures, stop,
            [&](uint32_t k) {
              StableRef<Entry> v = map->Get(keys[k]);
              benchmark::DoNotOptimize(v.get());
              return static_cast<bool>(v);
            },
            [&](uint32_t k) { return map->Add(values[k]); },
            [&](uint32_t k) { return map->Delete(keys[k]); });
      });
  ReportLockStats(*map, totals.ops, &state);
}

using SharedMap = ShardedQueryMapVariant<SharedValue, FlatMap<SharedValue>>;

/// A Shared mix's lookup: a new reference to what 'id' maps to, or null.
SharedValue LookUp(SharedMap& map, const UniqueId& id) {
  SharedValue v;
  map.Get(id, &v);
  return v;
}
StableRef<Entry> LookUp(StableRefRegistry<Entry>& map, const UniqueId& id) { return map.Get(id); }

/// CallgrindRegistryLoop for the coordinator's registries (--toggle-collect=
/// *CallgrindSharedLoop*): 'ops' lookups, each taking a reference and dropping it.
template <class Map>
[[gnu::noinline, gnu::flatten]] uint64_t CallgrindSharedLoop(Map& map, const Workload& w,
                                                             int ops) {
  const std::vector<uint32_t>& seq = w.ops[0];
  const size_t mask = seq.size() - 1;
  uint64_t found = 0;
  size_t p = 0;
  for (int i = 0; i < ops; ++i) {
    auto v = LookUp(map, w.keys[seq[p] & kOpKeyMask]);
    benchmark::DoNotOptimize(v.get());
    found += v ? 1 : 0;
    p = (p + 1) & mask;
  }
  return found;
}

int CallgrindSharedGets(const std::string& variant, int entries, int ops) {
  const Workload& w = GetWorkload(Mix::kLookupOnly, 1, entries);
  if (variant == "ShardLockRequestMap256") {
    const std::vector<SharedValue> values = MakeSharedValues(w);
    SharedMap map(256);
    for (int i = 0; i < w.entries; ++i) CHECK(map.Add(w.keys[i], values[i]));
    CHECK_EQ(CallgrindSharedLoop(map, w, ops), static_cast<uint64_t>(ops));
    return 0;
  }
  if (variant == "StableRefRegistry256") {
    StableRefRegistry<Entry> map(256);
    for (int i = 0; i < w.entries; ++i) CHECK(map.Add(MakeStable<Entry>(w.keys[i], w.values[i])));
    CHECK_EQ(CallgrindSharedLoop(map, w, ops), static_cast<uint64_t>(ops));
    return 0;
  }
  return -1;
}

}  // namespace

void RegisterReferenceMixBenchmarks(const MapBenchmarkOptions& o) {
  std::vector<std::pair<std::string, MixBenchmark>> refs;
  for (const RegistryVariant& v : RegistryVariants()) refs.emplace_back(v.name, v.mix);
  RegisterMixFamily("Refs", refs, o);
  RegisterMixFamily(
      "Shared",
      {{"ShardLockRequestMap256", &BM_SharedMix<SharedMap>},
       {"ShardLockRequestMap256Again", &BM_SharedMix<SharedMap>},
       {"HazardSeqlockTag256", &BM_SharedMix<HazardSharedMap<const Entry, true>>},
       {"HazardFenceSeqlockTag256", &BM_SharedMix<HazardSharedMap<const Entry, false>>},
       {"StableRefRegistry256", &BM_StableRefMix}},
      o);
}

int RunCallgrindRegistryGets(const std::string& variant, int entries, int ops) {
  for (const RegistryVariant& v : RegistryVariants()) {
    if (variant == v.name) return v.callgrind(entries, ops);
  }
  return CallgrindSharedGets(variant, entries, ops);
}

}  // namespace qr::bench
