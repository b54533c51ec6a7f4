// Writes a query history of N synthetic completed queries for the /queries scale test
// (queries-scale.test.mjs):
//   history-fill DIR N
// Query i: user "user<i % 10>", source "src<i % 7>", submitted i seconds after
// 2026-01-01T00:00:00Z and 5 + i % 1000 ms long, 1 + i % 50 rows; every 100th FAILED
// (TABLE_NOT_FOUND on "missing_<i>"), every 250th CANCELED; the statement names i
// ("SELECT <i> AS n, 'batch-<i>' AS tag FROM nation").

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "service/client-request-state.h"
#include "service/query-history.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: history-fill DIR N\n");
    return 2;
  }
  const int64_t n = std::atoll(argv[2]);
  qr::QueryHistory::Options options;
  options.dir = argv[1];
  options.sync = qr::HistorySyncMode::kNone;
  options.queue_capacity = static_cast<size_t>(n) + 1;
  std::unique_ptr<qr::QueryHistory> history;
  qr::Status s = qr::QueryHistory::Open(options, &history);
  if (!s.ok()) {
    fprintf(stderr, "history-fill: %s\n", s.message().c_str());
    return 1;
  }
  using State = qr::ClientRequestState::State;
  const int64_t base_ms = 1767225600000;  // 2026-01-01T00:00:00Z
  for (int64_t i = 0; i < n; ++i) {
    qr::QueryHistoryRecord r;
    r.query_id = qr::UniqueId{0x5ca1e00000000000ull + static_cast<uint64_t>(i),
                              static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull};
    r.user = "user" + std::to_string(i % 10);
    r.source = "src" + std::to_string(i % 7);
    r.client_info = "scale test";
    r.client_tags = {"scale"};
    r.submit_time_ms = base_ms + i * 1000;
    r.elapsed_ms = 5 + i % 1000;
    r.end_time_ms = r.submit_time_ms + r.elapsed_ms;
    r.queued_ms = i % 3;
    r.state = static_cast<uint8_t>(State::kFinished);
    std::string sql = "SELECT " + std::to_string(i) + " AS n, 'batch-" + std::to_string(i) +
                      "' AS tag FROM nation";
    if (i % 100 == 99) {
      sql = "SELECT * FROM missing_" + std::to_string(i);
      r.state = static_cast<uint8_t>(State::kFailed);
      r.error = qr::QueryError::TableNotFound("Table 'missing_" + std::to_string(i) +
                                              "' does not exist");
    } else if (i % 250 == 249) {
      r.state = static_cast<uint8_t>(State::kCanceled);
      r.error = qr::QueryError::UserCanceled();
    } else {
      r.rows_delivered = 1 + i % 50;
      r.rows_produced = r.rows_delivered;
      r.bytes_delivered = r.rows_delivered * 24;
      r.cpu_time_ns = (1 + i % 20) * 1000000;
    }
    r.statement = std::make_shared<const std::string>(std::move(sql));
    if (!history->Append(std::move(r))) {
      fprintf(stderr, "history-fill: the queue refused record %lld\n",
              static_cast<long long>(i));
      return 1;
    }
  }
  history->Flush();
  printf("history-fill: %lld records in %s\n", static_cast<long long>(n), argv[1]);
  return 0;
}
