#pragma once

// The registries' own benchmarks in process-wide-locks-benchmark (DESIGN.md, "benchmarks"):
// the lifecycle grids (BM_QueryLifecycle, BM_RequestLifecycle) and the map mixes over the
// registries whose lookups take a reference (BM_<Mix>Refs, BM_<Mix>Shared); the file comment of
// process-wide-locks-benchmark.cc says what each measures.

#include <string>

#include "benchmarks/map-benchmarks.h"

namespace qr::bench {

/// The lifecycle grids ('grid_points': "QxA,QxA", queries x accesses), point by point with the
/// variants of a point back to back, each run for at least 'min_time_s'.
void RegisterLifecycleBenchmarks(const std::string& grid_points, double min_time_s);

/// The mixes over the executor's registries (BM_<Mix>Refs: QueryExecMgr, its ShardLock
/// predecessor and the other lock-free variants) and over the coordinator's registries
/// (BM_<Mix>Shared: StableRefRegistry, the daemon's, and the maps of shared_ptrs
/// ShardLockRequestMap and HazardSharedMap), each baseline twice: *Again is the spread of
/// identical code side by side (an A/A control).
void RegisterReferenceMixBenchmarks(const MapBenchmarkOptions& o);

/// --callgrind_variant for the registries of the Refs mixes: builds 'variant' with 'entries'
/// queries and does 'ops' lookups of them, each a Get and the Release of what it found, in a
/// non-inlined loop named CallgrindRegistryLoop (for valgrind --tool=callgrind
/// --toggle-collect). Also the coordinator's registries of the Shared mixes
/// (ShardLockRequestMap256, StableRefRegistry256): each lookup takes a reference and drops it,
/// in CallgrindSharedLoop. Returns 0, or -1 when 'variant' is not one of those registries.
int RunCallgrindRegistryGets(const std::string& variant, int entries, int ops);

}  // namespace qr::bench
