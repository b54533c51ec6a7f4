#pragma once

// The benchmark bodies of map-benchmarks.cc as templates over a map with registry-variants.h's
// interface, so that a peer map compiled in a translation unit of its own (boost-peer.cc, with
// Boost 1.88 headers that must never meet the project's Boost 1.74) instantiates exactly the
// same loops and harness as the variants of map-benchmarks.cc. Include no Boost header here.
// Thread-safety: as each function says; the maps are as thread-safe as the wrapped map.

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <benchmark/benchmark.h>
#include <glog/logging.h>

#include "benchmarks/bench-harness.h"
#include "benchmarks/map-benchmarks.h"

namespace qr::bench {

/// What the maps store: a pointer, as the executor's registry stores QueryState*.
using Value = const Entry*;

/// Operations between two checks of the stop flag.
constexpr int kBatch = 32;

/// The loop of every mix: thread 't' replays its sequence of 'w' from '*pos' on until 'stop',
/// calling get(k), add(k) or del(k) for an operation on key index k (get returns whether it
/// found the key, add and del whether the write succeeded); returns how many. Failed writes are
/// added to '*failures'.
template <class Get, class Add, class Del>
[[gnu::always_inline]] inline uint64_t ReplayOps(const Workload& w, int t, size_t* pos,
                                                 uint64_t* failures,
                                                 const std::atomic<bool>& stop, Get&& get,
                                                 Add&& add, Del&& del) {
  const uint32_t* seq = w.ops[t].data();
  const size_t n = w.ops[t].size();
  size_t p = *pos;
  uint64_t done = 0, found = 0, failed = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < kBatch; ++i) {
      const uint32_t op = seq[p];
      p = p + 1 == n ? 0 : p + 1;
      const uint32_t k = op & kOpKeyMask;
      switch (op >> kOpKindShift) {
        case kOpGet: found += get(k); break;
        case kOpAdd: failed += !add(k); break;
        default: failed += !del(k); break;
      }
    }
    done += kBatch;
  }
  benchmark::DoNotOptimize(found);
  *pos = p;
  *failures += failed;
  return done;
}

/// ReplayOps on a map of pointers (none of the workload's writes fails, by construction).
template <class Map>
uint64_t RunOps(Map& map, const Workload& w, int t, size_t* pos, uint64_t* failures,
                const std::atomic<bool>& stop) {
  const UniqueId* keys = w.keys.data();
  const Entry* values = w.values.data();
  return ReplayOps(
      w, t, pos, failures, stop,
      [&](uint32_t k) {
        Value v = nullptr;
        return map.Get(keys[k], &v);
      },
      [&](uint32_t k) { return map.Add(keys[k], &values[k]); },
      [&](uint32_t k) { return map.Delete(keys[k]); });
}

template <class Map>
std::unique_ptr<Map> MakePopulatedMap(const Workload& w, int shards) {
  auto map = std::make_unique<Map>(shards);
  for (int i = 0; i < w.entries; ++i) CHECK(map->Add(w.keys[i], &w.values[i]));
  return map;
}

/// For the ShardedQueryMap variants: how often a lock was contended and how often a thread went to
/// sleep in the kernel, per operation (the population before timing is single-threaded, so it
/// adds acquisitions but neither of these).
template <class Map>
void ReportLockStats(const Map& map, uint64_t ops, benchmark::State* state) {
  if constexpr (requires { map.TotalLockStats(); }) {
    const auto s = map.TotalLockStats();
    const double n = ops > 0 ? static_cast<double>(ops) : 1.0;
    state->counters["lock_contended_per_op"] = static_cast<double>(s.contended_acquisitions) / n;
    state->counters["lock_sleeps_per_op"] = static_cast<double>(s.sleeps) / n;
  }
}

/// The frame of every mix benchmark: the cache-line round trip before, timed rounds of
/// run(t, &pos, &failures, stop) on 'threads' threads (each thread's position and failed writes
/// carried from round to round), then throughput, failed writes and placement (ReportPlacement).
template <class Run>
Totals TimeMix(benchmark::State& state, int threads, int round_ms, Run&& run) {
  std::vector<size_t> pos(threads, 0);
  std::vector<uint64_t> failures(threads, 0);
  Totals totals;
  const CacheLineRoundTrip rtt_before = MeasureCacheLineRoundTrip();
  for (auto _ : state) {
    RoundResult r = RunTimedRound(threads, std::chrono::milliseconds(round_ms),
                                  [&](int t, const std::atomic<bool>& stop) {
                                    return run(t, &pos[t], &failures[t], stop);
                                  });
    state.SetIterationTime(r.seconds);
    totals.Add(r);
  }
  ReportThroughput(totals, &state);
  uint64_t failed = 0;
  for (uint64_t f : failures) failed += f;
  state.counters["write_failures"] = static_cast<double>(failed);
  ReportPlacement(rtt_before, MeasureCacheLineRoundTrip(), &state);
  return totals;
}

/// BM_<Mix><Map>: 'threads' threads run the mix's sequences for timed rounds (TimeMix).
template <class Map>
void BM_Mix(benchmark::State& state, int shards, Mix mix, int threads, int entries,
            int round_ms) {
  const Workload& w = GetWorkload(mix, threads, entries);
  std::unique_ptr<Map> map = MakePopulatedMap<Map>(w, shards);
  const Totals totals = TimeMix(state, threads, round_ms,
                                [&](int t, size_t* pos, uint64_t* failures,
                                    const std::atomic<bool>& stop) {
                                  return RunOps(*map, w, t, pos, failures, stop);
                                });
  ReportLockStats(*map, totals.ops, &state);
}

/// The coordinator's registry's values (ClientRequestStateMap holds shared_ptrs): one per key
/// of a workload, each with a control block of its own and a no-op deleter (the workload owns
/// the entries), so that a lookup's copy increments and drops its entry's count as the
/// coordinator's lookups do.
using SharedValue = std::shared_ptr<const Entry>;

inline std::vector<SharedValue> MakeSharedValues(const Workload& w) {
  std::vector<SharedValue> out;
  out.reserve(w.values.size());
  for (const Entry& e : w.values) out.emplace_back(&e, [](const Entry*) {});
  return out;
}

/// BM_<Mix>Shared<Map>: BM_Mix over a map of shared_ptrs, for the coordinator's registry and
/// the lock-free designs that would replace it: a Get copies the shared_ptr out (and drops it),
/// an Add copies the key's shared_ptr in.
template <class Map>
void BM_SharedMix(benchmark::State& state, int shards, Mix mix, int threads, int entries,
                  int round_ms) {
  const Workload& w = GetWorkload(mix, threads, entries);
  const std::vector<SharedValue> values = MakeSharedValues(w);
  auto map = std::make_unique<Map>(shards);
  for (int i = 0; i < w.entries; ++i) CHECK(map->Add(w.keys[i], values[i]));
  const UniqueId* keys = w.keys.data();
  const Totals totals = TimeMix(
      state, threads, round_ms,
      [&](int t, size_t* pos, uint64_t* failures, const std::atomic<bool>& stop) {
        return ReplayOps(
            w, t, pos, failures, stop,
            [&](uint32_t k) {
              SharedValue v;
              const bool found = map->Get(keys[k], &v);
              benchmark::DoNotOptimize(v.get());
              return found;
            },
            [&](uint32_t k) { return map->Add(keys[k], values[k]); },
            [&](uint32_t k) { return map->Delete(keys[k]); });
      });
  ReportLockStats(*map, totals.ops, &state);
}

/// What a debug page does per entry: one table row with the id and a number.
inline void AppendRow(const UniqueId& id, const Entry* e, std::string* page) {
  char id_text[33];
  PrintId(id, id_text);
  char num[24];
  char* end = std::to_chars(num, num + sizeof(num), e->payload).ptr;
  page->append("<tr><td>");
  page->append(id_text, sizeof(id_text));
  page->append("</td><td>");
  page->append(num, end);
  page->append("</td></tr>\n");
}

/// What the iterator thread of BM_LookupDuringIteration does: render under the map's locks,
/// render from a snapshot, or nothing at all (the floor the other two are compared with).
enum class IterationMode { kLockHeld, kSnapshot, kNone };

inline const char* IterationModeName(IterationMode m) {
  switch (m) {
    case IterationMode::kLockHeld: return "lock_held";
    case IterationMode::kSnapshot: return "snapshot";
    case IterationMode::kNone: break;
  }
  return "none";
}

/// Renders the whole map again and again until 'stop'; returns the number of full passes.
template <class Map>
uint64_t IterateUntil(Map& map, bool lock_held, const std::atomic<bool>& stop) {
  std::string page;
  auto render = [&page](const UniqueId& id, const Value& v) { AppendRow(id, v, &page); };
  uint64_t passes = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    page.clear();
    if (lock_held) {
      map.ForEachLocked(render);
    } else {
      map.ForEachSnapshot(render);
    }
    benchmark::DoNotOptimize(page.data());
    ++passes;
  }
  return passes;
}

/// Lookups of thread 't''s sequence until 'stop', timing one in 'every' into 'samples' (up to
/// 'cap' of them).
template <class Map>
uint64_t RunSampledLookups(const Map& map, const Workload& w, int t, size_t* pos, int every,
                           size_t cap, std::vector<uint32_t>* samples,
                           const std::atomic<bool>& stop) {
  const uint32_t* seq = w.ops[t].data();
  const size_t n = w.ops[t].size();
  size_t p = *pos;
  uint64_t done = 0, found = 0;
  int countdown = every;
  while (!stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < kBatch; ++i) {
      const UniqueId& key = w.keys[seq[p] & kOpKeyMask];
      p = p + 1 == n ? 0 : p + 1;
      Value v = nullptr;
      if (--countdown > 0) {
        found += map.Get(key, &v);
        continue;
      }
      countdown = every;
      const auto t0 = std::chrono::steady_clock::now();
      found += map.Get(key, &v);
      const auto t1 = std::chrono::steady_clock::now();
      if (samples->size() < cap) {
        samples->push_back(static_cast<uint32_t>(std::min<int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), UINT32_MAX)));
      }
    }
    done += kBatch;
  }
  benchmark::DoNotOptimize(found);
  *pos = p;
  return done;
}

/// Open-loop probes until 'stop': sleep about 'interval_us', then time one Get of a random live
/// key. A probe does not wait for the lookup threads, so it lands at a random moment of the
/// iterator's cycle and sees what a request arriving then would see. (Timing the lookup
/// threads' own lookups under-counts blocking: a thread blocked for 1 ms does one slow lookup
/// instead of the thousands of fast ones it would have done, so the slow one barely moves
/// their p99.)
template <class Map>
void RunProbes(const Map& map, const Workload& w, int interval_us, std::vector<uint32_t>* samples,
               const std::atomic<bool>& stop) {
  // 1 us of timer slack instead of the default 50 us, so sleeps are close to 'interval_us'.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  std::mt19937_64 rng(samples->size() + 1);
  std::uniform_int_distribution<int> any_live(0, w.entries - 1);
  uint64_t found = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::microseconds(interval_us));
    const UniqueId& key = w.keys[any_live(rng)];
    Value v = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    found += map.Get(key, &v);
    const auto t1 = std::chrono::steady_clock::now();
    samples->push_back(static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), UINT32_MAX)));
  }
  benchmark::DoNotOptimize(found);
}

/// BM_LookupDuringIteration<Map>: 'threads' lookup threads, one thread rendering every entry,
/// either under the map's locks (lock_held) or from a snapshot, or idle (none: the floor of
/// the probes' latency with the same threads and no iteration), and one probe thread. Reports
/// the probes' latency percentiles (lookup_p50/p99/p999_ns) and, for comparison, those of
/// every 'sample_every'-th lookup of the lookup threads (sampled_lookup_p99_ns). The lookup and
/// iterator threads run at nice 'o.iteration_nice', the probe at SCHED_FIFO where permitted.
template <class Map>
void BM_LookupDuringIteration(benchmark::State& state, int shards, IterationMode mode, int threads,
                              int entries, const MapBenchmarkOptions& o) {
  const Workload& w = GetWorkload(Mix::kLookupOnly, threads, entries);
  std::unique_ptr<Map> map = MakePopulatedMap<Map>(w, shards);
  std::vector<size_t> pos(threads, 0);
  const size_t cap = std::max<size_t>(4096, (size_t{1} << 20) / threads);
  std::vector<std::vector<uint32_t>> samples(threads);
  for (auto& s : samples) s.reserve(cap);
  std::vector<uint32_t> probes;
  bool probe_realtime = false;
  uint64_t passes = 0;
  Totals totals;
  for (auto _ : state) {
    RoundResult r = RunTimedRound(
        threads + 2, std::chrono::milliseconds(o.iteration_round_ms),
        [&](int t, const std::atomic<bool>& stop) -> uint64_t {
          if (t == threads + 1) {
            RunProbes(*map, w, o.probe_interval_us, &probes, stop);
            return 0;
          }
          if (t == threads) {
            if (mode != IterationMode::kNone) {
              passes += IterateUntil(*map, mode == IterationMode::kLockHeld, stop);
            }
            return 0;
          }
          return RunSampledLookups(*map, w, t, &pos[t], o.sample_every, cap, &samples[t], stop);
        },
        [&](int t) {
          if (t == threads + 1) {
            // The probe stands for a request handler: it must get a CPU when it wakes, or its
            // percentiles measure the run queue instead of the map. It sleeps almost all the
            // time, so a real-time priority cannot starve anybody.
            if (o.probe_realtime) probe_realtime = SetThreadRealtime();
          } else {
            SetThreadNice(o.iteration_nice);
          }
        });
    state.SetIterationTime(r.seconds);
    totals.Add(r);
  }
  ReportThroughput(totals, &state);
  state.counters["lookup_p50_ns"] = Quantile(&probes, 0.50);
  state.counters["lookup_p99_ns"] = Quantile(&probes, 0.99);
  state.counters["lookup_p999_ns"] = Quantile(&probes, 0.999);
  state.counters["probes"] = static_cast<double>(probes.size());
  std::vector<uint32_t> all;
  for (const auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  state.counters["sampled_lookup_p99_ns"] = Quantile(&all, 0.99);
  state.counters["probe_realtime"] = probe_realtime ? 1 : 0;
  state.counters["iterations_per_s"] =
      totals.seconds > 0 ? static_cast<double>(passes) / totals.seconds : 0;
}

/// The reference a lookup of the daemon takes to what it finds and drops later, one count per
/// entry of the workload (for the BM_GetRefVsBare probes; see TakeAndDropReference).
struct References {
  explicit References(const Workload& w)
      : base(w.values.data()), counts(std::make_unique<std::atomic<int32_t>[]>(w.values.size())) {
  }
  const Entry* const base;
  const std::unique_ptr<std::atomic<int32_t>[]> counts;
};

/// QueryExecMgr's reference on the entry 'v' (found by a Get): the count's CAS, then the
/// release's fetch_sub. Both are locked instructions, as a shared_ptr copy's increment and
/// its destruction's decrement are.
[[gnu::always_inline]] inline void TakeAndDropReference(const References& refs, Value v) {
  std::atomic<int32_t>& count = refs.counts[v - refs.base];
  int32_t n = count.load(std::memory_order_relaxed);
  while (!count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
  }
  count.fetch_sub(1, std::memory_order_acq_rel);
}

/// One Get of the single-thread loops at index 'p' of thread 0's lookup sequence; returns the
/// next index. Independent (kDependent false): the next index is p + 1 whatever the Get found and
/// the value only goes into '*acc' (added, then benchmark::DoNotOptimize), so no Get waits for the
/// previous one and the core overlaps them as far as the map lets it. (The value must not feed
/// the index: GCC compiles 'p + 1 + (v == nullptr)' without a branch, sete and add, which makes
/// every Get wait for the one before, i.e. a latency loop.) Dependent: the next index depends on
/// the value just read, so Gets cannot overlap: the latency of one Get. With kReference, the
/// Get also takes and drops a reference to what it found in '*refs', as the daemon's lookups do
/// (a template parameter, so that the loops without it are unchanged).
template <bool kDependent, bool kReference, class Map>
[[gnu::always_inline]] inline size_t GetStep(const Map& map, const Workload& w, size_t p,
                                             size_t mask, uintptr_t* acc,
                                             const References* refs) {
  Value v = nullptr;
  map.Get(w.keys[w.ops[0][p] & kOpKeyMask], &v);
  if constexpr (kReference) {
    if (v != nullptr) TakeAndDropReference(*refs, v);
  }
  if constexpr (kDependent) {
    benchmark::DoNotOptimize(v);
    return (p + 1 + (v == nullptr ? 1 : 0)) & mask;
  } else {
    *acc += reinterpret_cast<uintptr_t>(v);
    benchmark::DoNotOptimize(*acc);
    return (p + 1) & mask;
  }
}

template <bool kDependent, class Map>
void UncontendedGetLoop(benchmark::State& state, const Map& map, const Workload& w) {
  const size_t mask = w.ops[0].size() - 1;
  size_t p = 0;
  uintptr_t acc = 0;
  for (auto _ : state) p = GetStep<kDependent, false>(map, w, p, mask, &acc, nullptr);
}

/// BM_UncontendedGet<Map>: one thread, Gets of live keys in a random order, independent
/// (throughput of a tight loop: the out-of-order core overlaps the cache misses of consecutive
/// finds, which a locked Get, whose atomic read-modify-writes are full barriers on x86, cannot
/// do) or, with 'dependent' (BM_UncontendedGetDependent), one after the other (latency); see
/// GetStep.
template <class Map>
void BM_UncontendedGet(benchmark::State& state, int shards, int entries, bool dependent) {
  const Workload& w = GetWorkload(Mix::kLookupOnly, 1, entries);
  std::unique_ptr<Map> map = MakePopulatedMap<Map>(w, shards);
  if (dependent) {
    UncontendedGetLoop<true>(state, *map, w);
  } else {
    UncontendedGetLoop<false>(state, *map, w);
  }
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

/// CPU time of the calling thread, in ns.
inline int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

template <bool kDependent, bool kReference, class Map>
int64_t TimeGetsLoop(const Map& map, const Workload& w, int n, size_t* p,
                     const References* refs) {
  const size_t mask = w.ops[0].size() - 1;
  size_t q = *p;
  uintptr_t acc = 0;
  const int64_t t0 = ThreadCpuNs();
  for (int i = 0; i < n; ++i) q = GetStep<kDependent, kReference>(map, w, q, mask, &acc, refs);
  const int64_t t1 = ThreadCpuNs();
  *p = q;
  return t1 - t0;
}

/// 'n' Gets of thread 0's lookup sequence from '*p' on (as BM_UncontendedGet does, each with a
/// reference taken and dropped when 'refs' is non-null); returns the thread CPU ns they took.
template <class Map>
int64_t TimeGets(const Map& map, const Workload& w, int n, bool dependent, size_t* p,
                 const References* refs) {
  if (refs != nullptr) {
    return dependent ? TimeGetsLoop<true, true>(map, w, n, p, refs)
                     : TimeGetsLoop<false, true>(map, w, n, p, refs);
  }
  return dependent ? TimeGetsLoop<true, false>(map, w, n, p, nullptr)
                   : TimeGetsLoop<false, false>(map, w, n, p, nullptr);
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

/// BM_GetVsBare<Map>: BM_UncontendedGet of 'Map' and of the bare inner map 'Bare', interleaved
/// in chunks of kChunk Gets (a fraction of a millisecond each, the order alternating) over the
/// same key sequence, reporting the median of the per-round ratios (ratio_to_bare) and the
/// median ns per Get of each. On a machine shared with other work a burst of load lasts longer
/// than a round, so it slows both sides of a ratio instead of one of two separate runs.
/// With 'reference' (BM_GetRefVsBare), each Get on both sides also takes and drops a reference
/// to what it found (TakeAndDropReference), as the daemon's lookups do.
template <class Map, class Bare>
void BM_GetVsBare(benchmark::State& state, int shards, int entries, bool dependent,
                  bool reference) {
  constexpr int kChunk = 4096;
  const Workload& w = GetWorkload(Mix::kLookupOnly, 1, entries);
  std::unique_ptr<Map> map = MakePopulatedMap<Map>(w, shards);
  std::unique_ptr<Bare> bare = MakePopulatedMap<Bare>(w, shards);
  const References refs(w);
  const References* r = reference ? &refs : nullptr;
  std::vector<double> ratios, map_ns, bare_ns;
  size_t p_map = 0, p_bare = 0;
  bool bare_first = true;
  for (auto _ : state) {
    int64_t b, m;
    if (bare_first) {
      b = TimeGets(*bare, w, kChunk, dependent, &p_bare, r);
      m = TimeGets(*map, w, kChunk, dependent, &p_map, r);
    } else {
      m = TimeGets(*map, w, kChunk, dependent, &p_map, r);
      b = TimeGets(*bare, w, kChunk, dependent, &p_bare, r);
    }
    bare_first = !bare_first;
    if (b <= 0 || m <= 0) continue;
    ratios.push_back(static_cast<double>(m) / static_cast<double>(b));
    map_ns.push_back(static_cast<double>(m) / kChunk);
    bare_ns.push_back(static_cast<double>(b) / kChunk);
  }
  state.counters["ratio_to_bare"] = Median(ratios);
  state.counters["ns_per_get"] = Median(map_ns);
  state.counters["bare_ns_per_get"] = Median(bare_ns);
  state.counters["rounds"] = static_cast<double>(ratios.size());
}

/// The bare inner map of a sharded variant (void for the others).
template <class Map>
struct BareOf {
  using type = void;
};


/// The loop callgrind measures (--toggle-collect=*CallgrindGetLoop*): 'ops' Gets, nothing else.
/// Flattened, for every variant alike, so that each map's lookup is inlined into the loop as it
/// is at the call sites of the daemon (coordinatord has no out-of-line copy of the flat map's
/// find). Without it GCC keeps one out-of-line find for this file's ~30 map types and calls it
/// from the sharded variants' loops but not from the bare map's: ~15 instructions of call,
/// spills and prologue that a real Get does not pay (docs/benchmarks.md gives both counts).
/// With kReference (--callgrind_reference), each Get also takes and drops a reference (the
/// counts are allocated here: ~0.01 instructions per Get; the loop without it is unchanged).
template <bool kReference, class Map>
[[gnu::noinline, gnu::flatten]] uint64_t CallgrindGetLoop(const Map& map, const Workload& w,
                                                          int ops) {
  const std::vector<uint32_t>& seq = w.ops[0];
  const size_t mask = seq.size() - 1;
  uint64_t found = 0;
  size_t p = 0;
  std::optional<References> refs;
  if constexpr (kReference) refs.emplace(w);
  for (int i = 0; i < ops; ++i) {
    Value v = nullptr;
    found += map.Get(w.keys[seq[p] & kOpKeyMask], &v);
    if constexpr (kReference) {
      if (v != nullptr) TakeAndDropReference(*refs, v);
    }
    benchmark::DoNotOptimize(v);
    p = (p + 1) & mask;
  }
  return found;
}

template <class Map>
int CallgrindGets(int shards, int entries, int ops, bool reference) {
  const Workload& w = GetWorkload(Mix::kLookupOnly, 1, entries);
  std::unique_ptr<Map> map = MakePopulatedMap<Map>(w, shards);
  const uint64_t found =
      reference ? CallgrindGetLoop<true>(*map, w, ops) : CallgrindGetLoop<false>(*map, w, ops);
  CHECK_EQ(found, static_cast<uint64_t>(ops));
  return 0;
}

struct Variant {
  std::string name;
  int shards = 1;
  /// False for the unlocked baselines: they only run single-threaded.
  bool thread_safe = true;
  /// Runs only the lookup-only mix (no writer), where it needs no lock to be race-free.
  bool lookup_only = false;
  void (*mix)(benchmark::State&, int, Mix, int, int, int) = nullptr;
  /// Null when the map has no iteration API.
  void (*iteration)(benchmark::State&, int, IterationMode, int, int, const MapBenchmarkOptions&) =
      nullptr;
  void (*get)(benchmark::State&, int, int, bool) = nullptr;
  /// BM_GetVsBare and BM_GetRefVsBare; null for maps without a bare inner map to compare with.
  void (*get_vs_bare)(benchmark::State&, int, int, bool, bool) = nullptr;
  int (*callgrind)(int, int, int, bool) = nullptr;
};

template <class Map>
Variant MakeVariant(std::string name, int shards, bool thread_safe = true,
                    bool lookup_only = false) {
  Variant v;
  v.name = std::move(name);
  v.shards = shards;
  v.thread_safe = thread_safe;
  v.lookup_only = lookup_only;
  if (thread_safe) v.mix = &BM_Mix<Map>;
  if constexpr (requires(Map& m) { m.ForEachLocked([](const UniqueId&, const Value&) {}); }) {
    v.iteration = &BM_LookupDuringIteration<Map>;
  }
  v.get = &BM_UncontendedGet<Map>;
  if constexpr (!std::is_void_v<typename BareOf<Map>::type>) {
    v.get_vs_bare = &BM_GetVsBare<Map, typename BareOf<Map>::type>;
  }
  v.callgrind = &CallgrindGets<Map>;
  return v;
}

}  // namespace qr::bench
