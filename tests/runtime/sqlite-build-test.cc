// The SQLite the project builds (cmake/sqlite.cmake, scripts/fetch-sqlite.sh): Debian 12's
// library with the same compile options, and the patch that checks sqlite3_interrupt() before
// every opcode (third_party/sqlite/interrupt-before-every-opcode.patch).
#include <sqlite3.h>

#include <cmath>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace qr {
namespace {

struct Db {
  sqlite3* db = nullptr;
  Db() { EXPECT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK); }
  ~Db() { sqlite3_close(db); }
};

TEST(SqliteBuildTest, IsDebiansSqliteWithDebiansCompileOptions) {
  EXPECT_STREQ(sqlite3_libversion(), "3.40.1");
  Db d;
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(d.db, "PRAGMA compile_options", -1, &stmt, nullptr), SQLITE_OK);
  std::set<std::string> options;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    options.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_finalize(stmt);
  // `PRAGMA compile_options` of Debian 12's libsqlite3-0 3.40.1-2+deb12u2, but the compiler.
  const std::set<std::string> debian = {
      "ATOMIC_INTRINSICS=1", "DEFAULT_AUTOVACUUM", "DEFAULT_CACHE_SIZE=-2000",
      "DEFAULT_FILE_FORMAT=4", "DEFAULT_JOURNAL_SIZE_LIMIT=-1", "DEFAULT_MMAP_SIZE=0",
      "DEFAULT_PAGE_SIZE=4096", "DEFAULT_PCACHE_INITSZ=20", "DEFAULT_RECURSIVE_TRIGGERS",
      "DEFAULT_SECTOR_SIZE=4096", "DEFAULT_SYNCHRONOUS=2", "DEFAULT_WAL_AUTOCHECKPOINT=1000",
      "DEFAULT_WAL_SYNCHRONOUS=2", "DEFAULT_WORKER_THREADS=0", "ENABLE_COLUMN_METADATA",
      "ENABLE_DBSTAT_VTAB", "ENABLE_FTS3", "ENABLE_FTS3_PARENTHESIS", "ENABLE_FTS3_TOKENIZER",
      "ENABLE_FTS4", "ENABLE_FTS5", "ENABLE_LOAD_EXTENSION", "ENABLE_MATH_FUNCTIONS",
      "ENABLE_PREUPDATE_HOOK", "ENABLE_RTREE", "ENABLE_SESSION", "ENABLE_STMTVTAB",
      "ENABLE_UNLOCK_NOTIFY", "ENABLE_UPDATE_DELETE_LIMIT", "HAVE_ISNAN",
      "LIKE_DOESNT_MATCH_BLOBS", "MALLOC_SOFT_LIMIT=1024", "MAX_ATTACHED=10", "MAX_COLUMN=2000",
      "MAX_COMPOUND_SELECT=500", "MAX_DEFAULT_PAGE_SIZE=32768", "MAX_EXPR_DEPTH=1000",
      "MAX_FUNCTION_ARG=127", "MAX_LENGTH=1000000000", "MAX_LIKE_PATTERN_LENGTH=50000",
      "MAX_MMAP_SIZE=0x7fff0000", "MAX_PAGE_COUNT=1073741823", "MAX_PAGE_SIZE=65536",
      "MAX_SCHEMA_RETRY=25", "MAX_SQL_LENGTH=1000000000", "MAX_TRIGGER_DEPTH=1000",
      "MAX_VARIABLE_NUMBER=250000", "MAX_VDBE_OP=250000000", "MAX_WORKER_THREADS=8",
      "MUTEX_PTHREADS", "OMIT_LOOKASIDE", "SECURE_DELETE", "SOUNDEX", "SYSTEM_MALLOC",
      "TEMP_STORE=1", "THREADSAFE=1", "USE_URI"};
  std::set<std::string> ours;
  for (const std::string& o : options) {
    if (o.rfind("COMPILER=", 0) != 0) ours.insert(o);
  }
  EXPECT_EQ(ours, debian);
}

/// interrupt_me(): calls sqlite3_interrupt() on its own connection and returns 1.
void InterruptMe(sqlite3_context* ctx, int, sqlite3_value**) {
  sqlite3_interrupt(sqlite3_context_db_handle(ctx));
  sqlite3_result_int(ctx, 1);
}

// A row of many operations on one large value is straight-line code in SQLite's VM: stock
// SQLite checks the interrupt flag only where a loop jumps back, so the row would run to its
// end and be returned. The patched VM stops at the opcode after the interrupt.
TEST(SqliteBuildTest, AnInterruptStopsTheStatementAtTheNextOpcode) {
  Db d;
  ASSERT_EQ(sqlite3_create_function(d.db, "interrupt_me", 0, SQLITE_UTF8, nullptr, &InterruptMe,
                                    nullptr, nullptr),
            SQLITE_OK);
  // x: a 20 KB digit string, in a materialized table; each term loads it into a register
  // that already holds a large enough buffer, twice, and converts both to numbers (no
  // constant of the row is computed before it): nothing allocates,
  // so no check of ours runs in between.
  const std::string with = "WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 20000, '7')) ";
  std::string terms;
  constexpr int kTerms = 1000;
  for (int i = 0; i < kTerms; ++i) terms += ", x + x";
  const std::string sql = with + "SELECT interrupt_me()" + terms + " FROM t";
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(d.db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_INTERRUPT);
  // The row is over 2 * kTerms opcodes; it stopped right after the call.
  EXPECT_LT(sqlite3_stmt_status(stmt, SQLITE_STMTSTATUS_VM_STEP, 0), kTerms / 10);
  sqlite3_finalize(stmt);

  // The flag is cleared once no statement runs: the same statement runs again to its end
  // (the function interrupts at once, so it is left out).
  const std::string uninterrupted = with + "SELECT" + terms.substr(1) + " FROM t";
  ASSERT_EQ(sqlite3_prepare_v2(d.db, uninterrupted.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_GT(sqlite3_stmt_status(stmt, SQLITE_STMTSTATUS_VM_STEP, 0), 2 * kTerms);
  // 20000 digits: past a double's range.
  EXPECT_TRUE(std::isinf(sqlite3_column_double(stmt, kTerms - 1)));
  sqlite3_finalize(stmt);
}

}  // namespace
}  // namespace qr
