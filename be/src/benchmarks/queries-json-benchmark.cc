// The cost of one refresh of the /queries page (docs/benchmarks.md, "/queries refresh"): the
// JSON bytes and the server CPU of GET /queries?json over 100, 1,000 and 10,000 completed
// queries in the log (restored history records, as after a restart), for
//   - page:   what the page asks every 2 s (the first 50 rows, newest first);
//   - search: the same with a statement text search and a user filter;
//   - all:    every row in one answer (what the page fetched before it paged).
// CPU time per iteration is the server's work for one answer (the rendering runs on the
// calling thread); 'bytes' is the size of the answer.

#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "runtime/query-exec-mgr.h"
#include "service/debug-pages.h"
#include "service/query-coordinator.h"
#include "service/query-history-convert.h"

namespace qr {
namespace {

/// A coordinator whose completed-query log holds 'n' restored queries (no engine: nothing
/// runs).
struct Fixture {
  explicit Fixture(int n) : coordinator(MakeOptions(n), &exec_mgr, nullptr) {
    std::vector<std::shared_ptr<ClientRequestState>> restored;
    for (int i = 0; i < n; ++i) {
      QueryHistoryRecord r;
      r.query_id = UniqueId{0x5ca1e00000000000ull + static_cast<uint64_t>(i),
                            static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull};
      r.user = "user" + std::to_string(i % 10);
      r.source = "src" + std::to_string(i % 7);
      r.client_info = "dashboard refresh";
      r.client_tags = {"etl", "nightly"};
      r.statement = std::make_shared<const std::string>(
          "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty /* run " +
          std::to_string(i) + " */ FROM lineitem WHERE l_shipdate <= date('1998-09-02') "
          "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus");
      r.state = static_cast<uint8_t>(ClientRequestState::State::kFinished);
      r.submit_time_ms = 1767225600000 + int64_t{i} * 1000;
      r.elapsed_ms = 40 + i % 100;
      r.end_time_ms = r.submit_time_ms + r.elapsed_ms;
      r.rows_delivered = 4;
      r.rows_produced = 4;
      r.bytes_delivered = 180;
      r.cpu_time_ns = 30000000;
      restored.push_back(RestoreFromHistory(std::move(r)));
    }
    coordinator.RestoreCompleted(std::move(restored));
  }
  static QueryCoordinator::Options MakeOptions(int n) {
    QueryCoordinator::Options o;
    o.query_log_size = n;
    return o;
  }
  QueryExecMgr exec_mgr;
  QueryCoordinator coordinator;
};

void RunRefresh(benchmark::State& state, const debug_pages::QueryListParams& params) {
  Fixture fixture(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body = debug_pages::RenderQueriesJson(fixture.coordinator, 250, {}, params);
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["queries"] = static_cast<double>(state.range(0));
}

void BM_QueriesPage(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 50;
  RunRefresh(state, params);
}

void BM_QueriesSearch(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 50;
  params.user = "user3";
  params.text = "RUN 1";
  RunRefresh(state, params);
}

void BM_QueriesAll(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = static_cast<size_t>(state.range(0));
  RunRefresh(state, params);
}

BENCHMARK(BM_QueriesPage)->ArgName("queries")->Arg(100)->Arg(1000)->Arg(10000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QueriesSearch)->ArgName("queries")->Arg(100)->Arg(1000)->Arg(10000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QueriesAll)->ArgName("queries")->Arg(100)->Arg(1000)->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace qr

BENCHMARK_MAIN();
