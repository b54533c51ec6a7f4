#pragma once

// The map benchmarks of process-wide-locks-benchmark: fixed-thread operation mixes, lookups
// during a full iteration, and the uncontended single-thread Get, each a google-benchmark
// BM_<Operation><Variant> over the variants of registry-variants.h.

#include <string>
#include <vector>

namespace qr::bench {

struct MapBenchmarkOptions {
  std::vector<int> threads;
  std::vector<int> entries;
  /// Length of one timed round of a mix and rounds per repetition.
  int round_ms = 50;
  int rounds = 1;
  /// BM_LookupDuringIteration: round length, the probe thread's sleep between probes, and
  /// which of the lookup threads' lookups are timed (one in 'sample_every').
  int iteration_round_ms = 100;
  int probe_interval_us = 50;
  int sample_every = 16;
  /// Nice value of the iteration benchmark's threads and whether its probe thread asks for
  /// SCHED_FIFO (see --iteration_nice and --iteration_probe_realtime).
  int iteration_nice = 0;
  bool probe_realtime = true;
  /// Variants of BM_LookupDuringIteration.
  std::vector<std::string> iteration_variants;
  /// Minimum time of each uncontended-Get benchmark.
  double get_min_time_s = 0.05;
  /// Rounds of BM_GetVsBare (each: 4096 Gets on the variant and 4096 on its bare map).
  int get_vs_bare_rounds = 200;
};

/// Registers every map benchmark, point by point with all variants of a point back to back
/// (so they run side by side in time and share one generated workload).
void RegisterMapBenchmarks(const MapBenchmarkOptions& options);

/// Builds 'variant' with 'entries' keys and does 'ops' Gets of them in a non-inlined loop named
/// CallgrindGetLoop, for valgrind --tool=callgrind --toggle-collect, each Get with a reference
/// taken and dropped if 'reference'. Returns 0, or 2 for an unknown variant (the known ones are
/// listed on stderr).
int RunCallgrindGets(const std::string& variant, int entries, int ops, bool reference);

}  // namespace qr::bench
