// The query history writer (docs/benchmarks.md, "Query history"): records/s and MB/s it
// sustains per sync mode, with the batch sizes group commit forms, and the cost of Append()
// on the query's thread. BENCH_HISTORY_DIR picks the file system (default: /tmp). With
// --fill_dir and --fill_mb it writes a large history instead (for a restart's timing).

#include <stdlib.h>

#include <cstdio>

#include <filesystem>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "service/query-history.h"

namespace qr {
namespace {

namespace fs = std::filesystem;

QueryHistoryRecord TypicalRecord(uint64_t n) {
  QueryHistoryRecord r;
  r.query_id = UniqueId{n * 0x9e3779b97f4a7c15ull, n << 32};
  r.user = "analyst";
  r.source = "trino-cli";
  r.client_info = "dashboard refresh";
  r.client_tags = {"etl", "nightly"};
  static const auto* statement = new std::shared_ptr<const std::string>(
      std::make_shared<const std::string>(
          "SELECT l_returnflag, sum(l_quantity) FROM lineitem WHERE l_shipdate <= "
          "date('1998-09-01') GROUP BY l_returnflag ORDER BY l_returnflag"));
  r.statement = *statement;
  r.state = 2;
  r.submit_time_ms = 1700000000000;
  r.end_time_ms = 1700000000042;
  r.elapsed_ms = 42;
  r.rows_delivered = 4;
  r.bytes_delivered = 180;
  r.rows_produced = 4;
  r.cpu_time_ns = 40000000;
  return r;
}

std::string MakeDir() {
  const char* base = getenv("BENCH_HISTORY_DIR");
  std::string tmpl = (fs::path(base != nullptr ? base : fs::temp_directory_path().c_str()) /
                      "qr-history-bench.XXXXXX")
                         .string();
  if (mkdtemp(tmpl.data()) == nullptr) abort();
  return tmpl;
}

std::unique_ptr<QueryHistory> OpenHistory(const std::string& dir, HistorySyncMode sync,
                                          size_t queue_capacity = 1 << 20) {
  QueryHistory::Options o;
  o.dir = dir;
  o.sync = sync;
  o.queue_capacity = queue_capacity;
  o.max_total_bytes = 0;
  std::unique_ptr<QueryHistory> history;
  if (!QueryHistory::Open(o, &history).ok()) abort();
  return history;
}

void Report(benchmark::State& state, const QueryHistory& history) {
  QueryHistory::Stats s = history.GetStats();
  state.counters["records_per_batch"] =
      static_cast<double>(s.records) / static_cast<double>(std::max<int64_t>(1, s.batches));
  state.counters["syncs_per_1k_records"] =
      1000.0 * static_cast<double>(s.syncs) / static_cast<double>(std::max<int64_t>(1, s.records));
  state.counters["dropped"] = static_cast<double>(s.dropped);
  state.SetBytesProcessed(s.bytes);
}

/// The writer's sustained rate: each iteration appends a burst of 'kBurst' records (as fast
/// as queries could hand them over) and waits until the writer has written (and, per the
/// mode, synced) them all. Range: the sync mode (0 batch, 1 interval, 2 none). The queue
/// holds two bursts, so in modes interval and none a full burst (half the queue) wakes the
/// writer instead of its timer.
void BM_HistoryWriterThroughput(benchmark::State& state) {
  constexpr int kBurst = 10000;
  const std::string dir = MakeDir();
  auto history = OpenHistory(dir, static_cast<HistorySyncMode>(state.range(0)), 2 * kBurst);
  uint64_t n = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBurst; ++i) history->Append(TypicalRecord(++n));
    history->Flush();
  }
  Report(state, *history);
  state.SetItemsProcessed(state.iterations() * kBurst);
  history.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}
BENCHMARK(BM_HistoryWriterThroughput)->ArgName("sync")->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

/// What a query pays: one Append() (the record built from the completed request) while the
/// writer runs, from 1 and 4 threads. Sync mode none, so the disk does not fill the queue.
void BM_HistoryAppend(benchmark::State& state) {
  static std::unique_ptr<QueryHistory> history;
  static std::string dir;
  if (state.thread_index() == 0) {
    dir = MakeDir();
    history = OpenHistory(dir, HistorySyncMode::kNone);
  }
  uint64_t n = static_cast<uint64_t>(state.thread_index()) << 40;
  for (auto _ : state) benchmark::DoNotOptimize(history->Append(TypicalRecord(++n)));
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    history->Flush();
    Report(state, *history);
    history.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}
BENCHMARK(BM_HistoryAppend)->Threads(1)->Threads(4)->UseRealTime();

/// --fill_dir=DIR --fill_mb=N: writes N MiB of typical records into the history in DIR (sync
/// none, 64 MiB segments) and exits: a large history for measuring a daemon's restart.
int Fill(const std::string& dir, int64_t mb) {
  QueryHistory::Options o;
  o.dir = dir;
  o.sync = HistorySyncMode::kNone;
  o.max_total_bytes = 0;
  o.max_segments = 0;
  o.queue_capacity = 1 << 20;
  std::unique_ptr<QueryHistory> history;
  Status s = QueryHistory::Open(o, &history);
  if (!s.ok()) {
    fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  uint64_t n = 0;
  while (history->GetStats().bytes < (mb << 20)) {
    for (int i = 0; i < 10000; ++i) history->Append(TypicalRecord(++n));
    history->Flush();
  }
  printf("%lld records, %lld bytes in %s\n", static_cast<long long>(history->GetStats().records),
         static_cast<long long>(history->GetStats().bytes), dir.c_str());
  return 0;
}

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  std::string fill_dir;
  int64_t fill_mb = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--fill_dir=")) fill_dir = arg.substr(11);
    if (arg.starts_with("--fill_mb=")) fill_mb = std::stoll(std::string(arg.substr(10)));
  }
  if (!fill_dir.empty()) return qr::Fill(fill_dir, fill_mb);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
