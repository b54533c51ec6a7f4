// The accounting allocator of SQLite's heap: exact counts, the limit, and many connections
// allocating at once (run under TSan by CI). Its own binary: the allocator must be installed
// before anything in the process initializes SQLite.
#include "runtime/sqlite-heap.h"

#include <sqlite3.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

class SqliteHeapTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(InstallSqliteHeap().ok()); }
  void SetUp() override {
    ASSERT_TRUE(SqliteHeapInstalled());
    SetSqliteHeapLimit(0);
    ResetSqliteHeapPeak();
  }
  void TearDown() override { SetSqliteHeapLimit(0); }

  /// Runs `sql` on a fresh in-memory database; returns the first failing call's result code
  /// (under a heap limit opening the database can itself fail with SQLITE_NOMEM).
  static int Run(const std::string& sql) {
    sqlite3* db = nullptr;
    if (const int rc = sqlite3_open(":memory:", &db); rc != SQLITE_OK) {
      sqlite3_close(db);
      return rc;
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
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

}  // namespace
}  // namespace qr
