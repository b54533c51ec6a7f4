// SqliteEngine: column types, values, pages, errors and refused statements
// (sqlite-engine-exec-test.cc: running, cancelling and queueing statements).

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sqlite-engine-test-fixture.h"

namespace qr {
namespace {

using qr::testing::Drain;
using qr::testing::Submit;
using sqlite_engine_test::Json;
using sqlite_engine_test::QueryOutcome;
using sqlite_engine_test::SqliteEngineTest;

TEST_F(SqliteEngineTest, SelectOneAnswersBigintColumnNamedCol0) {
  QueryOutcome out;
  EXPECT_EQ(Rows("SELECT 1", &out), Json::parse("[[1]]"));
  ASSERT_EQ(out.columns.size(), 1u);
  EXPECT_EQ(out.columns[0].name, "_col0");
  EXPECT_EQ(out.columns[0].type, "bigint");
  EXPECT_EQ(out.columns[0].type_signature_json, R"({"rawType":"bigint","arguments":[]})");
  EXPECT_EQ(out.pages, std::vector<std::string>{"[1]"});
}

TEST_F(SqliteEngineTest, DeclaredTypesDecideColumnTypes) {
  QueryOutcome out;
  Json rows = Rows(
      "SELECT l_orderkey, l_quantity, l_returnflag, l_shipdate, l_comment FROM lineitem "
      "ORDER BY l_orderkey, l_linenumber LIMIT 3",
      &out);
  ASSERT_EQ(out.columns.size(), 5u);
  // CHAR(1), DATE, VARCHAR(44) (docs/protocol.md, "Types").
  const char* types[] = {"bigint", "double", "varchar(1)", "date", "varchar(44)"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out.columns[i].type, types[i]) << i;
  EXPECT_EQ(out.columns[1].name, "l_quantity");
  EXPECT_EQ(out.columns[2].type_signature_json,
            R"({"rawType":"varchar","arguments":[{"kind":"LONG","value":1}]})");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0][1].is_number_float());
  EXPECT_EQ(rows[0][3].get<std::string>().size(), 10u) << "dates are 'YYYY-MM-DD' strings";
  EXPECT_NE(out.pages[0].find(".0,"), std::string::npos) << "integral doubles keep a '.0'";
}

TEST_F(SqliteEngineTest, ExpressionColumnsTakeTheTypeOfTheirValues) {
  QueryOutcome out;
  Json rows = Rows("SELECT 1 AS i, 1.5 AS d, 'x' AS t, X'00ff' AS b, NULL AS n", &out);
  ASSERT_EQ(out.columns.size(), 5u);
  const char* types[] = {"bigint", "double", "varchar", "varbinary", "unknown"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out.columns[i].type, types[i]) << i;
  EXPECT_EQ(out.columns[4].type_signature_json, R"({"rawType":"unknown","arguments":[]})");
  EXPECT_EQ(out.columns[3].type_signature_json, R"({"rawType":"varbinary","arguments":[]})");
  EXPECT_EQ(rows, Json::parse(R"([[1, 1.5, "x", "AP8=", null]])"));
}

TEST_F(SqliteEngineTest, FirstNonNullValueDecidesAndNumbersWiden) {
  QueryOutcome out;
  Json rows = Rows(
      "WITH t(x) AS (VALUES (1), (2), (3)) SELECT CASE WHEN x > 1 THEN x END AS late_int, "
      "CASE WHEN x = 3 THEN 2.5 ELSE x END AS int_then_real, "
      "CASE WHEN x = 2 THEN 'two' ELSE x END AS int_then_text FROM t",
      &out);
  ASSERT_EQ(out.columns.size(), 3u);
  EXPECT_EQ(out.columns[0].type, "bigint");
  EXPECT_EQ(out.columns[1].type, "double");
  EXPECT_EQ(out.columns[2].type, "varchar");
  EXPECT_EQ(rows, Json::parse(R"([[null, 1.0, "1"], [2, 2.0, "two"], [3, 2.5, "3"]])"));
  EXPECT_EQ(out.pages[0], R"([null,1.0,"1"],[2,2.0,"two"],[3,2.5,"3"])");
}

TEST_F(SqliteEngineTest, ColumnNullThroughoutTheFirstPageIsUnknownAndKeepsLaterValues) {
  QueryContext ctx;
  ctx.page_max_rows = 2;
  QueryOutcome out = Run(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5) "
      "SELECT CASE WHEN x > 3 THEN x END AS late FROM c",
      ctx);
  ASSERT_FALSE(out.error.has_value());
  ASSERT_EQ(out.columns.size(), 1u);
  EXPECT_EQ(out.columns[0].type, "unknown");
  // Trino's unknown holds only NULL; a later value is sent as it is rather than dropped.
  EXPECT_EQ(out.RowsJson(), "[[null],[null],[null],[4],[5]]");
}

TEST_F(SqliteEngineTest, ValuesOfAnotherStorageClassAreConvertedToTheColumnType) {
  std::unique_ptr<SqliteEngine> engine = MakeEngine(types_path_, 1);
  QueryOutcome out = qr::testing::Run(
      &mgr_, engine.get(), "SELECT i, d, t, b, flag, untyped, odd FROM mixed ORDER BY id");
  ASSERT_FALSE(out.error.has_value()) << out.error->message;
  // 'untyped' and 'odd' (an unknown declared type) take their types from their values:
  // integers and text seen in the first page make varchar.
  const char* types[] = {"bigint", "double", "varchar(10)", "varbinary", "boolean", "varchar",
                         "varchar"};
  ASSERT_EQ(out.columns.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(out.columns[i].type, types[i]) << i;
  // bigint: REAL truncated, TEXT's leading integer, out-of-range REAL clamped (CAST semantics).
  // double: TEXT's leading number. varchar: numbers as SQLite writes them. varbinary: bytes
  // of the text form. boolean: numbers != 0, "true"/"false" in any case.
  EXPECT_EQ(Json::parse(out.RowsJson()), Json::parse(R"([
      [7, 2.5, "a", "AQ==", true, "1", "10"],
      [2, 0.0, "42", "aGk=", true, "x", "y"],
      [12, 1500.0, null, "NDI=", false, null, null],
      [9223372036854775807, 3.0, "2.5", null, false, "2.5", "3"]])"));
}

TEST_F(SqliteEngineTest, DoublesAlwaysLookLikeDoublesAndInfinitiesAreStrings) {
  QueryOutcome out;
  Rows("SELECT CAST(3 AS REAL), 1e999, -1e999, 0.1, 1e300, sum(l_quantity) FROM lineitem "
       "WHERE l_orderkey = 1",
       &out);
  ASSERT_EQ(out.pages.size(), 1u);
  EXPECT_EQ(out.pages[0].rfind(R"([3.0,"Infinity","-Infinity",0.1,1e+300,)", 0), 0u)
      << out.pages[0];
  EXPECT_EQ(out.pages[0].substr(out.pages[0].size() - 3), ".0]") << out.pages[0];
  for (const Column& c : out.columns) EXPECT_EQ(c.type, "double") << c.name;
}

TEST_F(SqliteEngineTest, StringsAreEscapedAndInvalidUtf8IsReplaced) {
  QueryOutcome out;
  Json rows = Rows(
      "SELECT 'q\"b\\s' || char(10) || char(9) || char(1) || 'é€😀', CAST(X'61ff62' AS TEXT)",
      &out);
  EXPECT_EQ(rows[0][0].get<std::string>(), "q\"b\\s\n\t\x01" "é€😀");
  EXPECT_EQ(rows[0][1].get<std::string>(), "a\xEF\xBF\xBD" "b");
  EXPECT_NE(out.pages[0].find(R"(q\"b\\s\u000a\u0009\u0001é€😀)"), std::string::npos)
      << out.pages[0];
}

TEST_F(SqliteEngineTest, UnusableColumnNamesBecomeColN) {
  QueryOutcome out;
  Rows("SELECT 1, 'x', 2 AS two, count(*), NULL, -2.5e3 FROM region", &out);
  std::vector<std::string> names;
  for (const Column& c : out.columns) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"_col0", "_col1", "two", "count(*)", "_col4",
                                             "_col5"}));
}

TEST_F(SqliteEngineTest, VersionFunctionNamesTheServerAndSqlite) {
  Json rows = Rows("SELECT version()");
  const std::string v = rows[0][0].get<std::string>();
  EXPECT_EQ(v.rfind("qr-coordinatord ", 0), 0u) << v;
  EXPECT_NE(v.find("(SQLite 3."), std::string::npos) << v;
}

TEST_F(SqliteEngineTest, PagesHoldAtMostPageMaxRows) {
  QueryContext ctx;
  ctx.page_max_rows = 100;
  for (const char* sql :
       {"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1050) "
        "SELECT x FROM c",
        "SELECT o_orderkey FROM orders WHERE o_orderkey <= 1050 ORDER BY o_orderkey"}) {
    auto q = Submit(&mgr_, engine_.get(), sql, ctx);
    QueryOutcome out = Drain(q);
    ASSERT_FALSE(out.error.has_value()) << out.error->message;
    EXPECT_EQ(q->rows_produced.load(), 1050);
    EXPECT_EQ(q->bytes_produced.load(), 1050 * 8) << "8 bytes per number";
    EXPECT_GT(q->cpu_time_ns.load(), 0);
    ASSERT_EQ(out.page_rows.size(), 11u) << sql;
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out.page_rows[i], 100) << i;
    EXPECT_EQ(out.page_rows[10], 50);
    Json rows = Json::parse(out.RowsJson());
    ASSERT_EQ(rows.size(), 1050u);
    for (int i = 0; i < 1050; ++i) ASSERT_EQ(rows[i][0].get<int64_t>(), i + 1);
  }
}

TEST_F(SqliteEngineTest, PagesHoldAtMostPageMaxBytesPlusOneRow) {
  QueryContext ctx;
  ctx.page_max_bytes = 4096;
  QueryOutcome out = Run("SELECT l_comment, l_shipmode FROM lineitem LIMIT 5000", ctx);
  ASSERT_FALSE(out.error.has_value());
  ASSERT_GT(out.pages.size(), 10u);
  int64_t rows = 0;
  for (size_t i = 0; i < out.pages.size(); ++i) {
    EXPECT_LT(out.pages[i].size(), 4096u + 128) << i;
    rows += out.page_rows[i];
  }
  EXPECT_EQ(rows, 5000);
}

TEST_F(SqliteEngineTest, SyntaxErrorsCarryLineAndColumn) {
  QueryError e = Fails("SELECT 1\nFROM lineitem\nWHERE WHERE", 1);
  EXPECT_EQ(e.name, "SYNTAX_ERROR");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.column, 7);
  EXPECT_NE(e.message.find("line 3:7: near \"WHERE\": syntax error"), std::string::npos)
      << e.message;
  e = Fails("SELEC 1", 1);
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 1);
  e = Fails("SELECT * FROM lineitem WHERE  ", 1);
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 28) << "an incomplete statement points at its last character";
  e = Fails("SELECT 'é', \"x", 1);
  EXPECT_EQ(e.column, 13) << "columns count characters, not bytes";
}

// Found by statement-fuzzer: SQLite stops at a NUL byte without consuming it, and the loop
// that skips empty statements spun forever on one (the executor thread was lost).
TEST_F(SqliteEngineTest, NulByteWhereAStatementStartsIsASyntaxError) {
  QueryError e = Fails(std::string("\0SELECT 1", 9), 1);
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 1);
  e = Fails(std::string(" ;\n\0INSERT INTO region VALUES (9, 'x', 'y')", 43), 1);
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 1);
  EXPECT_NE(e.message.find("NUL"), std::string::npos) << e.message;
  EXPECT_EQ(Rows("SELECT 1").size(), 1u) << "the executor thread is still there";
}

// Found by statement-fuzzer: one huge value (SELECT zeroblob(1e8)) bypassed the result
// buffer's memory bound; values are capped at --max_value_mb (2 MiB by default).
TEST_F(SqliteEngineTest, HugeValuesFailWithInsufficientResources) {
  const int64_t refusals = ValueLimitRefusals();
  QueryError e = Fails("SELECT zeroblob(2097153)", 131072);
  EXPECT_EQ(e.name, "GENERIC_INSUFFICIENT_RESOURCES");
  EXPECT_NE(e.message.find("at most 2.0 MiB (--max_value_mb)"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("too big"), std::string::npos) << e.message;
  EXPECT_EQ(ValueLimitRefusals(), refusals + 1);
  // The limit holds for values built step by step too, and for the rows of a sort.
  e = Fails("SELECT length(printf('%.*c', 1048576, 'a') || printf('%.*c', 1048577, 'b'))",
            131072);
  EXPECT_NE(e.message.find("--max_value_mb"), std::string::npos) << e.message;
  e = Fails("SELECT x FROM (SELECT zeroblob(1048576) AS x, zeroblob(1048576) AS y) ORDER BY y",
            131072);
  EXPECT_NE(e.message.find("--max_value_mb"), std::string::npos) << e.message;
  EXPECT_EQ(Rows("SELECT length(zeroblob(2097152))")[0][0], 2097152);
}

TEST_F(SqliteEngineTest, TheValueLimitIsAnOption) {
  SqliteEngine::Options options{sample_path_, 1};
  options.max_value_bytes = int64_t{1} << 20;
  ASSERT_TRUE(SqliteEngine::Create(options, &engine_).ok());
  QueryError e = Fails("SELECT zeroblob(1048577)", 131072);
  EXPECT_NE(e.message.find("at most 1.0 MiB (--max_value_mb)"), std::string::npos) << e.message;
  EXPECT_EQ(Rows("SELECT length(zeroblob(1048576))")[0][0], 1048576);
  options.max_value_bytes = int64_t{16} << 20;
  ASSERT_TRUE(SqliteEngine::Create(options, &engine_).ok());
  EXPECT_EQ(Rows("SELECT length(zeroblob(16777216))")[0][0], 16777216);
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{1000000001}}) {
    options.max_value_bytes = bad;
    std::unique_ptr<SqliteEngine> refused;
    Status st = SqliteEngine::Create(options, &refused);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("value size limit"), std::string::npos) << st.message();
  }
}

TEST_F(SqliteEngineTest, MissingTableAndColumnHaveTheirOwnCodes) {
  QueryError e = Fails("SELECT * FROM nosuch", 46);
  EXPECT_EQ(e.name, "TABLE_NOT_FOUND");
  EXPECT_NE(e.message.find("no such table: nosuch"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("lineitem"), std::string::npos) << "lists the tables: " << e.message;
  e = Fails("SELECT nocol FROM region", 47);
  EXPECT_EQ(e.name, "COLUMN_NOT_FOUND");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 8);
  Fails("SELECT nofunc(1)", 0);
}

TEST_F(SqliteEngineTest, WritesAttachPragmaWritesAndExtensionsAreRefused) {
  const std::string other = dir_->path() + "/other.db";
  for (const std::string& sql : std::vector<std::string>{
           "INSERT INTO region VALUES (9, 'x', 'y')", "CREATE TABLE t (x)",
           "CREATE TEMP VIEW v AS SELECT 1", "DELETE FROM region",
           "UPDATE region SET r_name = 'x'", "DROP TABLE region", "ALTER TABLE region ADD x",
           "CREATE INDEX i ON region (r_name)", "ATTACH '" + other + "' AS o", "DETACH main",
           "PRAGMA user_version = 5", "PRAGMA query_only = 0", "PRAGMA writable_schema = 1",
           "SELECT load_extension('libm')", "BEGIN", "VACUUM", "VACUUM INTO '" + other + "'",
           "REINDEX", "ANALYZE", "UPDATE sqlite_master SET sql = ''"}) {
    QueryError e = Fails(sql, 4);
    EXPECT_EQ(e.name, "PERMISSION_DENIED");
    EXPECT_NE(e.message.find("read-only"), std::string::npos) << sql << ": " << e.message;
  }
  EXPECT_NE(Fails("SELECT load_extension('libm')", 4).message.find("load_extension()"),
            std::string::npos);
  EXPECT_NE(Fails("INSERT INTO region VALUES (9, 'x', 'y')", 4).message.find("INSERT into region"),
            std::string::npos);
  EXPECT_EQ(Rows("SELECT count(*) FROM region"), Json::parse("[[5]]"));
  EXPECT_FALSE(std::filesystem::exists(other)) << "nothing was written";
}

TEST_F(SqliteEngineTest, ReadOnlyPragmasWork) {
  EXPECT_EQ(Rows("PRAGMA table_info(lineitem)").size(), 16u);
  EXPECT_EQ(Rows("PRAGMA user_version"), Json::parse("[[0]]"));
  EXPECT_EQ(Rows("SELECT name FROM pragma_table_info('region') ORDER BY cid"),
            Json::parse(R"([["r_regionkey"], ["r_name"], ["r_comment"]])"));
}

TEST_F(SqliteEngineTest, OnlyOneStatementPerQuery) {
  QueryError e = Fails("SELECT 1; SELECT 2", 13);
  EXPECT_EQ(e.name, "NOT_SUPPORTED");
  EXPECT_NE(e.message.find("one statement"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("line 1, column 11"), std::string::npos) << e.message;
  e = Fails("SELECT 1; -- one\n/* two */ DROP TABLE region", 13);
  EXPECT_NE(e.message.find("line 2, column 11"), std::string::npos) << e.message;
  EXPECT_EQ(Rows("SELECT 1; -- done\n ; /* really */ "), Json::parse("[[1]]"));
  EXPECT_EQ(Rows(";; SELECT 2;"), Json::parse("[[2]]"));
  EXPECT_NE(Fails("  ; -- nothing", 0).message.find("empty"), std::string::npos);
}

// Trino statements SQLite's dialect lacks fail with NOT_SUPPORTED naming what to use
// instead (they used to be "near \"SHOW\": syntax error"); SQLite's own statements and
// plain syntax errors are unaffected.
TEST_F(SqliteEngineTest, TrinoOnlyStatementsAreNotSupportedWithAnAlternative) {
  const std::pair<const char*, const char*> cases[] = {
      {"SHOW CREATE TABLE lineitem", "SHOW TABLES"},
      {"  /* c */ show stats for lineitem", "sqlite_schema"},
      {"USE sqlite.main", "one schema"},
      {"SET SESSION query_max_execution_time = '1m'", "SET SESSION"},
      {"RESET SESSION query_max_execution_time", "RESET SESSION"},
      {"PREPARE st FROM SELECT ?", "literals"},
      {"EXECUTE IMMEDIATE 'SELECT ?' USING 1", "EXECUTE IMMEDIATE"},
      {"DEALLOCATE PREPARE st", "literals"},
      {"START TRANSACTION", "read-only snapshot"},
      {"CALL system.runtime.kill_query(query_id => 'x')", "as a statement of its own"},
      {"EXPLAIN ANALYZE SELECT 1", "Use EXPLAIN"},
  };
  for (const auto& [sql, hint] : cases) {
    QueryError e = Fails(sql, 13);
    EXPECT_EQ(e.name, "NOT_SUPPORTED") << sql;
    EXPECT_NE(e.message.find(hint), std::string::npos) << sql << ": " << e.message;
    EXPECT_NE(e.message.find("SQLite's SQL dialect"), std::string::npos) << e.message;
  }
  EXPECT_EQ(Fails("SHOWW TABLES", 1).name, "SYNTAX_ERROR");
  EXPECT_EQ(Fails("SELECT FROM", 1).name, "SYNTAX_ERROR");
  EXPECT_EQ(Rows("SELECT count(*) > 0 FROM pragma_table_info('lineitem')"),
            Json::parse("[[1]]"));
}

// Trino expressions SQLite cannot parse: NOT_SUPPORTED naming the feature and the
// alternative, at the construct's position; a table in another catalog: CATALOG_NOT_FOUND.
TEST_F(SqliteEngineTest, TrinoOnlyExpressionsAreNotSupportedWithAnAlternative) {
  struct Case {
    const char* sql;
    const char* hint;
    int line, column;
  };
  const Case cases[] = {
      {"SELECT x FROM UNNEST(ARRAY[1, 2]) AS t(x)", "json_each", 1, 15},
      {"SELECT ARRAY[1, 2]", "json_array", 1, 8},
      {"SELECT TRY_CAST('1' AS INTEGER)", "CAST", 1, 8},
      {"SELECT date('2024-01-01') +\n  INTERVAL '1' DAY", "date(d, '+1 day')", 2, 3},
      {"SELECT ROW(1, 2)", "row value", 1, 8},
      {"SELECT MAP(ARRAY['a'], ARRAY[1])", "json_object", 1, 8},
  };
  for (const Case& c : cases) {
    QueryError e = Fails(c.sql, 13);
    EXPECT_EQ(e.name, "NOT_SUPPORTED") << c.sql;
    EXPECT_NE(e.message.find(c.hint), std::string::npos) << c.sql << ": " << e.message;
    EXPECT_EQ(e.line, c.line) << c.sql;
    EXPECT_EQ(e.column, c.column) << c.sql;
  }
  QueryError other = Fails("SELECT * FROM hive.default.orders", 44);
  EXPECT_EQ(other.name, "CATALOG_NOT_FOUND");
  EXPECT_NE(other.message.find("'hive' does not exist"), std::string::npos) << other.message;
  EXPECT_EQ(other.column, 15);
  // The location is in the statement as sent, before catalog names are rewritten.
  // (SQLite sees "main.nation": the rewritten text would put ARRAY at column 33.)
  QueryError after_rewrite = Fails("SELECT * FROM sqlite.main.nation WHERE ARRAY[1]", 13);
  EXPECT_EQ(after_rewrite.column, 40) << after_rewrite.message;
  // So is SQLite's own error location.
  QueryError missing = Fails("SELECT * FROM sqlite.main.nation WHERE nope = 1", 47);
  EXPECT_EQ(missing.column, 40) << missing.message;
  // Our own catalog's three-part name runs; ARRAY as a name, or inside a string, stays SQLite's.
  EXPECT_EQ(Rows("SELECT count(*) > 0 FROM sqlite.main.nation"), Json::parse("[[1]]"));
  EXPECT_EQ(Rows("SELECT 'ARRAY[1]' AS array"), Json::parse(R"([["ARRAY[1]"]])"));
  EXPECT_EQ(Fails("SELECT 'ARRAY[1]' FROM", 1).name, "SYNTAX_ERROR");
}

}  // namespace
}  // namespace qr
