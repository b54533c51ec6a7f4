#include "runtime/spill-accounting.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kGiB = 1024 * 1024 * 1024;
/// Rows of ~100 bytes of text in the test table: ~5 MB, far more than the sorts' cache.
constexpr int kNumRows = 50000;

/// Makes a fresh directory under the system's temp directory; empty on failure.
std::string MakeTempDir(const char* prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / prefix).string() + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

/// Installs the spill accounting VFS once for the whole test binary, before any test opens a
/// connection, so that every runtime test runs on it (as the daemon does). Its budget is
/// effectively unlimited; tests that need a small total use their own SpillBudget in a scope.
class SpillVfsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    base_dir_ = MakeTempDir("qr-spill-test");
    ASSERT_FALSE(base_dir_.empty());
    spill_dir_ = base_dir_ + "/spill";  // Missing: the install creates it.
    budget_ = new SpillBudget(int64_t{1} << 50);  // Lives until exit, as required.
    Status st = InstallSpillAccountingVfs(budget_, spill_dir_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(base_dir_, ec);
  }

  static std::string base_dir_;
  static std::string spill_dir_;
  static SpillBudget* budget_;
};
std::string SpillVfsEnvironment::base_dir_;
std::string SpillVfsEnvironment::spill_dir_;
SpillBudget* SpillVfsEnvironment::budget_ = nullptr;

[[maybe_unused]] ::testing::Environment* const kSpillEnv =
    ::testing::AddGlobalTestEnvironment(new SpillVfsEnvironment);

TEST(SpillBudgetTest, ReservesWithinTheLimitAndTracksThePeak) {
  SpillBudget budget(100);
  EXPECT_TRUE(budget.TryReserve(60));
  EXPECT_TRUE(budget.TryReserve(40));
  EXPECT_FALSE(budget.TryReserve(1));
  EXPECT_EQ(budget.refusals(), 1);
  budget.Release(50);
  EXPECT_EQ(budget.used_bytes(), 50);
  EXPECT_TRUE(budget.TryReserve(50));
  budget.Release(100);
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_EQ(budget.peak_bytes(), 100);
  EXPECT_EQ(budget.limit_bytes(), 100);
}

TEST(SpillBudgetTest, ConcurrentReservationsNeverPassTheLimit) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  SpillBudget budget(100);
  std::vector<int64_t> granted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&budget, &granted, t] {
      for (int i = 0; i < kIterations; ++i) {
        if (budget.TryReserve(30)) {
          ++granted[t];
          budget.Release(30);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  int64_t total_granted = 0;
  for (int64_t g : granted) total_granted += g;
  EXPECT_EQ(total_granted + budget.refusals(), kThreads * kIterations);
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_LE(budget.peak_bytes(), 90);  // At most three 30-byte reservations fit in 100.
  EXPECT_GE(budget.peak_bytes(), 30);
}

TEST(QuerySpillScopeTest, NestsAndRestoresTheCurrentScope) {
  SpillBudget budget(kGiB);
  EXPECT_EQ(QuerySpillScope::Current(), nullptr);
  {
    QuerySpillScope outer(&budget, kKiB);
    EXPECT_EQ(QuerySpillScope::Current(), &outer);
    {
      QuerySpillScope inner(&budget, kKiB);
      EXPECT_EQ(QuerySpillScope::Current(), &inner);
    }
    EXPECT_EQ(QuerySpillScope::Current(), &outer);
    EXPECT_EQ(outer.limit_bytes(), kKiB);
    EXPECT_FALSE(outer.refusal().has_value());
  }
  EXPECT_EQ(QuerySpillScope::Current(), nullptr);
}

TEST(SpillRefusalTest, MessageNamesTheLimit) {
  EXPECT_NE(SpillRefusalToString({SpillLimit::kQuery, 262144, 4096, 260000}).find(
                "per-query spill limit of 262144 bytes"),
            std::string::npos);
  EXPECT_NE(SpillRefusalToString({SpillLimit::kTotal, 1000, 10, 995}).find(
                "total spill limit of 1000 bytes"),
            std::string::npos);
}

/// Runs sorts over a read-only on-disk table of kNumRows rows of 100-byte text, through a
/// connection whose page cache is so small that every sort spills to temporary files.
class SpillVfsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = MakeTempDir("qr-spill-db");
    ASSERT_FALSE(dir_.empty());
    db_path_ = dir_ + "/big.db";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "PRAGMA journal_mode=OFF; CREATE TABLE big(id INTEGER PRIMARY KEY, t TEXT);"
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < " +
        std::to_string(kNumRows) + ") INSERT INTO big SELECT i, hex(randomblob(50)) FROM c;";
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_free(err);
    sqlite3_close(db);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void SetUp() override {
    ASSERT_EQ(sqlite3_open_v2(db_path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db_, "PRAGMA cache_size=16", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  void TearDown() override { sqlite3_close(db_); }

  sqlite3_stmt* Prepare(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr), SQLITE_OK) << sqlite3_errmsg(db_);
    return stmt;
  }

  /// Steps 'sql' to the end; returns the final result code and counts the rows.
  int RunToEnd(const char* sql, int64_t* rows) {
    sqlite3_stmt* stmt = Prepare(sql);
    int rc;
    *rows = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) ++*rows;
    sqlite3_finalize(stmt);
    return rc;
  }

  static std::string dir_;
  static std::string db_path_;
  sqlite3* db_ = nullptr;
};
std::string SpillVfsTest::dir_;
std::string SpillVfsTest::db_path_;

constexpr const char* kSortSql = "SELECT t FROM big ORDER BY t";

TEST_F(SpillVfsTest, IsTheDefaultVfsAndCreatedTheTempDir) {
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  ASSERT_NE(vfs, nullptr);
  EXPECT_STREQ(vfs->zName, kSpillAccountingVfsName);
  EXPECT_TRUE(std::filesystem::is_directory(SpillVfsEnvironment::spill_dir_));
  ASSERT_NE(sqlite3_temp_directory, nullptr);
  EXPECT_EQ(std::filesystem::path(sqlite3_temp_directory),
            std::filesystem::absolute(SpillVfsEnvironment::spill_dir_));
}

TEST_F(SpillVfsTest, InstallingTwiceIsRefusedAndBadDirsAreNamed) {
  SpillBudget budget(kGiB);
  Status st = InstallSpillAccountingVfs(&budget, SpillVfsEnvironment::spill_dir_);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();

  const std::string file = SpillVfsEnvironment::base_dir_ + "/a-file";
  std::ofstream(file) << "x";
  st = InstallSpillAccountingVfs(&budget, file + "/sub");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(file + "/sub"), std::string::npos) << st.ToString();
}

TEST_F(SpillVfsTest, SortWithinQuotasSucceedsAndReleasesEverything) {
  SpillBudget budget(kGiB);
  QuerySpillScope scope(&budget, kGiB);
  sqlite3_stmt* stmt = Prepare(kSortSql);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << sqlite3_errmsg(db_);
  // The whole input is sorted before the first row: the runs are on disk now.
  EXPECT_GT(scope.used_bytes(), 0);
  EXPECT_EQ(budget.used_bytes(), scope.used_bytes());
  std::string previous(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  int64_t rows = 1;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::string t(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    EXPECT_LE(previous, t);
    previous = std::move(t);
    ++rows;
  }
  EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(db_);
  EXPECT_EQ(rows, kNumRows);
  sqlite3_finalize(stmt);
  EXPECT_GT(budget.peak_bytes(), 0);
  EXPECT_EQ(scope.peak_bytes(), budget.peak_bytes());
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_EQ(scope.used_bytes(), 0);
  EXPECT_FALSE(scope.refusal().has_value());
  EXPECT_EQ(budget.refusals() + budget.query_refusals(), 0);
}

TEST_F(SpillVfsTest, PerQueryLimitFailsTheSortWithSqliteFull) {
  SpillBudget budget(kGiB);
  QuerySpillScope scope(&budget, 256 * kKiB);
  int64_t rows;
  EXPECT_EQ(RunToEnd(kSortSql, &rows), SQLITE_FULL) << sqlite3_errmsg(db_);
  EXPECT_EQ(rows, 0);
  ASSERT_TRUE(scope.refusal().has_value());
  EXPECT_EQ(scope.refusal()->limit, SpillLimit::kQuery);
  EXPECT_EQ(scope.refusal()->limit_bytes, 256 * kKiB);
  EXPECT_GT(scope.refusal()->requested_bytes, 0);
  EXPECT_LE(scope.peak_bytes(), 256 * kKiB);
  EXPECT_EQ(budget.query_refusals(), 1);
  EXPECT_EQ(budget.refusals(), 0);
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_EQ(scope.used_bytes(), 0);
}

TEST_F(SpillVfsTest, TotalLimitFailsTheSortWithSqliteFull) {
  SpillBudget budget(256 * kKiB);
  QuerySpillScope scope(&budget, kGiB);
  int64_t rows;
  EXPECT_EQ(RunToEnd(kSortSql, &rows), SQLITE_FULL) << sqlite3_errmsg(db_);
  ASSERT_TRUE(scope.refusal().has_value());
  EXPECT_EQ(scope.refusal()->limit, SpillLimit::kTotal);
  EXPECT_EQ(scope.refusal()->limit_bytes, 256 * kKiB);
  EXPECT_GE(budget.refusals(), 1);
  EXPECT_LE(budget.peak_bytes(), 256 * kKiB);
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_EQ(scope.used_bytes(), 0);
}

TEST_F(SpillVfsTest, DistinctAndGroupByTempTablesAreCharged) {
  for (const char* sql : {"SELECT DISTINCT t FROM big", "SELECT t, count(*) FROM big GROUP BY t",
                          "SELECT count(DISTINCT t) FROM big"}) {
    SpillBudget budget(kGiB);
    QuerySpillScope scope(&budget, 64 * kKiB);
    int64_t rows;
    EXPECT_EQ(RunToEnd(sql, &rows), SQLITE_FULL) << sql << ": " << sqlite3_errmsg(db_);
    ASSERT_TRUE(scope.refusal().has_value()) << sql;
    EXPECT_EQ(scope.refusal()->limit, SpillLimit::kQuery) << sql;
    EXPECT_EQ(budget.used_bytes(), 0) << sql;
  }
}

TEST_F(SpillVfsTest, WithoutAScopeTempFilesChargeTheInstalledBudget) {
  SpillBudget* installed = SpillVfsEnvironment::budget_;
  const int64_t used_before = installed->used_bytes();
  sqlite3_stmt* stmt = Prepare(kSortSql);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << sqlite3_errmsg(db_);
  EXPECT_GT(installed->used_bytes(), used_before);
  sqlite3_finalize(stmt);
  EXPECT_EQ(installed->used_bytes(), used_before);
}

TEST_F(SpillVfsTest, FileClosedAfterItsScopeEndedReleasesToItsQuery) {
  SpillBudget budget(kGiB);
  SpillBudget* installed = SpillVfsEnvironment::budget_;
  const int64_t installed_before = installed->used_bytes();
  sqlite3_stmt* stmt = Prepare(kSortSql);
  {
    QuerySpillScope scope(&budget, kGiB);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << sqlite3_errmsg(db_);
    EXPECT_GT(scope.used_bytes(), 0);
  }
  EXPECT_GT(budget.used_bytes(), 0);
  // Still charged to the query's account: the installed budget sees none of it.
  EXPECT_EQ(installed->used_bytes(), installed_before);
  sqlite3_finalize(stmt);
  EXPECT_EQ(budget.used_bytes(), 0);
}

TEST(RemoveStaleSpillFilesTest, RemovesOnlyRegularSpillFiles) {
  const std::string dir = MakeTempDir("qr-spill-stale");
  ASSERT_FALSE(dir.empty());
  const std::string outside = MakeTempDir("qr-spill-outside");
  ASSERT_FALSE(outside.empty());
  auto touch = [](const std::string& path) { std::ofstream(path) << "x"; };
  touch(dir + "/etilqs_x");
  touch(dir + "/qr-spill-y");
  touch(dir + "/other.txt");
  touch(dir + "/target");
  touch(outside + "/etilqs_target");
  ASSERT_EQ(::symlink((dir + "/target").c_str(), (dir + "/etilqs_link").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/etilqs_target").c_str(), (dir + "/qr-spill-link").c_str()), 0);
  ASSERT_EQ(::mkdir((dir + "/qr-spill-dir").c_str(), 0700), 0);

  int64_t removed = -1;
  Status st = RemoveStaleSpillFiles(dir, &removed);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(removed, 2);
  namespace fs = std::filesystem;
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir + "/etilqs_x")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir + "/qr-spill-y")));
  EXPECT_TRUE(fs::exists(dir + "/other.txt"));
  EXPECT_TRUE(fs::exists(dir + "/target"));
  EXPECT_TRUE(fs::is_symlink(dir + "/etilqs_link"));
  EXPECT_TRUE(fs::is_symlink(dir + "/qr-spill-link"));
  EXPECT_TRUE(fs::exists(outside + "/etilqs_target"));
  EXPECT_TRUE(fs::is_directory(dir + "/qr-spill-dir"));

  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove_all(outside, ec);
}

TEST(RemoveStaleSpillFilesTest, MissingDirectoryRemovesNothing) {
  int64_t removed = -1;
  Status st = RemoveStaleSpillFiles("/nonexistent/qr-spill-test-dir", &removed);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(removed, 0);
}

}  // namespace
}  // namespace qr
