#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

/// The coordinator's own state as SQL tables on every executor connection: the queries of the
/// registry and the completed-query log (Trino's system.runtime.queries) and this node
/// (system.runtime.nodes). They are SQLite eponymous virtual tables: SQLite itself evaluates
/// WHERE, ORDER BY, joins and aggregates over them. Each scan asks the SystemTablesSource for
/// a fresh snapshot, taken without holding any lock while SQLite reads it.

namespace qr {

/// Who runs the statement that reads a system table.
struct SqlViewer {
  std::string user;
  /// Sees every user's queries (no authentication, or an admin); else only 'user''s.
  bool sees_all = false;
};

/// One row of system.runtime.queries. Times are wall-clock milliseconds since the epoch, -1
/// for NULL (not yet started, not ended).
struct RuntimeQueryRow {
  std::string query_id;
  /// QUEUED, RUNNING, FINISHED or FAILED (a canceled query is FAILED with USER_CANCELED).
  std::string state;
  std::string user;
  std::string source;
  /// The statement, shared with its query (never copied: a statement may be 1 MiB and a
  /// scan lists them all); null: none.
  std::shared_ptr<const std::string> query;
  int64_t queued_time_ms = 0;
  int64_t created_ms = -1;
  int64_t started_ms = -1;
  int64_t last_heartbeat_ms = -1;
  int64_t end_ms = -1;
  /// Empty when the query did not fail.
  std::string error_type;
  std::string error_code;
  std::string error_message;
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t cpu_time_ms = 0;
  /// SQLite VM steps so far: progress for a query with no rows yet.
  int64_t vm_steps = 0;
  std::string client_info;
  /// A JSON array of strings.
  std::string client_tags;
};

/// One row of system.runtime.nodes.
struct RuntimeNodeRow {
  std::string node_id;
  std::string http_uri;
  std::string node_version;
  bool coordinator = true;
  std::string state;
};

/// What the system tables show; implemented by the service layer.
/// Thread-safety: called concurrently from every executor thread.
class SystemTablesSource {
 public:
  virtual ~SystemTablesSource() = default;
  /// The queries 'viewer' may see, in-flight and completed, each exactly once.
  virtual std::vector<RuntimeQueryRow> Queries(const SqlViewer& viewer) = 0;
  /// system.runtime.completed_queries, one batch at a time: the completed queries 'viewer'
  /// may see from '*position' (0 to start) on, at most 'max' into 'batch'; '*position' is
  /// then where the next batch starts. False (and nothing added) at the end. The default
  /// has none.
  virtual bool CompletedQueries(const SqlViewer& viewer, size_t max, uint64_t* position,
                                std::vector<RuntimeQueryRow>* batch) {
    (void)viewer, (void)max, (void)position, (void)batch;
    return false;
  }
  virtual std::vector<RuntimeNodeRow> Nodes() = 0;
};

/// The names the tables are registered under on each connection; statements name them
/// system.runtime.queries and system.runtime.nodes (views in trino-metadata.cc).
inline constexpr const char* kRuntimeQueriesTable = "qr_system_runtime_queries";
inline constexpr const char* kRuntimeNodesTable = "qr_system_runtime_nodes";
inline constexpr const char* kRuntimeCompletedQueriesTable = "qr_system_runtime_completed_queries";

/// The system tables of one connection.
/// Thread-safety: like its connection, used by one executor thread at a time.
class SystemTables {
 public:
  /// Registers the tables on 'db', fed by 'source' (which must outlive 'db'); without a
  /// source (set_source()) they are empty.
  static Status Register(sqlite3* db, SystemTablesSource* source,
                         std::unique_ptr<SystemTables>* out);
  /// Before the connection runs any statement.
  void set_source(SystemTablesSource* source) { source_ = source; }
  ~SystemTables();
  SystemTables(const SystemTables&) = delete;
  SystemTables& operator=(const SystemTables&) = delete;

  /// Who the statement being run acts for; null (between statements): scans see no queries.
  /// '*viewer' must stay valid until reset.
  void set_viewer(const SqlViewer* viewer) {
    viewer_ = viewer;
    queries_.reset();
  }
  const SqlViewer* viewer() const { return viewer_; }
  SystemTablesSource* source() const { return source_; }

  /// system.runtime.queries as the statement being run sees it: asked of the source at the
  /// statement's first scan and kept until the viewer changes. SQLite builds no index on a
  /// virtual table, so a join scans its inner table again for each outer row: one snapshot
  /// per scan was a copy of every row (and, in a cluster, a fan-out to every member) per
  /// outer row. QR_REQUIRES: a viewer and a source.
  const std::vector<RuntimeQueryRow>& QueriesSnapshot();

 private:
  explicit SystemTables(SystemTablesSource* source) : source_(source) {}
  SystemTablesSource* source_;
  const SqlViewer* viewer_ = nullptr;
  std::optional<std::vector<RuntimeQueryRow>> queries_;
};

/// How FormatTimestampMillis writes a time.
enum class TimestampStyle {
  kSql,  ///< "2026-11-26 07:05:23.123": Trino's timestamp(3) text form
  kIso,  ///< "2026-11-26T07:05:23.123Z": ISO 8601, for JSON
};

/// Milliseconds since the epoch as UTC text (times before 1970 round down).
std::string FormatTimestampMillis(int64_t epoch_ms, TimestampStyle style = TimestampStyle::kSql);

}  // namespace qr
