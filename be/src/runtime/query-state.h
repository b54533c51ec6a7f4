#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/memory-budget.h"
#include "runtime/query-error.h"
#include "runtime/result-buffer.h"
#include "runtime/trino-literal.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr {

class LongQueryGate;

/// What the executor needs to know about a query.
struct QueryContext {
  /// The SQL text: one immutable buffer shared with the coordinator, never copied.
  std::shared_ptr<const std::string> statement;
  /// The SQL that runs when it is not 'statement' itself (EXECUTE runs its prepared
  /// statement's text, a session statement a constant); null: 'statement'.
  std::shared_ptr<const std::string> sql;
  /// Values bound to the placeholders of the SQL that runs, in order (EXECUTE ... USING);
  /// never written into its text.
  std::vector<SqlParameter> parameters;
  /// DESCRIBE OUTPUT: answer the result columns of the SQL instead of running it.
  bool describe_output = false;
  std::string user;
  /// The user may read every user's rows of the system tables (no authentication, or an
  /// admin); else only their own.
  bool sees_all_queries = false;
  /// 0 = no limit. Measured from the start of execution.
  int64_t exec_time_limit_ms = 0;
  /// Backpressure limits of the result buffer.
  int64_t result_buffer_max_rows = 16384;
  int64_t result_buffer_max_bytes = 1 << 20;
  /// Rows per page handed to the client.
  int64_t page_max_rows = 1024;
  int64_t page_max_bytes = 256 << 10;
  /// Bytes of encoded results this query may hold at once: the page being encoded (a single
  /// wide row included) plus its buffered pages; beyond it the query fails with
  /// EXCEEDED_LOCAL_MEMORY_LIMIT. 0: no per-query limit.
  int64_t max_memory_bytes = 0;
  /// The process-wide budget of encoded results (EXCEEDED_GLOBAL_MEMORY_LIMIT); may be null.
  MemoryBudget* memory_budget = nullptr;
};

/// Executor-side state of one query: its context, execution state and counters, its result
/// buffer and its cancellation flag. Owned by QueryExecMgr, which counts its references (beside
/// it, in type-stable memory: runtime/stable-query-registry.h): obtain one through QueryExecMgr
/// and hold it in a QueryStateHandle.
/// Thread-safety: all methods are thread-safe.
class QueryState {
 public:
  enum class ExecState { kCreated, kQueued, kRunning, kFinished, kFailed, kCancelled };
  static const char* ExecStateName(ExecState s);

  QueryState(const UniqueId& id, QueryContext ctx);
  QueryState(const QueryState&) = delete;
  QueryState& operator=(const QueryState&) = delete;

  const UniqueId& query_id() const { return id_; }
  const QueryContext& query_ctx() const { return ctx_; }
  ResultBuffer* result_buffer() { return &result_buffer_; }

  ExecState exec_state() const { return exec_state_.load(std::memory_order_acquire); }
  void set_exec_state(ExecState s) { exec_state_.store(s, std::memory_order_release); }

  /// Requests cancellation with 'reason' (the first reason wins). The running statement is
  /// interrupted (it stops before its next VM opcode); the result buffer is closed so a
  /// producer blocked on backpressure wakes up. Returns false if already cancelled.
  bool Cancel(QueryError reason);
  /// Cheap enough for the engine's progress handler (one relaxed load).
  bool is_cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  /// The connection running this query's statement, which Cancel() interrupts
  /// (sqlite3_interrupt); nullptr once the statement is finalized. Set by the executor.
  void SetInterruptTarget(sqlite3* db);
  /// Interrupts the running statement, if any, without cancelling the query: its time limit
  /// passed (DeadlineWatchdog); the runner reports EXCEEDED_TIME_LIMIT.
  void InterruptStatement();
  /// The gate this query's executor is parked in (LongQueryGate::Enter()), which Cancel()
  /// wakes; nullptr when not parked.
  void SetParkedIn(LongQueryGate* gate);
  /// The reason given to Cancel(), if any.
  std::optional<QueryError> cancel_reason() const;

  /// When execution started; the epoch when not started.
  std::chrono::steady_clock::time_point exec_start() const;
  void MarkExecStart();

  // Counters, updated by the executor, read by anyone.
  std::atomic<int64_t> rows_produced{0};
  std::atomic<int64_t> bytes_produced{0};
  /// Live while the query runs (sampled about every 64k virtual machine steps, and at each
  /// page), final once it ended.
  std::atomic<int64_t> cpu_time_ns{0};
  /// SQLite virtual machine steps executed (sqlite3_stmt_status SQLITE_STMTSTATUS_VM_STEP):
  /// the progress of a query that has no rows to show yet, such as an aggregate. Sampled
  /// like 'cpu_time_ns'.
  std::atomic<int64_t> vm_steps{0};

 private:
  const UniqueId id_;
  const QueryContext ctx_;
  std::atomic<ExecState> exec_state_{ExecState::kCreated};
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> exec_start_ns_{0};
  /// Protects 'cancel_reason_', 'interrupt_target_' and 'parked_in_'.
  mutable Mutex lock_;
  std::optional<QueryError> cancel_reason_ QR_GUARDED_BY(lock_);
  sqlite3* interrupt_target_ QR_GUARDED_BY(lock_) = nullptr;
  LongQueryGate* parked_in_ QR_GUARDED_BY(lock_) = nullptr;
  ResultBuffer result_buffer_;
};

}  // namespace qr
