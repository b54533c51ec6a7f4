#include "runtime/query-runner.h"

#include <sched.h>
#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "runtime/deadline-watchdog.h"
#include "runtime/describe-output.h"
#include "runtime/long-query-gate.h"
#include "runtime/memory-budget.h"
#include "runtime/row-encoder.h"
#include "runtime/sqlite-connection.h"
#include "runtime/step-checkpoint.h"
#include "runtime/trino-literal.h"

namespace qr {

namespace {

int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// A duration the way Trino prints one in its messages: "200.00ms", "5.00s", "2.50m".
std::string FormatDuration(int64_t ms) {
  char buf[48];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%.2fms", static_cast<double>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof(buf), "%.2fs", ms / 1e3);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof(buf), "%.2fm", ms / 6e4);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2fh", ms / 3.6e6);
  }
  return buf;
}

struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};

/// Executes one query on one connection, from prepare to ResultBuffer::Finish().
/// Thread-safety: used by one executor thread; only its progress check reads shared state.
class QueryRunner {
 public:
  QueryRunner(SqliteConnection* conn, QueryState* query, const SqliteEngine::Options& options,
              DeadlineWatchdog* deadlines, LongQueryGate* gate)
      : conn_(conn), query_(query), ctx_(query->query_ctx()), options_(options),
        deadlines_(deadlines), gate_(gate) {}
  ~QueryRunner() { ReleaseReservation(); }

  /// Runs the query to its end; afterwards its exec_state is final and its buffer finished.
  void Run();

 private:
  enum class End { kSucceeded, kFailed, kInterrupted, kRefused };

  static int OnProgress(void* self);
  /// StepCheckpoint's check: MustStop() of 'self'.
  static bool InStep(void* self, bool may_yield);
  /// What the progress handler checks (and does) between VM instructions, and our functions
  /// and SQLite's allocations within one: true on a cancel or past the deadline; if
  /// 'may_yield', yields the CPU of a long query every LongQueryDemoter::Options::yield_us.
  bool MustStop(bool may_yield = true);
  /// Publishes the CPU time and VM steps so far (QueryState::cpu_time_ns, vm_steps).
  void SampleCounters();
  End Execute();
  /// Steps the first page into copies, decides the column types, publishes the columns and
  /// encodes the copies. '*rc' is the last step's result (SQLITE_ROW if more may follow).
  bool FirstPage(int* rc, End* end);
  void PublishColumns();
  enum class Append { kOk, kPageFull, kOverBudget };
  /// Appends one row to the page, within the memory budgets (else kOverBudget, 'error_' set).
  template <typename Values>
  Append AppendRow(const Values& values);
  /// Makes the query's reservation cover 'needed' bytes of page being encoded, checking the
  /// per-query limit (with the buffered pages) and the process-wide budget; false with
  /// 'error_' set when either would be exceeded.
  bool Reserve(int64_t needed);
  /// EncodedSizeBound() of a whole row, with its brackets and commas.
  template <typename Values>
  int64_t RowBound(const Values& values) const {
    int64_t bound = 2 + static_cast<int64_t>(kinds_.size());
    for (size_t i = 0; i < kinds_.size(); ++i) {
      bound += EncodedSizeBound(values, static_cast<int>(i), kinds_[i].kind);
    }
    return bound;
  }
  /// Gives back what the page under construction holds of the process-wide budget.
  void ReleaseReservation();
  /// Hands the page to the result buffer; false when the query was cancelled.
  bool Flush();
  End EndOfSteps(int rc);
  void FinishInterrupted();
  void FinishCancelled();
  void Finish(QueryState::ExecState state, std::optional<QueryError> error);

  SqliteConnection* const conn_;
  QueryState* const query_;
  const QueryContext& ctx_;
  const SqliteEngine::Options& options_;
  DeadlineWatchdog* const deadlines_;
  LongQueryGate* const gate_;
  std::unique_ptr<sqlite3_stmt, StmtFinalizer> stmt_;
  std::vector<ColumnType> kinds_;
  /// RowValues' per-row storage, one entry per column.
  std::vector<int> row_types_;
  std::vector<int64_t> row_sizes_;
  std::optional<QueryError> error_;
  std::string page_;
  int64_t page_rows_ = 0;
  int64_t page_value_bytes_ = 0;
  /// Bytes of ctx_.memory_budget held for 'page_' (>= its size once a row is encoded).
  int64_t reserved_ = 0;
  bool has_deadline_ = false;
  std::chrono::steady_clock::time_point deadline_;
  bool timed_out_ = false;
  int64_t cpu_start_ns_ = 0;
  /// Progress handler calls (one per 1000 VM steps): since the counters were last sampled,
  /// and in all.
  int progress_calls_ = 0;
  int64_t progress_total_ = 0;
  /// LongQueryDemoter::Options::yield_us: when this query's executor next yields the CPU
  /// (time_point::max(): never).
  std::chrono::steady_clock::time_point next_yield_ = std::chrono::steady_clock::time_point::max();
  /// When this query becomes long and asks 'gate_' for its user's turn (time_point::max():
  /// never, or already asked); whether it holds one.
  std::chrono::steady_clock::time_point ask_turn_at_ = std::chrono::steady_clock::time_point::max();
  bool holds_turn_ = false;
};

std::atomic<int64_t> long_query_yields{0};

void QueryRunner::Run() {
  query_->set_exec_state(QueryState::ExecState::kRunning);
  query_->MarkExecStart();
  cpu_start_ns_ = ThreadCpuNanos();
  if (ctx_.exec_time_limit_ms > 0) {
    has_deadline_ = true;
    deadline_ = query_->exec_start() + std::chrono::milliseconds(ctx_.exec_time_limit_ms);
  }
  const LongQueryDemoter::Options& long_query = options_.long_query;
  if (long_query.yield_us > 0) {
    // Not only once the demoter has lowered this thread's priority: a query's first
    // --long_query_after_ms run at the normal one, and beside back-to-back statements of
    // tens of ms that is a third of their CPU (docs/benchmarks.md, "Checkpoints inside one
    // VM step"). A query shorter than yield_us never yields.
    next_yield_ = query_->exec_start() + std::chrono::microseconds(long_query.yield_us);
  }
  if (gate_ != nullptr && gate_->enabled() && long_query.after_ms > 0) {
    ask_turn_at_ = query_->exec_start() + std::chrono::milliseconds(long_query.after_ms);
  }
  if (query_->is_cancelled()) return FinishCancelled();
  // The temporary files SQLite writes for this query are charged to it (this thread's scope).
  std::optional<QuerySpillScope> spill;
  if (options_.spill_budget != nullptr) {
    auto account =
        std::make_shared<SpillAccount>(options_.spill_budget, options_.query_spill_limit_bytes);
    if (!options_.spool_dir.empty()) {
      query_->result_buffer()->EnableSpooling(options_.spool_dir, account, ctx_.memory_budget);
    }
    spill.emplace(std::move(account));
  }
  conn_->SetProgressHandler(&QueryRunner::OnProgress, this);
  query_->SetInterruptTarget(conn_->db());
  const bool watched = has_deadline_ && deadlines_ != nullptr;
  if (watched) deadlines_->Arm(query_, deadline_);
  End end;
  {
    const StepCheckpoint checkpoint(&QueryRunner::InStep, this);
    end = Execute();
  }
  if (watched) deadlines_->Disarm(query_);
  // The user's next long query may run: this one's statement does no more work.
  ask_turn_at_ = std::chrono::steady_clock::time_point::max();
  if (holds_turn_) gate_->Leave(query_);
  holds_turn_ = false;
  // The watchdog's interrupt at the deadline can end the statement before any check of
  // ours saw the clock.
  if (end != End::kSucceeded && has_deadline_ && !timed_out_ &&
      std::chrono::steady_clock::now() >= deadline_) {
    timed_out_ = true;
  }
  // A stop inside a step can surface as any failure: SQLite answers SQLITE_NOMEM once the
  // checkpoint refuses its allocations (StepCheckpoint::Allocating), and a budget or a
  // bind can fail on the way out. The stop is what the client is told.
  if (end == End::kFailed && (query_->is_cancelled() || timed_out_)) end = End::kInterrupted;
  conn_->SetProgressHandler(nullptr, nullptr);
  SampleCounters();  // the statement's final step count, while it exists
  stmt_.reset();  // ends the read transaction before anyone learns that the query ended
  query_->SetInterruptTarget(nullptr);
  if (end == End::kFailed && spill && spill->refusal()) {
    error_ = QueryError::ExceededSpillLimit(
        "Query exceeded a spill limit: " + SpillRefusalToString(*spill->refusal()) +
        (spill->refusal()->limit == SpillLimit::kQuery ? " (--query_max_spill_mb)"
                                                       : " (--max_spill_mb)"));
  }
  spill.reset();
  switch (end) {
    case End::kSucceeded: return Finish(QueryState::ExecState::kFinished, std::nullopt);
    case End::kFailed: return Finish(QueryState::ExecState::kFailed, std::move(error_));
    case End::kInterrupted: return FinishInterrupted();
    case End::kRefused: return FinishCancelled();
  }
}

void QueryRunner::SampleCounters() {
  query_->cpu_time_ns.store(ThreadCpuNanos() - cpu_start_ns_, std::memory_order_relaxed);
  // SQLite adds to its own step counter only when sqlite3_step() returns, so during one long
  // step (an aggregate) the progress handler's calls are the count; the exact figure once the
  // statement has returned.
  int64_t steps = progress_total_ * 1000;
  if (stmt_) {
    steps = std::max<int64_t>(steps, sqlite3_stmt_status(stmt_.get(), SQLITE_STMTSTATUS_VM_STEP, 0));
  }
  query_->vm_steps.store(steps, std::memory_order_relaxed);
}

int QueryRunner::OnProgress(void* self_ptr) {
  auto* self = static_cast<QueryRunner*>(self_ptr);
  // Live CPU time and progress for queries that run long before (or without) a page: one
  // clock_gettime() per 64 calls (64k VM steps, about a millisecond of work).
  ++self->progress_total_;
  if (++self->progress_calls_ == 64) {
    self->progress_calls_ = 0;
    self->SampleCounters();
  }
  return self->MustStop() ? 1 : 0;
}

bool QueryRunner::InStep(void* self, bool may_yield) {
  return static_cast<QueryRunner*>(self)->MustStop(may_yield);
}

bool QueryRunner::MustStop(bool may_yield) {
  if (query_->is_cancelled()) return true;
  constexpr auto kNever = std::chrono::steady_clock::time_point::max();
  if (!has_deadline_ && next_yield_ == kNever && ask_turn_at_ == kNever) return false;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  if (has_deadline_ && now >= deadline_) {
    timed_out_ = true;
    return true;
  }
  // Only where yielding is allowed: no lock of SQLite is held there.
  if (may_yield && now >= ask_turn_at_) {
    // Long now: wait for one of the turns of this query's user (LongQueryGate), once.
    ask_turn_at_ = kNever;
    holds_turn_ = gate_->Enter(query_, has_deadline_ ? deadline_ : kNever);
    if (query_->is_cancelled()) return true;
    now = std::chrono::steady_clock::now();
    if (has_deadline_ && now >= deadline_) {
      timed_out_ = true;
      return true;
    }
    // A parked query has just been off the CPU.
    if (next_yield_ != kNever) {
      next_yield_ = now + std::chrono::microseconds(options_.long_query.yield_us);
    }
    return false;
  }
  if (may_yield && now >= next_yield_) {
    // A long query, demoted: give a short query's thread that woke on this CPU the chance to
    // run now rather than at the scheduler's next tick (LongQueryDemoter::Options::yield_us).
    sched_yield();
    long_query_yields.fetch_add(1, std::memory_order_relaxed);
    next_yield_ = now + std::chrono::microseconds(options_.long_query.yield_us);
  }
  return false;
}

QueryRunner::End QueryRunner::Execute() {
  sqlite3_stmt* stmt = nullptr;
  QueryError error;
  // The system tables show what this query's user may see while it runs.
  SqlViewer viewer{ctx_.user, ctx_.sees_all_queries};
  SystemTables* system_tables = conn_->system_tables();
  if (system_tables != nullptr) system_tables->set_viewer(&viewer);
  struct ResetViewer {
    SystemTables* tables;
    ~ResetViewer() {
      if (tables != nullptr) tables->set_viewer(nullptr);
    }
  } reset_viewer{system_tables};
  const std::string* sql = ctx_.sql ? ctx_.sql.get() : ctx_.statement.get();
  std::string described;
  if (ctx_.describe_output) {
    if (!DescribeOutputSql(conn_, *sql, &described, &error)) {
      if (query_->is_cancelled() || timed_out_) return End::kInterrupted;
      error_ = std::move(error);
      return End::kFailed;
    }
    sql = &described;
  }
  if (!conn_->Prepare(*sql, &stmt, &error)) {
    // The progress handler also runs while the schema is read.
    if (query_->is_cancelled() || timed_out_) return End::kInterrupted;
    // A location points into the SQL prepared. For EXECUTE (a prepared statement's SQL) and
    // DESCRIBE OUTPUT that is not the statement the client sent, where clients show it: the
    // Trino CLI would index past the statement's lines and print its own error instead.
    if (sql != ctx_.statement.get()) error.line = error.column = 0;
    error_ = std::move(error);
    return End::kFailed;
  }
  stmt_.reset(stmt);
  if (!BindParameters(stmt, ctx_.parameters, &error)) {
    error_ = std::move(error);
    return End::kFailed;
  }
  kinds_.resize(sqlite3_column_count(stmt));
  row_types_.resize(kinds_.size());
  row_sizes_.resize(kinds_.size());
  bool undecided = false;
  for (size_t i = 0; i < kinds_.size(); ++i) {
    kinds_[i] = TypeFromDecl(sqlite3_column_decltype(stmt, static_cast<int>(i)));
    undecided |= kinds_[i].kind == ColumnKind::kUndecided;
  }
  int rc = SQLITE_ROW;
  if (undecided) {
    End end;
    if (!FirstPage(&rc, &end)) return end;
    if (rc != SQLITE_ROW) return EndOfSteps(rc);  // stepping again would restart it
  } else {
    PublishColumns();
  }
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const Append appended = AppendRow(RowValues(stmt, &row_types_, &row_sizes_));
    if (appended == Append::kOverBudget) return End::kFailed;
    // Reading a value can fail for memory (a zeroblob expanded past the SQLite heap limit):
    // the column functions then return an empty value and set the connection's error.
    if ((sqlite3_errcode(conn_->db()) & 0xff) == SQLITE_NOMEM) {
      error_ = conn_->StepError(SQLITE_NOMEM);
      return End::kFailed;
    }
    if (appended == Append::kPageFull && !Flush()) return End::kRefused;
  }
  return EndOfSteps(rc);
}

bool QueryRunner::FirstPage(int* rc, End* end) {
  sqlite3_stmt* stmt = stmt_.get();
  std::vector<bool> from_values(kinds_.size());
  for (size_t i = 0; i < kinds_.size(); ++i) {
    from_values[i] = kinds_[i].kind == ColumnKind::kUndecided;
  }
  PendingRows rows(static_cast<int>(kinds_.size()));
  while (rows.num_rows() < ctx_.page_max_rows && rows.approx_bytes() < ctx_.page_max_bytes &&
         (*rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    // The copies cost what the encoded row will (SQLite expands a zeroblob to copy it):
    // checked first, so a row of huge values fails here, before any of it is copied.
    if (!Reserve(rows.approx_bytes() + RowBound(StmtValues{stmt}))) {
      *end = End::kFailed;
      return false;
    }
    if (!rows.Add(stmt)) {
      error_ = conn_->StepError(SQLITE_NOMEM);
      *end = End::kFailed;
      return false;
    }
    for (size_t i = 0; i < kinds_.size(); ++i) {
      if (!from_values[i]) continue;
      kinds_[i].kind = MergeValueKind(
          kinds_[i].kind, KindFromStorageClass(sqlite3_column_type(stmt, static_cast<int>(i))));
    }
  }
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (kinds_[i].kind == ColumnKind::kUndecided) kinds_[i].kind = ColumnKind::kUnknown;
  }
  PublishColumns();
  for (int64_t r = 0; r < rows.num_rows(); ++r) {
    const Append appended = AppendRow(rows.Row(r));
    if (appended == Append::kOverBudget) {
      *end = End::kFailed;
      return false;
    }
    if (appended == Append::kPageFull && !Flush()) {
      *end = End::kRefused;
      return false;
    }
  }
  return true;
}

void QueryRunner::PublishColumns() {
  std::vector<Column> columns;
  columns.reserve(kinds_.size());
  for (size_t i = 0; i < kinds_.size(); ++i) {
    const int index = static_cast<int>(i);
    columns.push_back(MakeColumn(sqlite3_column_name(stmt_.get(), index), index, kinds_[i]));
  }
  query_->result_buffer()->SetColumns(std::move(columns));
}

template <typename Values>
QueryRunner::Append QueryRunner::AppendRow(const Values& values) {
  // What the row will take is checked before any of it is encoded: a row of wide values
  // fails its query here, not the process in an allocation.
  if (!Reserve(static_cast<int64_t>(page_.size()) + RowBound(values))) {
    return Append::kOverBudget;
  }
  if (page_rows_ > 0) page_.push_back(',');
  page_.push_back('[');
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (i > 0) page_.push_back(',');
    page_value_bytes_ += AppendValue(values, static_cast<int>(i), kinds_[i], &page_);
  }
  page_.push_back(']');
  ++page_rows_;
  // Escaped text can outgrow its bound (a control byte takes 6): account what it took.
  if (!Reserve(static_cast<int64_t>(page_.size()))) return Append::kOverBudget;
  return page_rows_ >= ctx_.page_max_rows ||
                 static_cast<int64_t>(page_.size()) >= ctx_.page_max_bytes
             ? Append::kPageFull
             : Append::kOk;
}

bool QueryRunner::Reserve(int64_t needed) {
  if (needed <= reserved_) return true;
  if (ctx_.max_memory_bytes > 0) {
    const int64_t held = needed + query_->result_buffer()->buffered_bytes();
    if (held > ctx_.max_memory_bytes) {
      error_ = QueryError::ExceededLocalMemoryLimit(
          "Query exceeded the per-query memory limit of " + FormatBytes(ctx_.max_memory_bytes) +
          " (--query_max_memory_mb): its results would take " + FormatBytes(held) +
          " (the row being encoded and the pages not yet fetched)");
      return false;
    }
  }
  MemoryBudget* budget = ctx_.memory_budget;
  if (budget == nullptr) {
    reserved_ = needed;
    return true;
  }
  // Grown in steps of 64 KiB so that small rows touch the shared counter once in many.
  constexpr int64_t kStep = 64 << 10;
  if (budget->TryReserve(needed + kStep - reserved_)) {
    reserved_ = needed + kStep;
    return true;
  }
  if (budget->TryReserve(needed - reserved_)) {
    reserved_ = needed;
    return true;
  }
  error_ = QueryError::ExceededGlobalMemoryLimit(
      "Query exceeded the server's memory limit for query results of " +
      FormatBytes(budget->limit_bytes()) + " (--max_result_memory_mb): " +
      FormatBytes(budget->used_bytes()) + " are held by queries in flight and this one needs " +
      FormatBytes(needed - reserved_) + " more");
  return false;
}

void QueryRunner::ReleaseReservation() {
  if (ctx_.memory_budget != nullptr && reserved_ > 0) ctx_.memory_budget->Release(reserved_);
  reserved_ = 0;
}

bool QueryRunner::Flush() {
  if (page_rows_ == 0) return true;
  const size_t size = page_.size();
  // The page keeps its bytes of the budget until its last reference is dropped.
  const int64_t page_bytes = ctx_.memory_budget != nullptr ? static_cast<int64_t>(size) : 0;
  if (ctx_.memory_budget != nullptr) ctx_.memory_budget->Release(reserved_ - page_bytes);
  reserved_ = 0;
  ResultPage page{MakeAccountedPage(std::move(page_), page_bytes, ctx_.memory_budget),
                  page_rows_, page_value_bytes_};
  page_ = std::string();
  // The next page is likely the same size: grow once (not past a normal page's size).
  page_.reserve(std::min<size_t>(size, ctx_.page_max_bytes) * 9 / 8);
  query_->rows_produced.fetch_add(page_rows_, std::memory_order_relaxed);
  query_->bytes_produced.fetch_add(page_value_bytes_, std::memory_order_relaxed);
  SampleCounters();
  page_rows_ = 0;
  page_value_bytes_ = 0;
  // Blocks while the client is not fetching; false once the query is cancelled.
  return query_->result_buffer()->Put(std::move(page));
}

QueryRunner::End QueryRunner::EndOfSteps(int rc) {
  if (rc == SQLITE_DONE) return Flush() ? End::kSucceeded : End::kRefused;
  if ((rc & 0xff) == SQLITE_INTERRUPT) return End::kInterrupted;
  error_ = conn_->StepError(rc);
  return End::kFailed;
}

void QueryRunner::FinishInterrupted() {
  if (timed_out_ && !query_->is_cancelled()) {
    QueryError error = QueryError::ExceededTimeLimit(
        "Query exceeded the maximum execution time limit of " +
        FormatDuration(ctx_.exec_time_limit_ms));
    // Cancel() drops the buffered pages; losing that race to a user's cancel keeps theirs.
    if (query_->Cancel(error)) return Finish(QueryState::ExecState::kFailed, std::move(error));
  }
  FinishCancelled();
}

void QueryRunner::FinishCancelled() {
  std::optional<QueryError> reason = query_->cancel_reason();
  Finish(QueryState::ExecState::kCancelled, reason ? std::move(reason) : QueryError::UserCanceled());
}

void QueryRunner::Finish(QueryState::ExecState state, std::optional<QueryError> error) {
  query_->cpu_time_ns.store(ThreadCpuNanos() - cpu_start_ns_, std::memory_order_relaxed);
  // The state first: whoever is woken by Finish() sees the final state.
  query_->set_exec_state(state);
  query_->result_buffer()->Finish(std::move(error));
}

}  // namespace

int64_t LongQueryYields() { return long_query_yields.load(std::memory_order_relaxed); }

void RunQuery(SqliteConnection* conn, QueryState* query, const SqliteEngine::Options& options,
              DeadlineWatchdog* deadlines, LongQueryGate* gate) {
  QueryRunner(conn, query, options, deadlines, gate).Run();
}

}  // namespace qr
