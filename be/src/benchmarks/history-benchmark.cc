// The query history writer (docs/benchmarks.md, "Query history"): records/s and MB/s it
// sustains per sync mode, with the batch sizes group commit forms, and the cost of Append()
// on the query's thread. BENCH_HISTORY_DIR picks the file system (default: /tmp). With
// --fill_dir and --fill_mb it writes a large history instead, segments written directly with
// the history's encoder (for a restart's timing: scripts/bench-history-restart.sh).

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <queue>
#include <random>

#include <filesystem>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "service/client-request-state.h"
#include "service/query-history-index.h"
#include "service/query-history-record.h"
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

/// A record for a filled history: query 'i', submitted at 'submit_ns', running 'elapsed_ms'.
/// Ten users, three sources, a few statement shapes naming 'i' (170-260 bytes framed); every
/// 100th FAILED with an error, every 250th CANCELED.
QueryHistoryRecord FillRecord(uint64_t i, int64_t submit_ns, int64_t elapsed_ms) {
  static constexpr const char* kSources[] = {"trino-cli", "jdbc", "dashboard"};
  static constexpr const char* kShapes[] = {
      "SELECT l_returnflag, sum(l_quantity) FROM lineitem WHERE l_orderkey % 1000 = ",
      "SELECT count(*) FROM orders WHERE o_custkey = ",
      "SELECT n_name, r_name FROM nation JOIN region ON n_regionkey = r_regionkey LIMIT ",
      "SELECT c_name, c_acctbal FROM customer ORDER BY c_acctbal DESC LIMIT 10 OFFSET "};
  QueryHistoryRecord r;
  r.query_id = UniqueId{0x5ca1e00000000000ull ^ (i * 0x9e3779b97f4a7c15ull), i};
  r.user = "user" + std::to_string(i % 10);
  r.source = kSources[i % 3];
  r.client_info = "restart benchmark";
  r.client_tags = {"bench"};
  r.statement = std::make_shared<const std::string>(kShapes[i % 4] + std::to_string(i));
  r.submit_time_ms = submit_ns / 1000000;
  r.submit_time_extra_ns = static_cast<int32_t>(submit_ns % 1000000);
  r.queued_ms = 0;
  r.exec_start_ms = r.submit_time_ms;
  r.elapsed_ms = elapsed_ms;
  r.end_time_ms = r.submit_time_ms + elapsed_ms;
  r.first_row_ms = r.end_time_ms;
  r.state = static_cast<uint8_t>(ClientRequestState::State::kFinished);
  if (i % 100 == 99) {
    r.state = static_cast<uint8_t>(ClientRequestState::State::kFailed);
    r.error = QueryError::TableNotFound("Table 'missing_" + std::to_string(i) +
                                        "' does not exist");
  } else if (i % 250 == 249) {
    r.state = static_cast<uint8_t>(ClientRequestState::State::kCanceled);
    r.error = QueryError::UserCanceled();
    r.canceled_by = r.user;
    r.canceled_time_ms = r.end_time_ms;
  } else {
    r.rows_delivered = static_cast<int64_t>(1 + i % 50);
    r.rows_produced = r.rows_delivered;
    r.bytes_delivered = r.rows_delivered * 24;
    r.cpu_time_ns = static_cast<int64_t>(1 + i % 20) * 1000000;
  }
  return r;
}

/// Writes 'buffer' to 'fd' whole; false on an error.
bool WriteAll(int fd, const std::string& buffer) {
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = write(fd, buffer.data() + done, buffer.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// --fill_dir=DIR --fill_mb=N [--fill_segment_mb=64]: writes N MiB of records into a new
/// history in DIR and exits (a large history for a restart's timing). The segments are
/// written directly, as the writer would with big batches: EncodeHistoryRecord()'s framing
/// and checksums, 1 MiB writes, a new segment ("history-<sequence>.log") once one reaches
/// the segment size. Queries are submitted ~2 ms apart (2026-01-01 on) and written in
/// completion order: most run 1-200 ms, every 50th 1-60 s, so the records are out of submit
/// order as a real history's are.
int Fill(const std::string& dir, int64_t mb, int64_t segment_mb) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with("history-")) {
      fprintf(stderr, "%s already holds a history: fill an empty directory\n", dir.c_str());
      return 1;
    }
  }
  if (ec) {
    fprintf(stderr, "cannot use %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  const int64_t total_bytes = mb << 20;
  const int64_t segment_bytes = segment_mb << 20;
  std::mt19937_64 rng(18);
  // Running queries by end time, the earliest on top.
  using Pending = std::pair<int64_t, QueryHistoryRecord>;
  auto later = [](const Pending& a, const Pending& b) { return a.first > b.first; };
  std::priority_queue<Pending, std::vector<Pending>, decltype(later)> running(later);
  uint64_t sequence = 0;
  int fd = -1;
  int64_t segment_size = 0, written = 0, records = 0;
  std::string buffer;
  auto flush = [&]() -> bool {
    if (fd < 0 || segment_size >= segment_bytes) {
      if (fd >= 0) close(fd);
      const std::string path = (fs::path(dir) / HistorySegmentName(++sequence)).string();
      fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
      if (fd < 0) {
        fprintf(stderr, "cannot create %s: %s\n", path.c_str(), strerror(errno));
        return false;
      }
      segment_size = 0;
    }
    if (!WriteAll(fd, buffer)) {
      fprintf(stderr, "write failed: %s\n", strerror(errno));
      return false;
    }
    segment_size += static_cast<int64_t>(buffer.size());
    written += static_cast<int64_t>(buffer.size());
    buffer.clear();
    return true;
  };
  int64_t now_ns = int64_t{1767225600000} * 1000000;
  for (uint64_t i = 0; written + static_cast<int64_t>(buffer.size()) < total_bytes; ++i) {
    now_ns += 1000000 + static_cast<int64_t>(rng() % 2000000);
    const int64_t elapsed_ms = i % 50 == 7 ? static_cast<int64_t>(1000 + rng() % 59000)
                                           : static_cast<int64_t>(1 + rng() % 200);
    running.emplace(now_ns + elapsed_ms * 1000000, FillRecord(i, now_ns, elapsed_ms));
    while (!running.empty() && running.top().first <= now_ns) {
      EncodeHistoryRecord(running.top().second, &buffer);
      running.pop();
      ++records;
    }
    if (buffer.size() >= (1 << 20) && !flush()) return 1;
  }
  if (!buffer.empty() && !flush()) return 1;
  if (fd >= 0) close(fd);
  // The queries still running at the end are never written: the history ends at "now".
  printf("%lld records, %lld bytes, %llu segments in %s\n", static_cast<long long>(records),
         static_cast<long long>(written), static_cast<unsigned long long>(sequence),
         dir.c_str());
  return 0;
}

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  std::string fill_dir;
  int64_t fill_mb = 0;
  int64_t fill_segment_mb = 64;  // --query_history_segment_mb's default
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--fill_dir=")) fill_dir = arg.substr(11);
    if (arg.starts_with("--fill_mb=")) fill_mb = std::stoll(std::string(arg.substr(10)));
    if (arg.starts_with("--fill_segment_mb=")) {
      fill_segment_mb = std::max<int64_t>(1, std::stoll(std::string(arg.substr(18))));
    }
  }
  if (!fill_dir.empty()) return qr::Fill(fill_dir, fill_mb, fill_segment_mb);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
