// The price of the json_* overrides (sqlite-guarded-functions.h): each call of a JSON function
// goes through a checkpoint and SQLite's own built-in on a private connection, so that a row
// of many large calls can stop between two of them. Side by side, per statement of 10,000
// calls (a recursive CTE's rows), on a connection with SQLite's built-ins and on one with the
// overrides:
//
//   BM_JsonCall<kBuiltin|kChecked>/0   json_extract of a small distinct document per row
//   BM_JsonCall<...>/1                 json_array(i, 'x') (no parse: the call's own cost)
//   BM_JsonCall<...>/2                 the -> operator on a small distinct document
//   BM_JsonCall<...>/3                 json_valid of 100 distinct 1 MiB texts (parse-bound)
//
// Run: build/release/be/src/benchmarks/builtin-call-benchmark --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true     (docs/benchmarks.md, "json_* overrides")

#include <sqlite3.h>

#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "runtime/sqlite-guarded-functions.h"

namespace qr {
namespace {

enum Variant { kBuiltin, kChecked };

constexpr const char* kStatements[] = {
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000) "
    "SELECT sum(json_extract('{\"a\":' || i || ',\"b\":[1,2,3]}', '$.a')) FROM c",
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000) "
    "SELECT count(json_array(i, 'x')) FROM c",
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000) "
    "SELECT sum(('{\"a\":' || i || ',\"b\":[1,2,3]}') ->> '$.a') FROM c",
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100), "
    "x(t) AS (SELECT '\"' || hex(zeroblob(524288)) || '\"') "
    "SELECT sum(json_valid(t || printf('%*s', i, ''))) FROM c, x",
};
constexpr int64_t kCallsPerStatement[] = {10000, 10000, 10000, 100};

template <Variant V>
void BM_JsonCall(benchmark::State& state) {
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 2 << 20);
  std::unique_ptr<GuardedBuiltins> builtins;
  if (V == kChecked && !GuardedBuiltins::Register(db, &builtins).ok()) {
    state.SkipWithError("cannot register the overrides");
  }
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, kStatements[state.range(0)], -1, &stmt, nullptr);
  for (auto _ : state) {
    if (sqlite3_step(stmt) != SQLITE_ROW) state.SkipWithError(sqlite3_errmsg(db));
    benchmark::DoNotOptimize(sqlite3_column_int64(stmt, 0));
    sqlite3_reset(stmt);
  }
  state.SetItemsProcessed(state.iterations() * kCallsPerStatement[state.range(0)]);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}
BENCHMARK_TEMPLATE(BM_JsonCall, kBuiltin)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_JsonCall, kChecked)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace qr

BENCHMARK_MAIN();
