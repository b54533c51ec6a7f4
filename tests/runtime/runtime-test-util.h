#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/query-exec-mgr.h"
#include "runtime/sqlite-engine.h"
#include "testutil/wait.h"
#include "util/mutex.h"

/// Helpers shared by the runtime tests: temporary directories, bounded waits, and a client
/// that submits a query to a SqliteEngine and reads all of its pages.

namespace qr::testing {

/// A fresh private directory under the system's temp directory, removed with its contents.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qr-runtime-test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A registered query of 'user' that no engine runs (for the tests of the parts an executor
/// calls: the deadline watchdog, the long-query gate).
inline QueryStateHandle NewUnrunQuery(QueryExecMgr* mgr, const std::string& user = "test") {
  QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>("SELECT 1");
  ctx.user = user;
  QueryStateHandle q;
  EXPECT_TRUE(mgr->CreateQueryState(GenerateQueryId(), std::move(ctx), &q).ok());
  return q;
}

/// Starts an engine serving a database of one empty table, created in 'dir', with 'options'
/// (its database_path set here); null (with a test failure) if that fails.
inline std::unique_ptr<SqliteEngine> StartEmptyDbEngine(const ScopedTempDir& dir,
                                                        SqliteEngine::Options options) {
  options.database_path = dir.path() + "/empty.db";
  sqlite3* db = nullptr;
  if (sqlite3_open(options.database_path.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, "CREATE TABLE unused(x)", nullptr, nullptr, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot create " << options.database_path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return nullptr;
  }
  sqlite3_close(db);
  std::unique_ptr<SqliteEngine> engine;
  const Status st = SqliteEngine::Create(options, &engine);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return engine;
}

/// Counts a ResultBuffer's change notifications so that a reader can wait for the next one.
/// Thread-safety: thread-safe.
class ChangeCounter {
 public:
  void Notify() {
    MutexLock l(&mu_);
    ++count_;
    cv_.NotifyAll();
  }
  uint64_t count() const {
    MutexLock l(&mu_);
    return count_;
  }
  /// Waits until more than 'seen' changes happened; false at 'deadline'.
  bool WaitPast(uint64_t seen, std::chrono::steady_clock::time_point deadline) {
    MutexLock l(&mu_);
    while (count_ <= seen) {
      if (!cv_.WaitUntil(&mu_, deadline) && count_ <= seen) return false;
    }
    return true;
  }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  uint64_t count_ QR_GUARDED_BY(mu_) = 0;
};

/// A query handed to an engine, with a counter of its buffer's changes.
struct SubmittedQuery {
  QueryStateHandle handle;
  std::shared_ptr<ChangeCounter> changes;
  QueryState* operator->() const { return handle.get(); }
};

/// Registers 'sql' with 'ctx' in 'mgr' and hands it to 'engine'.
inline SubmittedQuery Submit(QueryExecMgr* mgr, SqliteEngine* engine, const std::string& sql,
                             QueryContext ctx = QueryContext()) {
  ctx.statement = std::make_shared<const std::string>(sql);
  if (ctx.user.empty()) ctx.user = "test";
  SubmittedQuery q;
  EXPECT_TRUE(mgr->CreateQueryState(GenerateQueryId(), std::move(ctx), &q.handle).ok());
  q.changes = std::make_shared<ChangeCounter>();
  // The listener shares ownership of the counter: it may run after the test let go of it.
  q.handle->result_buffer()->SetOnChange([c = q.changes] { c->Notify(); });
  engine->Execute(q.handle.Clone());
  return q;
}

/// Everything a query delivered.
struct QueryOutcome {
  bool ended = false;  // false: the deadline passed first
  std::vector<Column> columns;
  std::vector<std::string> pages;
  std::vector<int64_t> page_rows;
  std::optional<QueryError> error;
  QueryState::ExecState state = QueryState::ExecState::kCreated;

  /// All rows as one JSON array: "[" + the pages joined by "," + "]".
  std::string RowsJson() const {
    std::string all = "[";
    for (size_t i = 0; i < pages.size(); ++i) all += (i > 0 ? "," : "") + pages[i];
    return all + "]";
  }
};

/// Reads every page of 'q' until its end, or until 'timeout' passes.
inline QueryOutcome Drain(const SubmittedQuery& q,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  QueryOutcome out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ResultBuffer* buf = q->result_buffer();
  for (;;) {
    const uint64_t seen = q.changes->count();
    ResultPage page;
    std::optional<QueryError> error;
    switch (buf->TryGet(&page, &error)) {
      case ResultBuffer::Next::kPage:
        out.pages.push_back(*page.json_rows);
        out.page_rows.push_back(page.num_rows);
        continue;
      case ResultBuffer::Next::kEnd:
        out.ended = true;
        out.error = std::move(error);
        if (buf->columns() != nullptr) out.columns = *buf->columns();
        out.state = q->exec_state();
        return out;
      case ResultBuffer::Next::kNotYet:
        if (!q.changes->WaitPast(seen, deadline)) return out;
        break;
    }
  }
}

/// Submits 'sql' and reads all of it.
inline QueryOutcome Run(QueryExecMgr* mgr, SqliteEngine* engine, const std::string& sql,
                        QueryContext ctx = QueryContext()) {
  return Drain(Submit(mgr, engine, sql, std::move(ctx)));
}

}  // namespace qr::testing
