// printf/format/json_patch behind their guards: the same results as SQLite's built-ins, and a
// refusal (with the built-in's own error where there is one) for the inputs whose cost the
// built-ins do not bound.

#include "runtime/sqlite-guarded-functions.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace qr {
namespace {

/// The first column of the one row of 'sql' as text ("NULL" for NULL, "error: <msg>").
std::string Eval(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return std::string("error: ") + sqlite3_errmsg(db);
  }
  std::string out;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(stmt, 0);
    out = std::string(sqlite3_column_type(stmt, 0) == SQLITE_NULL ? "NULL" : "") +
          (text != nullptr ? reinterpret_cast<const char*>(text) : "");
  } else {
    out = std::string("error: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  return out;
}

class GuardedBuiltinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &guarded_), SQLITE_OK);
    ASSERT_EQ(sqlite3_open(":memory:", &plain_), SQLITE_OK);
    for (sqlite3* db : {guarded_, plain_}) sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
    ASSERT_TRUE(GuardedBuiltins::Register(guarded_, &builtins_).ok());
  }
  void TearDown() override {
    sqlite3_close(guarded_);
    builtins_.reset();
    sqlite3_close(plain_);
  }
  sqlite3* guarded_ = nullptr;
  sqlite3* plain_ = nullptr;
  std::unique_ptr<GuardedBuiltins> builtins_;
};

TEST_F(GuardedBuiltinsTest, PrintfAndFormatAnswerAsTheBuiltins) {
  for (const char* args :
       {"'%d', 42", "'%5.2f|%-6s|', 3.14159, 'ab'", "'%.*c', 5, 'x'", "'%*d', -6, 7",
        "'100%% %s', NULL", "'%,d', 1234567", "'%q', 'it''s'", "'%d %d', 1", "'%', 1",
        "'%lld', 3000000000", "NULL", "'%s', x'414243'", "'%.3s', 'abcdef'", "'%!.2f', 1.0",
        "'%c%c', 'ab', 'cd'", "'%010.3f', -2.5", "'%w', 'a\"b'"}) {
    for (const char* fn : {"printf", "format"}) {
      const std::string sql = std::string("SELECT ") + fn + "(" + args + ")";
      EXPECT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
    }
  }
}

TEST_F(GuardedBuiltinsTest, HugeWidthOrPrecisionIsNullAtOnce) {
  // The built-in answers NULL for a result past the length limit, after seconds spent in N.
  EXPECT_EQ(Eval(plain_, "SELECT printf('%.*c', 1048577, 'a')"), "NULL");
  for (const char* sql : {"SELECT printf('%.*c', 2000000000, 'a')",
                          "SELECT format('%*d', 2000000000, 1)",
                          "SELECT printf('%2000000000c', 'a')",
                          "SELECT printf('%s%.*c', 'x', -2000000000, 'a')"}) {
    EXPECT_EQ(Eval(guarded_, sql), "NULL") << sql;
  }
  // Within the limit, unchanged (and the built-in's own too-big check still applies).
  EXPECT_EQ(Eval(guarded_, "SELECT length(printf('%.*c', 1000, 'a'))"), "1000");
  EXPECT_EQ(Eval(guarded_, "SELECT printf('%.*c', 1048577, 'a')"),
            Eval(plain_, "SELECT printf('%.*c', 1048577, 'a')"));
}

TEST_F(GuardedBuiltinsTest, LargestPrintfWidthFollowsThePrintfSyntax) {
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(plain_, "SELECT 5, 7, 3000000000, -9", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  sqlite3_value* v[4];
  for (int i = 0; i < 4; ++i) v[i] = sqlite3_column_value(stmt, i);
  EXPECT_EQ(LargestPrintfWidth("%*.*d", 3, v), 7);
  EXPECT_EQ(LargestPrintfWidth("%%%d", 3, v + 2), 0) << "a %d argument is a value, not a width";
  EXPECT_EQ(LargestPrintfWidth("%d%*c", 3, v + 1), 3000000000) << "the '*' takes the 2nd argument";
  EXPECT_EQ(LargestPrintfWidth("%d%*c", 4, v), 7);
  EXPECT_EQ(LargestPrintfWidth("%-12.40s", 0, v), 40);
  EXPECT_EQ(LargestPrintfWidth("%*d", 1, v + 3), 9);
  EXPECT_EQ(LargestPrintfWidth("%*d", 0, v), 0) << "a missing argument is 0";
  sqlite3_finalize(stmt);
}

TEST_F(GuardedBuiltinsTest, JsonPatchAnswersAsTheBuiltinOrRefusesQuadraticWork) {
  for (const char* sql : {"SELECT json_patch('{\"a\":1,\"b\":{\"c\":2}}', '{\"b\":{\"c\":null},\"d\":3}')",
                          "SELECT json_patch('[1,2]', '{\"a\":1}')",
                          "SELECT json_patch(NULL, '{}')", "SELECT json_patch('{', '{}')"}) {
    EXPECT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
  }
  const std::string big =
      "'{' || replace(printf('%.*c', 20000, 'x'), 'x', '\"k\":1,') || '\"z\":1}'";
  const std::string sql = "SELECT length(json_patch(" + big + ", " + big + "))";
  EXPECT_NE(Eval(guarded_, sql).find("json_patch() refused"), std::string::npos)
      << Eval(guarded_, sql);
}

}  // namespace
}  // namespace qr
