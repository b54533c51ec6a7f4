#include "runtime/trino-literal.h"

#include <sqlite3.h>

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

std::vector<SqlParameter> Parse(const std::string& text) {
  std::vector<SqlParameter> out;
  QueryError error;
  EXPECT_TRUE(ParseParameterList(text, &out, &error)) << text << ": " << error.message;
  return out;
}

QueryError ParseError(const std::string& text) {
  std::vector<SqlParameter> out;
  QueryError error;
  EXPECT_FALSE(ParseParameterList(text, &out, &error)) << text;
  return error;
}

TEST(TrinoLiteralTest, ParsesNumbersBooleansAndNull) {
  std::vector<SqlParameter> p = Parse("3, -42, +7, 1.5, 1e3, -2.5E-1, true, FALSE, NULL");
  ASSERT_EQ(p.size(), 9u);
  EXPECT_EQ(p[0].kind, SqlParameter::Kind::kInteger);
  EXPECT_EQ(p[0].integer, 3);
  EXPECT_EQ(p[0].type, "bigint");
  EXPECT_EQ(p[1].integer, -42);
  EXPECT_EQ(p[2].integer, 7);
  EXPECT_EQ(p[3].kind, SqlParameter::Kind::kDouble);
  EXPECT_DOUBLE_EQ(p[3].real, 1.5);
  EXPECT_EQ(p[3].type, "decimal");
  EXPECT_DOUBLE_EQ(p[4].real, 1000);
  EXPECT_EQ(p[4].type, "double");
  EXPECT_DOUBLE_EQ(p[5].real, -0.25);
  EXPECT_EQ(p[6].kind, SqlParameter::Kind::kInteger);
  EXPECT_EQ(p[6].integer, 1);
  EXPECT_EQ(p[6].type, "boolean");
  EXPECT_EQ(p[7].integer, 0);
  EXPECT_EQ(p[8].kind, SqlParameter::Kind::kNull);
}

TEST(TrinoLiteralTest, IntegerBeyondBigintIsADecimal) {
  std::vector<SqlParameter> p = Parse("99999999999999999999");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, SqlParameter::Kind::kDouble);
  EXPECT_EQ(p[0].type, "decimal");
  EXPECT_EQ(ParseError("BIGINT '99999999999999999999'").name, "INVALID_LITERAL");
}

TEST(TrinoLiteralTest, TypedIntegersAreRangeChecked) {
  std::vector<SqlParameter> p = Parse("INTEGER '2147483647', SMALLINT '-32768', TINYINT '127', "
                                      "INT '-2147483648', DECIMAL '1.5'");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].integer, 2147483647);
  EXPECT_EQ(p[1].integer, -32768);
  EXPECT_EQ(p[2].integer, 127);
  EXPECT_EQ(p[3].integer, -2147483648LL);
  for (const char* text : {"INTEGER '2147483648'", "INT '-2147483649'", "SMALLINT '100000'",
                           "SMALLINT '32768'", "TINYINT '300'", "TINYINT '-129'",
                           "DECIMAL '1e5'"}) {
    EXPECT_EQ(ParseError(text).name, "INVALID_LITERAL") << text;
  }
}

TEST(TrinoLiteralTest, AtMostKMaxParametersAndNoneKeptOnAnError) {
  std::string text = "1";
  for (size_t i = 1; i < kMaxParameters; ++i) text += ",1";
  EXPECT_EQ(Parse(text).size(), kMaxParameters);
  const QueryError too_many = ParseError(text + ",1");
  EXPECT_EQ(too_many.name, "INVALID_PARAMETER_USAGE");
  EXPECT_NE(too_many.message.find("at most 32766"), std::string::npos) << too_many.message;
  // A failed list keeps nothing of what it parsed (the plan is kept with the query).
  for (const std::string& bad : {text + ",1", std::string("1, 2, 3 junk"), std::string("1, ARRAY[1]")}) {
    std::vector<SqlParameter> out;
    QueryError error;
    EXPECT_FALSE(ParseParameterList(bad, &out, &error));
    EXPECT_TRUE(out.empty()) << bad.substr(0, 20);
  }
}

TEST(TrinoLiteralTest, ParsesStringsWithDoubledQuotes) {
  std::vector<SqlParameter> p = Parse("'it''s', '', 'a,b', 'héllo'");
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].kind, SqlParameter::Kind::kText);
  EXPECT_EQ(p[0].bytes, "it's");
  EXPECT_EQ(p[0].type, "varchar");
  EXPECT_EQ(p[1].bytes, "");
  EXPECT_EQ(p[2].bytes, "a,b");
  EXPECT_EQ(p[3].bytes, "héllo");
}

TEST(TrinoLiteralTest, ParsesTypedLiteralsThePythonClientSends) {
  std::vector<SqlParameter> p = Parse(
      "DATE '2024-02-29', TIMESTAMP '2024-01-02 03:04:05.123456', TIME '10:11:12.500000', "
      "DECIMAL '12.50', DOUBLE '0.1', X'00ff10', UUID '12345678-1234-1234-1234-1234567890AB', "
      "infinity(), -infinity(), nan(), BIGINT '-5', varchar 'v'");
  ASSERT_EQ(p.size(), 12u);
  EXPECT_EQ(p[0].kind, SqlParameter::Kind::kText);
  EXPECT_EQ(p[0].bytes, "2024-02-29");
  EXPECT_EQ(p[0].type, "date");
  EXPECT_EQ(p[1].bytes, "2024-01-02 03:04:05.123456");
  EXPECT_EQ(p[1].type, "timestamp");
  EXPECT_EQ(p[2].type, "time");
  EXPECT_EQ(p[3].kind, SqlParameter::Kind::kDouble);
  EXPECT_DOUBLE_EQ(p[3].real, 12.5);
  EXPECT_EQ(p[3].type, "decimal");
  EXPECT_DOUBLE_EQ(p[4].real, 0.1);
  EXPECT_EQ(p[5].kind, SqlParameter::Kind::kBlob);
  EXPECT_EQ(p[5].bytes, std::string("\x00\xff\x10", 3));
  EXPECT_EQ(p[6].bytes, "12345678-1234-1234-1234-1234567890ab");
  EXPECT_TRUE(std::isinf(p[7].real) && p[7].real > 0);
  EXPECT_TRUE(std::isinf(p[8].real) && p[8].real < 0);
  EXPECT_TRUE(std::isnan(p[9].real));
  EXPECT_EQ(p[10].kind, SqlParameter::Kind::kInteger);
  EXPECT_EQ(p[10].integer, -5);
  EXPECT_EQ(p[11].bytes, "v");
}

TEST(TrinoLiteralTest, ParsesTheTypedNullsTheJdbcDriverSends) {
  std::vector<SqlParameter> p = Parse(
      "CAST(NULL AS VARCHAR), cast ( null as decimal(10, 2) ), "
      "CAST(NULL AS TIMESTAMP(3) WITH TIME ZONE), 7");
  ASSERT_EQ(p.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p[i].kind, SqlParameter::Kind::kNull) << i;
  EXPECT_EQ(p[0].type, "varchar");
  EXPECT_EQ(p[1].type, "decimal");
  EXPECT_EQ(p[2].type, "timestamp");
  EXPECT_EQ(p[3].integer, 7);
  // Only NULL may be cast; anything else is an expression, which parameters are not.
  EXPECT_EQ(ParseError("CAST(1 AS VARCHAR)").name, "NOT_SUPPORTED");
  EXPECT_EQ(ParseError("CAST(NULL AS VARCHAR").name, "NOT_SUPPORTED");
  EXPECT_EQ(ParseError("CAST(NULL AS ')')").name, "NOT_SUPPORTED");
}

TEST(TrinoLiteralTest, RejectsMalformedValuesWithTheirReason) {
  EXPECT_EQ(ParseError("DATE '2023-02-29'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("DATE 'yesterday'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("TIMESTAMP '2024-01-02 25:00:00'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("X'abc'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("DECIMAL 'ten'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("INTEGER '1.5'").name, "INVALID_LITERAL");
  EXPECT_EQ(ParseError("UUID 'not-a-uuid'").name, "INVALID_LITERAL");
  const QueryError array = ParseError("1, ARRAY[1,2]");
  EXPECT_EQ(array.name, "NOT_SUPPORTED");
  EXPECT_NE(array.message.find("Parameter 2"), std::string::npos) << array.message;
  EXPECT_EQ(ParseError("MAP(ARRAY['a'], ARRAY[1])").name, "NOT_SUPPORTED");
  EXPECT_EQ(ParseError("1 + 2").name, "SYNTAX_ERROR");
  EXPECT_EQ(ParseError("'open").name, "SYNTAX_ERROR");
  EXPECT_EQ(ParseError("1,").name, "SYNTAX_ERROR");
  EXPECT_EQ(ParseError("").name, "SYNTAX_ERROR");
  EXPECT_EQ(ParseError("nan").name, "SYNTAX_ERROR");
}

/// An in-memory database with a table of three names, and a helper that runs a statement
/// with bound parameters.
class BindParametersTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db_,
                           "CREATE TABLE t (k INTEGER, name TEXT, d DATE);"
                           "INSERT INTO t VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-01-02'),"
                           " (3, 'x', '2024-01-03');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  void TearDown() override { sqlite3_close(db_); }

  /// The rows of 'sql' with the parameters parsed from 'using_text', as "v1|v2;" text.
  std::string Run(const std::string& sql, const std::string& using_text) {
    std::vector<SqlParameter> params;
    QueryError error;
    if (!using_text.empty() && !ParseParameterList(using_text, &params, &error)) {
      return "parse error: " + error.message;
    }
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      return std::string("prepare error: ") + sqlite3_errmsg(db_);
    }
    std::string out;
    if (!BindParameters(stmt, params, &error)) {
      out = error.name + ": " + error.message;
    } else {
      while (sqlite3_step(stmt) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
          const unsigned char* v = sqlite3_column_text(stmt, i);
          if (i > 0) out += "|";
          out += v ? reinterpret_cast<const char*>(v) : "NULL";
        }
        out += ";";
      }
    }
    sqlite3_finalize(stmt);
    return out;
  }

  sqlite3* db_ = nullptr;
};

TEST_F(BindParametersTest, AnInjectionAttemptStaysAValue) {
  // Substituted into the text, this would read WHERE name = 'x' OR 1=1 --' and match all
  // rows; bound, it is one string that matches none.
  EXPECT_EQ(Run("SELECT k FROM t WHERE name = ?", "'x'' OR 1=1 --'"), "");
  EXPECT_EQ(Run("SELECT ?", "'x'' OR 1=1 --'"), "x' OR 1=1 --;");
  EXPECT_EQ(Run("SELECT count(*) FROM t WHERE name = ?", "'x''; DROP TABLE t; --'"), "0;");
  EXPECT_EQ(Run("SELECT count(*) FROM t", ""), "3;");
}

TEST_F(BindParametersTest, BindsEachKindWithItsStorageClass) {
  EXPECT_EQ(Run("SELECT k FROM t WHERE k = ?", "3"), "3;");
  EXPECT_EQ(Run("SELECT typeof(?), typeof(?), typeof(?), typeof(?), typeof(?), typeof(?)",
                "1, 1.5, 'a', X'01', NULL, true"),
            "integer|real|text|blob|null|integer;");
  EXPECT_EQ(Run("SELECT k FROM t WHERE d >= ? ORDER BY k", "DATE '2024-01-02'"), "2;3;");
  EXPECT_EQ(Run("SELECT hex(?)", "X'00ff'"), "00FF;");
}

TEST_F(BindParametersTest, TheNumberOfParametersMustMatch) {
  EXPECT_EQ(Run("SELECT ?", "1, 2").substr(0, 24), "INVALID_PARAMETER_USAGE:");
  EXPECT_NE(Run("SELECT ? + ?", "1").find("expected 2 but found 1"), std::string::npos);
  EXPECT_NE(Run("SELECT ?", "").find("expected 1 but found 0"), std::string::npos);
  EXPECT_NE(Run("SELECT 1", "1").find("expected 0 but found 1"), std::string::npos);
}

}  // namespace
}  // namespace qr
