#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/long-query-demoter.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/spill-accounting.h"
#include "runtime/sqlite-connection.h"
#include "runtime/system-tables.h"
#include "util/mutex.h"
#include "util/status.h"

namespace qr {

/// Runs SQL on an embedded SQLite database, read-only, on a fixed pool of executor threads.
///
/// Each executor thread owns one read-only connection (SQLITE_OPEN_READONLY, an authorizer that
/// refuses writes, ATTACH/DETACH, PRAGMA writes and extension loading). Execute() queues a
/// query; a free executor prepares it (exactly one statement, else an error), publishes its
/// columns, steps it, encodes rows as JSON into pages of at most 'page_max_rows' rows /
/// 'page_max_bytes' bytes, and Put()s them into the query's ResultBuffer (spooling to disk
/// what does not fit in memory, see Options::spool_dir; blocking on backpressure without a
/// spool or once its quota is reached). Each row is checked against the query's and the
/// process's memory budgets before it is encoded. A cancel interrupts the statement
/// (sqlite3_interrupt), and so does a DeadlineWatchdog at the time limit; the project's
/// SQLite checks that before every VM opcode (third_party/sqlite/), so a statement stops
/// within one opcode wherever it is. A progress handler also polls the query's cancel flag and
/// its time limit every 1000 VM steps (and yields for long queries); no built-in function is
/// superlinear in its input (sqlite-functions.h) and no value exceeds
/// Options::max_value_bytes, so no single call runs long; large JSON calls check before they
/// run (sqlite-guarded-functions.h), since the calls of one row's expressions run back to back
/// (docs/architecture.md, "CPU").
/// The query ends with ResultBuffer::Finish() and exec_state kFinished / kFailed / kCancelled.
/// Thread-safety: all methods are thread-safe.
class SqliteEngine {
 public:
  struct Options {
    /// The SQLite database file to serve, opened read-only.
    std::string database_path;
    /// Executor threads (and connections).
    int num_threads = 2;
    /// SQLite's temporary files (sorts, GROUP BY, DISTINCT) of all queries are charged to
    /// this budget, and each query's to 'query_spill_limit_bytes' (EXCEEDED_SPILL_LIMIT);
    /// null: not accounted here (InstallSpillAccountingVfs() still charges a global budget).
    SpillBudget* spill_budget = nullptr;
    int64_t query_spill_limit_bytes = int64_t{1} << 30;
    /// With 'spill_budget': results beyond a query's in-memory buffer are spooled to a file in
    /// this directory (charged to the same quotas), so an executor never waits for a client
    /// until a quota is reached. Empty: no spooling (Put() blocks while the buffer is full).
    std::string spool_dir{};
    /// The executor of a query that runs longer than 'long_query.after_ms' gets a lower CPU
    /// priority until the query ends (LongQueryDemoter), so short queries come first.
    LongQueryDemoter::Options long_query{};
    /// At most this many long queries (running for over 'long_query.after_ms') of one user
    /// run at once; a further one waits for a turn without using the CPU (LongQueryGate).
    /// 0: no limit.
    int max_long_queries_per_user = 0;
    /// Feeds the system tables (system.runtime.queries, ...) of every connection; null: the
    /// tables do not exist. Must outlive the engine.
    SystemTablesSource* system_tables = nullptr;
    /// The catalog the database is served as (trino-metadata.h, --catalog_name).
    std::string catalog_name = "sqlite";
    /// The most bytes one value or row may hold (--max_value_mb; SqliteConnection::Open()).
    int64_t max_value_bytes = SqliteConnection::kDefaultMaxValueBytes;
  };

  /// Opens one connection per thread and starts the threads. A missing, unreadable or
  /// non-SQLite file is an error that names the path and the reason.
  static Status Create(const Options& options, std::unique_ptr<SqliteEngine>* out);
  /// Cancels queued and running queries (as USER_CANCELED unless already cancelled) and joins
  /// the threads.
  ~SqliteEngine();

  /// Queues 'query' for execution. The engine keeps the handle until the query has finished.
  void Execute(QueryStateHandle query);

  /// Queries waiting for an executor thread, and queries being executed.
  int64_t num_queued() const;
  int64_t num_running() const;
  /// Queries whose executor got a lower CPU priority; executors replaced because they could
  /// not get their priority back (see LongQueryDemoter).
  int64_t num_demoted() const;
  int64_t num_executors_replaced() const;
  /// Statements interrupted at their time limit by the engine's DeadlineWatchdog.
  int64_t num_deadline_interrupts() const;
  /// Long queries that waited for their user's turn so far (LongQueryGate); waiting now.
  int64_t num_long_query_parks() const;
  int64_t num_long_queries_parked() const;
  const Options& options() const { return options_; }

 private:
  explicit SqliteEngine(Options options);
  struct Impl;
  Options options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qr
