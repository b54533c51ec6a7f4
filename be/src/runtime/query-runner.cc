#include "runtime/query-runner.h"

#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include <glog/logging.h>

#include "runtime/memory-budget.h"
#include "runtime/row-encoder.h"
#include "runtime/sqlite-connection.h"

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

/// decided from their values (columns must be published before the first page).
class PendingRows {
 public:
  explicit PendingRows(int num_columns) : num_columns_(num_columns) {}
  ~PendingRows() {
    for (sqlite3_value* v : values_) sqlite3_value_free(v);
  }
  PendingRows(const PendingRows&) = delete;
  PendingRows& operator=(const PendingRows&) = delete;

  /// Copies the current row of 'stmt'; false when out of memory.
  bool Add(sqlite3_stmt* stmt) {
    for (int i = 0; i < num_columns_; ++i) {
      sqlite3_value* v = sqlite3_value_dup(sqlite3_column_value(stmt, i));
      if (v == nullptr) return false;
      values_.push_back(v);
      bytes_ += 8 + sqlite3_value_bytes(v);
    }
    ++rows_;
    return true;
  }
  int64_t num_rows() const { return rows_; }
  int64_t approx_bytes() const { return bytes_; }
  CopiedValues Row(int64_t r) const { return CopiedValues{values_.data() + r * num_columns_}; }

 private:
  const int num_columns_;
  std::vector<sqlite3_value*> values_;
  int64_t rows_ = 0;
  int64_t bytes_ = 0;
};

/// Executes one query on one connection, from prepare to ResultBuffer::Finish().
/// Thread-safety: used by one executor thread; only its progress check reads shared state.
class QueryRunner {
 public:
  QueryRunner(SqliteConnection* conn, QueryState* query, const SqliteEngine::Options& options)
      : conn_(conn), query_(query), ctx_(query->query_ctx()), options_(options) {}
  ~QueryRunner() { ReleaseReservation(); }

  /// Runs the query to its end; afterwards its exec_state is final and its buffer finished.
  void Run();

 private:
  enum class End { kSucceeded, kFailed, kInterrupted, kRefused };

  static int OnProgress(void* self);
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
  std::unique_ptr<sqlite3_stmt, StmtFinalizer> stmt_;
  std::vector<ColumnType> kinds_;
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
};

void QueryRunner::Run() {
  query_->set_exec_state(QueryState::ExecState::kRunning);
  query_->MarkExecStart();
  cpu_start_ns_ = ThreadCpuNanos();
  if (ctx_.exec_time_limit_ms > 0) {
    has_deadline_ = true;
    deadline_ = query_->exec_start() + std::chrono::milliseconds(ctx_.exec_time_limit_ms);
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
  End end = Execute();
  conn_->SetProgressHandler(nullptr, nullptr);
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

int QueryRunner::OnProgress(void* self_ptr) {
  auto* self = static_cast<QueryRunner*>(self_ptr);
  if (self->query_->is_cancelled()) return 1;
  if (self->has_deadline_ && std::chrono::steady_clock::now() >= self->deadline_) {
    self->timed_out_ = true;
    return 1;
  }
  return 0;
}

QueryRunner::End QueryRunner::Execute() {
  sqlite3_stmt* stmt = nullptr;
  QueryError error;
  if (!conn_->Prepare(*ctx_.statement, &stmt, &error)) {
    // The progress handler also runs while the schema is read.
    if (query_->is_cancelled() || timed_out_) return End::kInterrupted;
    error_ = std::move(error);
    return End::kFailed;
  }
  stmt_.reset(stmt);
  kinds_.resize(sqlite3_column_count(stmt));
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
    const Append appended = AppendRow(StmtValues{stmt});
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
  query_->cpu_time_ns.store(ThreadCpuNanos() - cpu_start_ns_, std::memory_order_relaxed);
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

void RunQuery(SqliteConnection* conn, QueryState* query, const SqliteEngine::Options& options) {
  QueryRunner(conn, query, options).Run();
}

}  // namespace qr
