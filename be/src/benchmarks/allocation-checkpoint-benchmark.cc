// The price of the checkpoint in SQLite's allocations (StepCheckpoint::Allocating, called by
// the accounting allocator of sqlite-heap.h for every sqlite3_malloc and growing realloc), on
// the daemon's allocator, side by side:
//
//   BM_MallocFree<kNoCheck>      sqlite3_malloc(64) + sqlite3_free on a thread with no query
//                                (the I/O threads; one thread-local test)
//   BM_MallocFree<kCheck>        the same on a query's thread: a check installed, run every
//                                64 KiB allocated (here a no-op that says go on)
//   BM_Statement<...>/0          a statement of many small allocations: 10,000 rows each
//                                building a short string
//   BM_Statement<...>/1          a row of 100 concatenations of a 1 MiB value (each 1 MiB
//                                allocation runs the check)
//
// Run: build/release/be/src/benchmarks/allocation-checkpoint-benchmark
//      --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// (docs/benchmarks.md, "Checkpoints in SQLite's allocations"). For instruction counts:
// valgrind --tool=callgrind ... --benchmark_filter=MallocFree --benchmark_min_time=0.05s

#include <sqlite3.h>

#include <cstdio>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

#include "runtime/sqlite-heap.h"
#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

enum Variant { kNoCheck, kCheck };

bool GoOn(void* arg, bool /*may_yield*/) {
  ++*static_cast<int64_t*>(arg);
  return false;
}

template <Variant V>
void BM_MallocFree(benchmark::State& state) {
  int64_t checks = 0;
  std::optional<StepCheckpoint> checkpoint;
  if (V == kCheck) checkpoint.emplace(&GoOn, &checks);
  for (auto _ : state) {
    void* p = sqlite3_malloc(64);
    benchmark::DoNotOptimize(p);
    sqlite3_free(p);
  }
  state.counters["checks"] = static_cast<double>(checks);
}
BENCHMARK_TEMPLATE(BM_MallocFree, kNoCheck);
BENCHMARK_TEMPLATE(BM_MallocFree, kCheck);

std::string RowOfConcats() {
  std::string sql = "WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 1048576, 'a')) SELECT ";
  for (int i = 0; i < 100; ++i) {
    sql += (i > 0 ? " + " : "") + std::string("length(x || '") + std::to_string(i) + "')";
  }
  return sql + " FROM t";
}

template <Variant V>
void BM_Statement(benchmark::State& state) {
  const std::string sql =
      state.range(0) == 0
          ? "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000) "
            "SELECT sum(length(i || '-' || (i * 7) || 'x')) FROM c"
          : RowOfConcats();
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  int64_t checks = 0;
  std::optional<StepCheckpoint> checkpoint;
  if (V == kCheck) checkpoint.emplace(&GoOn, &checks);
  for (auto _ : state) {
    if (sqlite3_step(stmt) != SQLITE_ROW) state.SkipWithError(sqlite3_errmsg(db));
    benchmark::DoNotOptimize(sqlite3_column_int64(stmt, 0));
    sqlite3_reset(stmt);
  }
  checkpoint.reset();
  state.counters["checks_per_statement"] =
      static_cast<double>(checks) / static_cast<double>(state.iterations());
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}
BENCHMARK_TEMPLATE(BM_Statement, kNoCheck)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_Statement, kCheck)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  // The daemon's allocator, as coordinatord installs it before SQLite initializes.
  if (qr::Status s = qr::InstallSqliteHeap(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
