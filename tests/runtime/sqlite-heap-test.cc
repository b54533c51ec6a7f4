// The accounting allocator of SQLite's heap: exact counts, the limit, and many connections
// allocating at once (run under TSan by CI). Its own binary: the allocator must be installed
// before anything in the process initializes SQLite.
#include "runtime/sqlite-heap.h"

#include <sqlite3.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

/// A check that counts its calls (and those that allowed a yield) and says stop from the
/// 'stop_at'-th call on (0: never).
struct CountingCheck {
  int calls = 0;
  int yielding_calls = 0;
  int stop_at = 0;
  static bool Fn(void* arg, bool may_yield) {
    auto* self = static_cast<CountingCheck*>(arg);
    ++self->calls;
    if (may_yield) ++self->yielding_calls;
    return self->stop_at != 0 && self->calls >= self->stop_at;
  }
};

class SqliteHeapTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(InstallSqliteHeap().ok()); }
  void SetUp() override {
    ASSERT_TRUE(SqliteHeapInstalled());
    SetSqliteHeapLimit(0);
    ResetSqliteHeapPeak();
  }
  void TearDown() override { SetSqliteHeapLimit(0); }

  /// Runs `sql` on a fresh in-memory database, its steps with 'check' installed if given;
  /// returns the first failing call's result code (under a heap limit opening the database
  /// can itself fail with SQLITE_NOMEM).
  static int Run(const std::string& sql, CountingCheck* check = nullptr) {
    sqlite3* db = nullptr;
    if (const int rc = sqlite3_open(":memory:", &db); rc != SQLITE_OK) {
      sqlite3_close(db);
      return rc;
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      std::optional<StepCheckpoint> checkpoint;
      if (check != nullptr) checkpoint.emplace(&CountingCheck::Fn, check);
      while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      }
      if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return rc;
  }
};

TEST_F(SqliteHeapTest, CountsEveryBlockExactly) {
  const int64_t before = SqliteHeapUsed();
  void* p = sqlite3_malloc(100);
  ASSERT_NE(p, nullptr);
  // 100 rounded up to 8, plus the 8-byte size header.
  EXPECT_EQ(SqliteHeapUsed() - before, 112);
  EXPECT_EQ(sqlite3_msize(p), 104u);
  p = sqlite3_realloc(p, 1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(SqliteHeapUsed() - before, 1008);
  p = sqlite3_realloc(p, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(SqliteHeapUsed() - before, 24);
  sqlite3_free(p);
  EXPECT_EQ(SqliteHeapUsed(), before);
  EXPECT_GE(SqliteHeapPeak(), before + 1008);
}

TEST_F(SqliteHeapTest, ConnectionsGiveBackWhatTheyTook) {
  ASSERT_EQ(Run("SELECT 1"), SQLITE_OK);  // SQLite's one-time allocations happen here
  const int64_t before = SqliteHeapUsed();
  ASSERT_EQ(Run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                "SELECT length(group_concat(printf('%08d', i))) FROM n"),
            SQLITE_OK);
  EXPECT_EQ(SqliteHeapUsed(), before);
  EXPECT_GT(SqliteHeapPeak(), before + 160000) << "the 160 KB string was not counted";
}

TEST_F(SqliteHeapTest, TheLimitFailsTheStatementNotTheProcess) {
  ASSERT_EQ(Run("SELECT 1"), SQLITE_OK);
  const int64_t before = SqliteHeapUsed();
  const int64_t refusals = SqliteHeapRefusals();
  SetSqliteHeapLimit(before + (int64_t{4} << 20));
  EXPECT_EQ(SqliteHeapLimit(), before + (int64_t{4} << 20));
  // A 16 MB string cannot be built within 4 MB.
  EXPECT_EQ(Run("SELECT length(printf('%.*c', 16000000, 'a'))"), SQLITE_NOMEM);
  EXPECT_GT(SqliteHeapRefusals(), refusals);
  EXPECT_EQ(SqliteHeapUsed(), before);
  EXPECT_LE(SqliteHeapPeak(), before + (int64_t{4} << 20));
  // What fits still runs, and without the limit the large one does too.
  EXPECT_EQ(Run("SELECT length(printf('%.*c', 1000000, 'a'))"), SQLITE_OK);
  SetSqliteHeapLimit(0);
  EXPECT_EQ(Run("SELECT length(printf('%.*c', 16000000, 'a'))"), SQLITE_OK);
  EXPECT_EQ(SqliteHeapUsed(), before);
}

TEST_F(SqliteHeapTest, ManyConnectionsAtOnceKeepTheCountExact) {
  ASSERT_EQ(Run("SELECT 1"), SQLITE_OK);
  const int64_t before = SqliteHeapUsed();
  // Below what the threads hold together at their peak, now and then: some statements are
  // refused, and the count must still come back to where it was.
  SetSqliteHeapLimit(before + (int64_t{3} << 20));
  constexpr int kThreads = 4;
  constexpr int kRuns = 40;
  std::atomic<int> ok{0};
  std::atomic<int> nomem{0};
  std::atomic<int> other{0};
  std::atomic<int> other_code{SQLITE_OK};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        const int length = 100000 + 20000 * ((t + i) % 40);
        const int rc = Run("SELECT length(replace(printf('%.*c', " + std::to_string(length) +
                           ", 'a'), 'a', 'bc'))");
        (rc == SQLITE_OK ? ok : rc == SQLITE_NOMEM ? nomem : other).fetch_add(1);
        if (rc != SQLITE_OK && rc != SQLITE_NOMEM) other_code.store(rc);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0) << "a statement failed with " << sqlite3_errstr(other_code.load());
  EXPECT_EQ(ok.load() + nomem.load(), kThreads * kRuns);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(SqliteHeapUsed(), before);
  EXPECT_LE(SqliteHeapPeak(), before + (int64_t{3} << 20));
}

// ---------------------------------------------------------------------------------------------
// Checkpoints in SQLite's allocations (StepCheckpoint::Allocating)

/// One row of 'n' columns, each a concatenation of the 1 MiB value x: straight-line code in
/// SQLite's VM, with no jump where it would check an interrupt or call a progress handler.
/// (A load of x alone may allocate nothing: SQLite reuses a register's buffer.)
std::string RowOfConcats(int n) {
  std::string sql = "WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 1048576, 'a')) SELECT ";
  for (int i = 0; i < n; ++i) {
    if (i > 0) sql += ", ";
    sql += "length(x || '" + std::to_string(i) + "')";
  }
  return sql + " FROM t";
}

TEST_F(SqliteHeapTest, EachLargeAllocationOfARowRunsTheCheckWithoutAYield) {
  CountingCheck check;
  ASSERT_EQ(Run(RowOfConcats(40), &check), SQLITE_OK);
  // Every column loads x and concatenates it: at least one 1 MiB allocation each.
  EXPECT_GE(check.calls, 40);
  EXPECT_EQ(check.yielding_calls, 0) << "a check inside SQLite's allocator may not yield";
}

TEST_F(SqliteHeapTest, AStopFailsTheRestOfTheRowAndLeaksNothing) {
  ASSERT_EQ(Run("SELECT 1"), SQLITE_OK);
  const int64_t before = SqliteHeapUsed();
  const int64_t refused = StepCheckpoint::AllocationsRefused();
  CountingCheck check;
  check.stop_at = 5;
  EXPECT_EQ(Run(RowOfConcats(40), &check), SQLITE_NOMEM);
  // The stop holds for the rest of the statement: no further check, the allocations refused.
  EXPECT_EQ(check.calls, 5);
  EXPECT_GT(StepCheckpoint::AllocationsRefused(), refused);
  EXPECT_EQ(SqliteHeapUsed(), before);
  // Once the check is uninstalled, the thread allocates again.
  EXPECT_EQ(Run(RowOfConcats(3)), SQLITE_OK);
  EXPECT_EQ(SqliteHeapUsed(), before);
}

TEST_F(SqliteHeapTest, AStopRefusesOnlyItsOwnThreadsAllocations) {
  ASSERT_EQ(Run("SELECT 1"), SQLITE_OK);
  const int64_t before = SqliteHeapUsed();
  constexpr int kThreads = 4;
  std::vector<CountingCheck> checks(kThreads);
  std::vector<int> results(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    checks[t].stop_at = t % 2 == 0 ? 3 : 0;  // the even threads stop, the odd ones do not
    threads.emplace_back([&, t] {
      int rc = SQLITE_OK;
      for (int i = 0; i < 5 && rc != SQLITE_NOMEM; ++i) {
        rc = Run(RowOfConcats(12), &checks[t]);
      }
      results[t] = rc;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(results[t], t % 2 == 0 ? SQLITE_NOMEM : SQLITE_OK) << "thread " << t;
    if (t % 2 == 0) {
      EXPECT_EQ(checks[t].calls, 3) << "thread " << t;
    } else {
      EXPECT_GE(checks[t].calls, 5 * 12) << "thread " << t;
    }
  }
  EXPECT_EQ(SqliteHeapUsed(), before);
}

}  // namespace
}  // namespace qr
