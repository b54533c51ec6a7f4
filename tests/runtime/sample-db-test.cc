#include "runtime/sample-db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sqlite-engine.h"
#include "runtime-test-util.h"

namespace qr {
namespace {

using qr::testing::ScopedTempDir;

/// A read-only sqlite3 connection for checking a generated file independently of the engine.
class Db {
 public:
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  ~Db() { sqlite3_close(db_); }
  /// Calls 'fn' for every row of 'sql'.
  template <typename Fn>
  void ForEachRow(const std::string& sql, Fn fn) {
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) fn(s);
    EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(s);
  }
  int64_t Count(const std::string& table) {
    int64_t n = -1;
    ForEachRow("SELECT count(*) FROM " + table, [&](sqlite3_stmt* s) {
      n = sqlite3_column_int64(s, 0);
    });
    return n;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::string Generate(const std::string& dir, double scale = 0.01) {
  std::string path;
  Status st = EnsureSampleDatabase(dir, scale, &path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

/// FNV-1a over the storage class and bytes of every value of every table, in rowid order.
uint64_t ContentChecksum(const std::string& path) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ULL;
  };
  Db db(path);
  for (const char* table : {"region", "nation", "customer", "orders", "lineitem"}) {
    db.ForEachRow(std::string("SELECT * FROM ") + table + " ORDER BY rowid", [&](sqlite3_stmt* s) {
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const int type = sqlite3_column_type(s, i);
        mix(&type, sizeof(type));
        const unsigned char* text = sqlite3_column_text(s, i);
        mix(text, sqlite3_column_bytes(s, i));
      }
    });
  }
  return h;
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(SampleDbTest, LeftoversOfInterruptedGenerationsAreRemovedButNotARunningOne) {
  ScopedTempDir dir;
  const std::string d = dir.path();
  for (const char* name : {".tpch-sf0.001.db.AbC123", ".tpch-sf0.001.db.AbC123-journal",
                           ".tpch-sf0.01.db.zzzzzz", ".tpch-sf0.01.db.running", "keep.txt",
                           "tpch-sf0.001.db.orphan"}) {
    std::ofstream(d + "/" + name) << "x";
  }
  // A generation in progress (another process) holds a lock on its file.
  const int running = ::open((d + "/.tpch-sf0.01.db.running").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(running, 0);
  ASSERT_EQ(::flock(running, LOCK_EX), 0);
  EXPECT_EQ(qr::RemoveStaleGenerations(d), 3);
  ::close(running);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".tpch-sf0.01.db.running", "keep.txt",
                                            "tpch-sf0.001.db.orphan"}));
}

TEST(SampleDbTest, RowCountsFollowTheScaleFactor) {
  ScopedTempDir dir;
  const std::string path = Generate(dir.path());
  EXPECT_EQ(path, dir.path() + "/tpch-sf0.01.db");
  Db db(path);
  EXPECT_EQ(db.Count("region"), 5);
  EXPECT_EQ(db.Count("nation"), 25);
  EXPECT_EQ(db.Count("customer"), 1500);
  EXPECT_EQ(db.Count("orders"), 15000);
  const int64_t lineitems = db.Count("lineitem");
  EXPECT_GT(lineitems, 57000) << "1..7 lines per order: about 4 * 15000";
  EXPECT_LT(lineitems, 63000);
  int64_t bad = -1;
  db.ForEachRow(
      "SELECT count(*) FROM lineitem l LEFT JOIN orders o ON l.l_orderkey = o.o_orderkey "
      "WHERE o.o_orderkey IS NULL OR l.l_linenumber NOT BETWEEN 1 AND 7 OR "
      "l.l_shipdate NOT GLOB '199[2-9]-[01][0-9]-[0-3][0-9]' OR l.l_receiptdate <= l.l_shipdate",
      [&](sqlite3_stmt* s) { bad = sqlite3_column_int64(s, 0); });
  EXPECT_EQ(bad, 0);
  // Only the database is left in the directory: the temporary file was renamed.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "tpch-sf0.01.db");
  }
  EXPECT_EQ(files, 1);
}

TEST(SampleDbTest, HasTpchColumnNamesAndTypes) {
  ScopedTempDir dir;
  Db db(Generate(dir.path(), 0.001));
  std::vector<std::string> columns;
  db.ForEachRow("PRAGMA table_info(lineitem)", [&](sqlite3_stmt* s) {
    columns.push_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 1))) +
                      " " + reinterpret_cast<const char*>(sqlite3_column_text(s, 2)));
  });
  EXPECT_EQ(columns, (std::vector<std::string>{
                         "l_orderkey INTEGER", "l_partkey INTEGER", "l_suppkey INTEGER",
                         "l_linenumber INTEGER", "l_quantity DOUBLE", "l_extendedprice DOUBLE",
                         "l_discount DOUBLE", "l_tax DOUBLE", "l_returnflag CHAR(1)",
                         "l_linestatus CHAR(1)", "l_shipdate DATE", "l_commitdate DATE",
                         "l_receiptdate DATE", "l_shipinstruct CHAR(25)", "l_shipmode CHAR(10)",
                         "l_comment VARCHAR(44)"}));
  std::vector<std::string> names;
  for (const char* table : {"region", "nation", "customer", "orders"}) {
    db.ForEachRow(std::string("PRAGMA table_info(") + table + ")", [&](sqlite3_stmt* s) {
      names.push_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
    });
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "r_regionkey", "r_name", "r_comment", "n_nationkey", "n_name",
                       "n_regionkey", "n_comment", "c_custkey", "c_name", "c_address",
                       "c_nationkey", "c_phone", "c_acctbal", "c_mktsegment", "c_comment",
                       "o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate",
                       "o_orderpriority", "o_clerk", "o_shippriority", "o_comment"}));
}

TEST(SampleDbTest, GenerationIsDeterministic) {
  ScopedTempDir a, b;
  const uint64_t first = ContentChecksum(Generate(a.path()));
  EXPECT_EQ(first, ContentChecksum(Generate(b.path())));
  ScopedTempDir c;
  EXPECT_NE(first, ContentChecksum(Generate(c.path(), 0.001))) << "another scale, other data";
}

TEST(SampleDbTest, DataIsTheSameWithEveryCompilerAndLibrary) {
  // Golden values: a change here means every existing sample database gets different data
  // (bump kGeneratorVersion in sample-db.cc when that is intended).
  ScopedTempDir dir;
  EXPECT_EQ(ContentChecksum(Generate(dir.path(), 0.001)), 0x158d1eb7ee5ab3ffULL);
}

TEST(SampleDbTest, AggregateThroughTheEngineMatchesAnIndependentScan) {
  ScopedTempDir dir;
  const std::string path = Generate(dir.path());
  struct Agg {
    int64_t count = 0;
    double quantity = 0;
  };
  std::map<std::string, Agg> expected;
  Db(path).ForEachRow("SELECT l_returnflag, l_quantity FROM lineitem", [&](sqlite3_stmt* s) {
    Agg& agg = expected[reinterpret_cast<const char*>(sqlite3_column_text(s, 0))];
    ++agg.count;
    agg.quantity += sqlite3_column_double(s, 1);
  });
  ASSERT_EQ(expected.size(), 3u) << "flags A, N and R";

  QueryExecMgr mgr(4);  // outlives the engine, which releases its references last
  std::unique_ptr<SqliteEngine> engine;
  ASSERT_TRUE(SqliteEngine::Create({path, 1}, &engine).ok());
  qr::testing::QueryOutcome out = qr::testing::Run(
      &mgr, engine.get(),
      "SELECT l_returnflag, count(*), sum(l_quantity) FROM lineitem GROUP BY l_returnflag "
      "ORDER BY l_returnflag");
  ASSERT_TRUE(out.ended);
  ASSERT_FALSE(out.error.has_value()) << out.error->message;
  nlohmann::json rows = nlohmann::json::parse(out.RowsJson());
  ASSERT_EQ(rows.size(), expected.size());
  size_t i = 0;
  for (const auto& [flag, agg] : expected) {
    EXPECT_EQ(rows[i][0].get<std::string>(), flag);
    EXPECT_EQ(rows[i][1].get<int64_t>(), agg.count) << flag;
    EXPECT_EQ(rows[i][2].get<double>(), agg.quantity) << flag << ": whole numbers sum exactly";
    ++i;
  }
}

TEST(SampleDbTest, AValidDatabaseIsReused) {
  ScopedTempDir dir;
  const std::string path = Generate(dir.path(), 0.001);
  const ino_t inode = Inode(path);
  EXPECT_EQ(Generate(dir.path(), 0.001), path);
  EXPECT_EQ(Inode(path), inode) << "not regenerated";
}

TEST(SampleDbTest, ACorruptOrForeignFileIsRegenerated) {
  ScopedTempDir dir;
  const std::string path = Generate(dir.path(), 0.001);
  const uint64_t checksum = ContentChecksum(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_EQ(Generate(dir.path(), 0.001), path);
  EXPECT_EQ(ContentChecksum(path), checksum);

  std::ofstream(path, std::ios::trunc) << "not a database";
  Generate(dir.path(), 0.001);
  EXPECT_EQ(ContentChecksum(path), checksum);

  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE region (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  Generate(dir.path(), 0.001);
  EXPECT_EQ(ContentChecksum(path), checksum) << "a database without our metadata is replaced";
}

TEST(SampleDbTest, ErrorsNameThePathAndTheReason) {
  ScopedTempDir dir;
  const std::string file = dir.path() + "/plain-file";
  std::ofstream(file) << "x";
  std::string path;
  Status st = EnsureSampleDatabase(file + "/sub", 0.01, &path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(file + "/sub"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Not a directory"), std::string::npos) << st.message();

  st = EnsureSampleDatabase(file, 0.01, &path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a directory"), std::string::npos) << st.message();

  for (double bad : {0.0, -1.0, 1e9}) {
    st = EnsureSampleDatabase(dir.path(), bad, &path);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("scale factor"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace qr
