#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/query-exec-mgr.h"
#include "util/mutex.h"
#include "util/status.h"

namespace qr {

/// Runs SQL on an embedded SQLite database, read-only, on a fixed pool of executor threads.
///
/// Each executor thread owns one read-only connection (SQLITE_OPEN_READONLY, an authorizer that
/// refuses writes, ATTACH/DETACH, PRAGMA writes and extension loading). Execute() queues a
/// query; a free executor prepares it (exactly one statement, else an error), publishes its
/// columns, steps it, encodes rows as JSON into pages of at most 'page_max_rows' rows /
/// 'page_max_bytes' bytes, and Put()s them into the query's ResultBuffer (blocking on
/// backpressure). A progress handler polls the query's cancel flag and its time limit every
/// few thousand VM steps, so cancellation and time limits stop even a runaway recursive CTE
/// promptly. The query ends with ResultBuffer::Finish() and exec_state kFinished / kFailed /
/// kCancelled.
/// Thread-safety: all methods are thread-safe.
class SqliteEngine {
 public:
  struct Options {
    /// The SQLite database file to serve, opened read-only.
    std::string database_path;
    /// Executor threads (and connections).
    int num_threads = 2;
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
  const Options& options() const { return options_; }

 private:
  explicit SqliteEngine(Options options);
  struct Impl;
  Options options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qr
