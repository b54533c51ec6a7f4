// The cost of one refresh of the /queries page (docs/benchmarks.md, "/queries refresh"): the
// JSON bytes and the server CPU of GET /queries?json over 100, 1,000 and 10,000 completed
// queries in the log (restored history records, as after a restart), for
//   - page:   what the page asks every 2 s (the first 50 rows, newest first);
//   - search: the same with a statement text search and a user filter;
//   - all:    every row in one answer (what the page fetched before it paged).
// CPU time per iteration is the server's work for one answer (the rendering runs on the
// calling thread); 'bytes' is the size of the answer.
// The History* benchmarks put 10,000, 100,000 and 1,000,000 records in an on-disk query
// history (a log of 100) and time one answer's wall clock (its index work, its preads and the
// rendering) for a page of 100 that the history alone holds (oldest first), the default page
// (newest first: the log's 100, then the history's), a page of a one-hour time range in the
// middle, the oldest page for one user, and a text search reading at most 1,000 records
// (--queries_max_limit's default). The segments
// are in the page cache (just written): a cold read adds the disk's latency per range.

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "runtime/query-exec-mgr.h"
#include "service/debug-pages.h"
#include "service/query-coordinator.h"
#include "service/query-history-convert.h"
#include "service/query-history.h"

namespace qr {
namespace {

QueryHistoryRecord MakeRecord(int i) {
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
  r.exec_start_ms = r.submit_time_ms + 1;
  r.first_row_ms = r.end_time_ms - 1;
  return r;
}

/// 'n' records in an on-disk history (in a temporary directory), the newest 100 of them
/// also in the coordinator's log, as after a restart.
struct HistoryFixture {
  explicit HistoryFixture(int n) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-queries-bench.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) abort();
    dir = tmpl;
    QueryHistory::Options o;
    o.dir = dir;
    o.sync = HistorySyncMode::kNone;
    // Written in bursts of 10,000: a half-full queue wakes the writer at once.
    o.queue_capacity = 20000;
    if (!QueryHistory::Open(o, &history).ok()) abort();
    for (int i = 0; i < n; ++i) {
      history->Append(MakeRecord(i));
      if (i % 10000 == 9999) history->Flush();
    }
    history->Flush();
    QueryCoordinator::Options co;
    co.query_log_size = 100;
    co.history = history.get();
    coordinator = std::make_unique<QueryCoordinator>(co, &exec_mgr, nullptr);
    std::vector<ClientRequestStatePtr> restored;
    for (int i = std::max(0, n - 100); i < n; ++i) {
      restored.push_back(RestoreFromHistory(MakeRecord(i)));
    }
    coordinator->RestoreCompleted(std::move(restored));
  }
  ~HistoryFixture() {
    coordinator.reset();
    history.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string dir;
  std::unique_ptr<QueryHistory> history;
  QueryExecMgr exec_mgr;
  std::unique_ptr<QueryCoordinator> coordinator;
};

void RunHistoryPage(benchmark::State& state, const debug_pages::QueryListParams& params) {
  HistoryFixture fixture(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body = debug_pages::RenderQueriesJson(*fixture.coordinator, 250, {}, params);
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["records"] = static_cast<double>(state.range(0));
  state.counters["index_bytes"] = static_cast<double>(fixture.history->index().MemoryBytes());
}

void BM_HistoryPage(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 100;
  params.ascending = true;  // the oldest: in the history only
  RunHistoryPage(state, params);
}

void BM_HistoryNewestPage(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 100;  // newest first, the page's default
  RunHistoryPage(state, params);
}

void BM_HistoryRangePage(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 100;
  // One hour (3,600 records, one a second) from the middle of the history, newest first.
  const int64_t middle = MakeRecord(static_cast<int>(state.range(0) / 2)).submit_time_ms;
  params.since_ms = middle;
  params.until_ms = middle + 3600 * 1000;
  RunHistoryPage(state, params);
}

void BM_HistoryUserPage(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 100;
  params.ascending = true;
  params.user = "user3";
  RunHistoryPage(state, params);
}

void BM_HistorySearch(benchmark::State& state) {
  debug_pages::QueryListParams params;
  params.limit = 100;
  params.ascending = true;
  params.text = "run 9999 */";  // rare: the scan reads its whole budget
  params.max_scan = 1000;
  RunHistoryPage(state, params);
}

/// A coordinator whose completed-query log holds 'n' restored queries (no engine: nothing
/// runs).
struct Fixture {
  explicit Fixture(int n) : coordinator(MakeOptions(n), &exec_mgr, nullptr) {
    std::vector<ClientRequestStatePtr> restored;
    for (int i = 0; i < n; ++i) restored.push_back(RestoreFromHistory(MakeRecord(i)));
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
BENCHMARK(BM_HistoryPage)->ArgName("records")->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HistoryNewestPage)->ArgName("records")->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HistoryRangePage)->ArgName("records")->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HistoryUserPage)->ArgName("records")->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HistorySearch)->ArgName("records")->Arg(10000)->Arg(100000)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace qr

BENCHMARK_MAIN();
