#pragma once

// Workloads and the thread harness of process-wide-locks-benchmark.
//
// A Workload holds the keys and every thread's operation sequence of one benchmark point,
// generated (deterministically) before anything is timed and shared by all variants, so every
// variant runs exactly the same operations. The harness starts its threads, parks them on a
// gate, and times from opening the gate to the end of the round; context switches are the
// process's getrusage(RUSAGE_SELF) delta over that window.
// Thread-safety: GetWorkload() must be called from one thread (the benchmark's main thread);
// the returned Workload is immutable and safe to share.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "util/unique-id.h"

namespace qr::bench {

/// The value registered for a key in the map benchmarks (the map stores a pointer to it, as the
/// executor's registry stores a QueryState*).
struct Entry {
  UniqueId id;
  uint64_t payload = 0;
};

enum class Mix {
  kLookupOnly,  // 100% Get of uniformly chosen live keys
  kReadHeavy,   // 94% Get, 3% Add, 3% Delete
  kChurn,       // 50% Get, 25% Add, 25% Delete
  kHotQuery,    // 100% Get of one key, the same for every thread
};
const char* MixName(Mix mix);

/// "1,2,4" -> {1, 2, 4} (a flag's list; empty items skipped).
std::vector<int> ParseInts(const std::string& list);
/// "a,b" -> {"a", "b"} (empty items skipped).
std::vector<std::string> ParseNames(const std::string& list);

/// An operation of a sequence: its kind in the top two bits, the key's index below.
enum OpKind : uint32_t { kOpGet = 0, kOpAdd = 1, kOpDelete = 2 };
inline constexpr int kOpKindShift = 30;
inline constexpr uint32_t kOpKeyMask = (1u << kOpKindShift) - 1;

/// Keys and per-thread operation sequences of one (mix, threads, entries) point.
///
/// keys[0, entries) are registered before the run. Each thread owns a ring of 2h keys for its
/// writes: h of them among the registered keys, h extra keys (index >= entries) that start
/// absent. Writes alternate Delete (the oldest present ring key) and Add (the oldest absent
/// one), and each sequence holds a multiple of 2*(2h) writes, so replaying a sequence from
/// its start after a full cycle finds the map in its initial state: every Add targets an
/// absent key and every Delete a present one, on every variant, forever.
struct Workload {
  Mix mix = Mix::kLookupOnly;
  int threads = 0;
  int entries = 0;
  std::vector<UniqueId> keys;
  /// values[i] is what keys[i] maps to.
  std::vector<Entry> values;
  /// ops[t] is thread t's cyclic sequence.
  std::vector<std::vector<uint32_t>> ops;
};

/// The workload of a point. Only the last one is kept: register the variants of a point back
/// to back.
const Workload& GetWorkload(Mix mix, int threads, int entries);

/// The hot query's key is live key number entries / 2 + 'offset' (modulo entries); 0 by
/// default. Call before the first GetWorkload.
void SetHotKeyOffset(int offset);

/// A query-id-shaped key (low 32 bits of 'lo' zero) from a seeded generator.
std::vector<UniqueId> MakeKeys(size_t n, uint64_t seed);

/// What the kernel accounted to the whole process so far (getrusage(RUSAGE_SELF)).
struct ProcessUsage {
  /// Voluntary + involuntary context switches.
  uint64_t context_switches = 0;
  /// User + system CPU time.
  double cpu_seconds = 0;
};
ProcessUsage GetProcessUsage();

struct RoundResult {
  /// Operations done by all threads.
  uint64_t ops = 0;
  /// Wall time from opening the start gate to the end of the round.
  double seconds = 0;
  /// Context switches and CPU time of the process during that time.
  uint64_t context_switches = 0;
  double cpu_seconds = 0;
};

/// Sums of the rounds of one benchmark run.
struct Totals {
  uint64_t ops = 0;
  double seconds = 0;
  uint64_t context_switches = 0;
  double cpu_seconds = 0;
  void Add(const RoundResult& r) {
    ops += r.ops;
    seconds += r.seconds;
    context_switches += r.context_switches;
    cpu_seconds += r.cpu_seconds;
  }
};

/// Sets the counters every throughput benchmark reports: ops_per_s, ns_per_op (wall time per
/// operation of the whole process, i.e. 1e9 / ops_per_s), ctx_switches_per_op, and
/// cpu_ns_per_op (CPU time of the process per operation: unlike the wall-clock numbers it does
/// not depend on how much of the machine other processes took during the run).
void ReportThroughput(const Totals& totals, benchmark::State* state);

/// Runs 'body(t, stop)' on 'threads' new threads (t in [0, threads)), released together once
/// all have started. After 'duration' 'stop' is raised; each body returns the operations it
/// did. The round ends when 'stop' is raised (later operations are still counted: a body
/// checks 'stop' every few dozen operations). 'prepare(t)', if given, runs on thread 't' before
/// it arrives at the start gate: where a thread's scheduling (priority, nice) is set, so that it
/// is in effect when the gate opens. (Set after the gate, a real-time priority only takes hold
/// once the normal-priority thread first gets a CPU, which with 64 busy threads on 2 cores can
/// be most of a round later.)
RoundResult RunTimedRound(int threads, std::chrono::nanoseconds duration,
                          const std::function<uint64_t(int, const std::atomic<bool>&)>& body,
                          const std::function<void(int)>& prepare = nullptr);

/// Runs 'body(t)' to completion on 'threads' new threads released together; the round ends
/// when the last body returns (thread exit is not timed). 'ops' is left 0 for the caller.
RoundResult RunThreadsToCompletion(int threads, const std::function<void(int)>& body);

/// Sets the calling thread's nice value (Linux: per thread). Lowering it needs CAP_SYS_NICE;
/// without it the value is left alone. GetThreadNice() says what is in effect.
void SetThreadNice(int nice);
int GetThreadNice();
/// Moves the calling thread to SCHED_FIFO at the lowest real-time priority. Needs CAP_SYS_NICE;
/// returns false (and changes nothing) without it.
bool SetThreadRealtime();

/// The machine under a benchmark point: the round trip of one cache line between two CPUs.
/// On a VM the two vCPUs may share a cache (~60 ns) or not (~340 ns), and the hypervisor flips
/// between the two by itself, which moves every multi-threaded result; each point and pass is
/// marked with the state it ran in, so that the machine can be told from the maps.
struct CacheLineRoundTrip {
  /// Median ns of one round trip (this CPU writes the line, the other CPU reads it and writes
  /// back, this one reads that); 0 if fewer than two CPUs are allowed.
  double ns = 0;
  /// The two CPUs the threads were pinned to.
  int cpu_a = -1;
  int cpu_b = -1;
};

/// Ping-pongs one cache line between the first two CPUs this process may run on: two new
/// threads pinned to them hand a counter back and forth, 'batches' timed batches of
/// 'round_trips' round trips each; the median batch. Takes about a millisecond. With one CPU
/// allowed, returns ns = 0 without starting a thread.
CacheLineRoundTrip MeasureCacheLineRoundTrip(int batches = 7, int round_trips = 1000);

/// The round trip (ns) from which on a placement is "far" (--placement_far_ns; default 150,
/// between this VM's ~60 ns and ~340 ns states).
void SetPlacementFarNs(double ns);
double PlacementFarNs();

/// The placement state of a round trip: "near" (the CPUs share a cache: below
/// PlacementFarNs()), "far" (a transfer crosses caches or sockets) or "n/a" (0: one CPU).
const char* PlacementName(double round_trip_ns);

/// Sets the counters of a point's machine state: rtt_before_ns, rtt_after_ns (the round trips
/// measured before and after the point's timed rounds), placement_far (1 if both were far,
/// 0 if both near, 0.5 if it flipped during the point) and a label "placement:near|far|mixed".
void ReportPlacement(const CacheLineRoundTrip& before, const CacheLineRoundTrip& after,
                     benchmark::State* state);

/// The 'q'-quantile (0..1) of 'samples' (reordered).
double Quantile(std::vector<uint32_t>* samples, double q);

}  // namespace qr::bench
