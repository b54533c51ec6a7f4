#pragma once

// The fixture of the SqliteEngine tests (sqlite-engine-test.cc: types, pages and errors;
// sqlite-engine-exec-test.cc: cancellation, limits, queueing and concurrency): an engine over
// a small generated sample database and a database of mixed storage classes.

#include <sqlite3.h>

#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/query-exec-mgr.h"
#include "runtime/sample-db.h"
#include "runtime/sqlite-engine.h"
#include "runtime-test-util.h"

namespace qr::sqlite_engine_test {

using qr::testing::QueryOutcome;
using qr::testing::ScopedTempDir;
using ExecState = QueryState::ExecState;
using Json = nlohmann::json;

// Counts to ten million: runs for seconds, long enough to be cancelled while running.
inline constexpr const char* kEndless =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
inline constexpr const char* kTenMillionRows =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10000000) "
    "SELECT x FROM c";

/// Creates a small database whose columns hold values of every storage class, some of them
/// not of the column's declared type.
inline void WriteTypesDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
    CREATE TABLE mixed (id INTEGER, i BIGINT, d DOUBLE, t VARCHAR(10), b BLOB, flag BOOLEAN,
                        untyped, odd JSON);
    INSERT INTO mixed VALUES (1, 7, 2.5, 'a', X'01', 1, 1, 10);
    INSERT INTO mixed VALUES (2, 2.75, 'abc', 42, 'hi', 'true', 'x', 'y');
    INSERT INTO mixed VALUES (3, '12abc', '1.5e3xyz', NULL, 42, 0.0, NULL, NULL);
    INSERT INTO mixed VALUES (4, 1e30, 3, 2.5, NULL, 'FALSE', 2.5, 3);
  )sql";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

class SqliteEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    // Small: every test process (ctest runs each test alone) generates its own.
    ASSERT_TRUE(EnsureSampleDatabase(dir_->path(), 0.002, &sample_path_).ok());
    types_path_ = dir_->path() + "/types.db";
    WriteTypesDatabase(types_path_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override { engine_ = MakeEngine(sample_path_, 2); }

  static std::unique_ptr<SqliteEngine> MakeEngine(const std::string& path, int threads) {
    std::unique_ptr<SqliteEngine> engine;
    Status st = SqliteEngine::Create({path, threads}, &engine);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return engine;
  }

  QueryOutcome Run(const std::string& sql, QueryContext ctx = QueryContext()) {
    return qr::testing::Run(&mgr_, engine_.get(), sql, std::move(ctx));
  }
  /// Runs 'sql', expects success, and returns its rows parsed.
  Json Rows(const std::string& sql, QueryOutcome* outcome = nullptr) {
    QueryOutcome out = Run(sql);
    EXPECT_TRUE(out.ended);
    EXPECT_FALSE(out.error.has_value()) << sql << ": " << out.error->message;
    EXPECT_EQ(out.state, ExecState::kFinished);
    if (outcome != nullptr) *outcome = out;
    return Json::parse(out.RowsJson());
  }
  /// Runs 'sql' and expects it to fail with 'code'.
  QueryError Fails(const std::string& sql, int32_t code) {
    QueryOutcome out = Run(sql);
    EXPECT_TRUE(out.ended) << sql;
    EXPECT_TRUE(out.error.has_value()) << sql;
    if (!out.error.has_value()) return QueryError();
    EXPECT_EQ(out.error->code, code) << sql << ": " << out.error->name << ": "
                                     << out.error->message;
    EXPECT_EQ(out.state, ExecState::kFailed) << sql;
    return *out.error;
  }

  int RunConcurrently(int threads, int per_thread, const std::string& plus_sql, int plus);

  static inline ScopedTempDir* dir_ = nullptr;
  static inline std::string sample_path_;
  static inline std::string types_path_;
  QueryExecMgr mgr_{8};
  std::unique_ptr<SqliteEngine> engine_;
};

}  // namespace qr::sqlite_engine_test
