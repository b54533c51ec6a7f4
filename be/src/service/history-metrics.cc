// The query history's families of GET /metrics (docs/operations.md#query-history).

#include <cstdio>
#include <string>

#include "service/metrics-format.h"
#include "service/query-history.h"

namespace qr::metrics {
namespace {

std::string FormatDouble(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

void AppendHistoryMetrics(const QueryHistory* history, const HistoryReadStats& restored,
                          std::string* out) {
  const QueryHistory::Stats s = history != nullptr ? history->GetStats() : QueryHistory::Stats{};
  Scalar("qr_history_enabled", "gauge",
         "1 if completed queries are recorded (--query_history_dir).", history != nullptr ? 1 : 0,
         out);
  Scalar("qr_history_records_total", "counter", "Records written to the query history.",
         s.records, out);
  Scalar("qr_history_written_bytes_total", "counter", "Bytes written to the query history.",
         s.bytes, out);
  Scalar("qr_history_batches_total", "counter",
         "Batches the history writer wrote (one write(2) each).", s.batches, out);
  Scalar("qr_history_dropped_records_total", "counter",
         "Records of completed queries not written: the writer's queue was full "
         "(--query_history_queue_size) or the write failed.",
         s.dropped, out);
  Scalar("qr_history_write_errors_total", "counter",
         "Failed writes, syncs or segment creations of the query history.", s.write_errors, out);
  Scalar("qr_history_cut_records_total", "counter",
         "Records written with their statement or other texts cut to fit a history record "
         "(a statement over 32 MiB: --max_statement_bytes above it).",
         s.cut_records, out);
  Scalar("qr_history_queue_length", "gauge", "Records waiting for the history writer.",
         s.queue_length, out);
  Scalar("qr_history_segments_created_total", "counter", "Query history segment files started.",
         s.segments_created, out);
  Scalar("qr_history_segments_deleted_total", "counter",
         "Query history segment files deleted by retention (and empty ones).", s.segments_deleted, out);
  const char* name = "qr_history_sync_seconds";
  Family(name, "histogram", "Latency of the history writer's fdatasync(2) calls.", out);
  for (size_t i = 0; i < QueryHistory::kSyncBucketsSeconds.size(); ++i) {
    Sample("qr_history_sync_seconds_bucket",
           "{le=\"" + FormatDouble(QueryHistory::kSyncBucketsSeconds[i]) + "\"}",
           s.sync_buckets[i], out);
  }
  Sample("qr_history_sync_seconds_bucket", "{le=\"+Inf\"}", s.sync_buckets.back(), out);
  Sample("qr_history_sync_seconds_sum", "", FormatDouble(s.sync_seconds_sum), out);
  Sample("qr_history_sync_seconds_count", "", s.sync_buckets.back(), out);
  Scalar("qr_history_restored_records", "gauge",
         "Completed queries read back into the query log from the history at start-up.",
         restored.records, out);
  Scalar("qr_history_indexed_records", "gauge",
         "Records of the retained history in its in-memory index (listed by /queries and "
         "system.runtime.completed_queries).",
         history != nullptr ? static_cast<int64_t>(history->index().size()) : 0, out);
  Scalar("qr_history_index_bytes", "gauge", "Memory the query history's index takes.",
         history != nullptr ? static_cast<int64_t>(history->index().MemoryBytes()) : 0, out);
  Scalar("qr_history_restored_torn_tails", "gauge",
         "Segments whose last record was cut short (a crash during a write), found at start-up.",
         restored.torn_tails, out);
  Scalar("qr_history_restored_corrupt_segments", "gauge",
         "Segments with a record failing its checksum, found at start-up (the rest of each is "
         "skipped).",
         restored.corrupt_segments, out);
  Scalar("qr_history_restored_unreadable_segments", "gauge",
         "Segments that could not be read at all at start-up (an I/O error, no permission): "
         "their records are not listed.",
         restored.unreadable_segments, out);
}

}  // namespace qr::metrics
