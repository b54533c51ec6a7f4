#include "runtime/sqlite-functions.h"

#include <sqlite3.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

/// A connection with the linear-time overrides and one with SQLite's built-ins, so that
/// every test can compare the two on the same SQL.
class SqliteFunctionsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &fast_), SQLITE_OK);
    ASSERT_EQ(sqlite3_open(":memory:", &builtin_), SQLITE_OK);
    ASSERT_TRUE(RegisterLinearTimeFunctions(fast_).ok());
  }
  void TearDown() override {
    sqlite3_close(fast_);
    sqlite3_close(builtin_);
  }

  /// Evaluates 'sql' (one row, one column) with 'params' bound as TEXT, or as BLOB where
  /// 'as_blob' says so; returns "TYPE:value" (BLOB/TEXT values in hex) or "error:message".
  static std::string Eval(sqlite3* db, const std::string& sql,
                          const std::vector<std::string>& params = {},
                          const std::vector<bool>& as_blob = {}) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      return std::string("prepare error:") + sqlite3_errmsg(db);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const int idx = static_cast<int>(i) + 1;
      if (i < as_blob.size() && as_blob[i]) {
        sqlite3_bind_blob64(stmt, idx, params[i].data(), params[i].size(), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_text64(stmt, idx, params[i].data(), params[i].size(), SQLITE_TRANSIENT,
                            SQLITE_UTF8);
      }
    }
    std::string out = sqlite3_step(stmt) == SQLITE_ROW ? Describe(stmt)
                                                       : std::string("error:") + sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    return out;
  }

  static std::string Describe(sqlite3_stmt* stmt) {
    switch (sqlite3_column_type(stmt, 0)) {
      case SQLITE_NULL: return "NULL";
      case SQLITE_INTEGER: return "INTEGER:" + std::to_string(sqlite3_column_int64(stmt, 0));
      case SQLITE_FLOAT: return "FLOAT:" + std::to_string(sqlite3_column_double(stmt, 0));
      case SQLITE_TEXT: return "TEXT:" + Hex(sqlite3_column_text(stmt, 0), stmt);
      default: return "BLOB:" + Hex(sqlite3_column_blob(stmt, 0), stmt);
    }
  }

  static std::string Hex(const void* data, sqlite3_stmt* stmt) {
    static const char kDigits[] = "0123456789abcdef";
    const auto* bytes = static_cast<const unsigned char*>(data);
    std::string out;
    for (int i = 0; i < sqlite3_column_bytes(stmt, 0); ++i) {
      out.push_back(kDigits[bytes[i] >> 4]);
      out.push_back(kDigits[bytes[i] & 0xf]);
    }
    return out;
  }

  void ExpectSameAsBuiltin(const std::string& sql, const std::vector<std::string>& params = {},
                           const std::vector<bool>& as_blob = {}) {
    const std::string expected = Eval(builtin_, sql, params, as_blob);
    EXPECT_EQ(Eval(fast_, sql, params, as_blob), expected) << sql;
  }

  sqlite3* fast_ = nullptr;
  sqlite3* builtin_ = nullptr;
};

TEST_F(SqliteFunctionsTest, InstrMatchesBuiltinOnEdgeCases) {
  const char* kCases[] = {
      "instr(NULL, 'a')", "instr('a', NULL)", "instr(NULL, NULL)", "instr('', '')",
      "instr('abc', '')", "instr('', 'a')", "instr(x'', x'')", "instr(x'00', x'')",
      "instr('abc', 'a')", "instr('abc', 'c')", "instr('abc', 'abc')", "instr('abc', 'abcd')",
      "instr('abc', 'x')", "instr('abcabc', 'ca')", "instr('aaaa', 'aa')",
      "instr(x'616263', x'63')", "instr(x'c3a96263', x'62')", "instr(x'c3a96263', 'b')",
      "instr('\xc3\xa9" "ab', x'62')", "instr('a\xf0\x9f\x98\x80" "b\xf0\x9f\x98\x80" "c', 'c')",
      "instr('\xf0\x9f\x98\x80\xf0\x9f\x98\x80x', '\xf0\x9f\x98\x80x')",
      "instr('\xc3\xa9\xc3\xa9', x'a9')", "instr(x'c3a9c3a9', x'a9')",
      "instr(CAST(x'a9a9' AS TEXT), CAST(x'a9' AS TEXT))",
      "instr(CAST(x'41a9' AS TEXT), CAST(x'a9' AS TEXT))",
      "instr(CAST(x'80808041' AS TEXT), 'A')", "instr(CAST(x'610062' AS TEXT), CAST(x'0062' AS TEXT))",
      "instr(x'610062', x'0062')", "instr(12345, 34)", "instr(12345, '45')", "instr(1.5, '.')",
      "instr('x1.5', 1.5)", "instr(-7, '-')", "instr(12345, 6)", "instr(x'3132', 2)",
  };
  for (const char* expr : kCases) ExpectSameAsBuiltin(std::string("SELECT ") + expr);
}

TEST_F(SqliteFunctionsTest, LengthMatchesBuiltinOnEdgeCases) {
  const char* kCases[] = {
      "length(NULL)", "length('')", "length('abc')", "length('\xc3\xa9')",
      ("length('a\xf0\x9f\x98\x80" "b')"), "length(x'')", "length(x'00ff')", "length(12345)",
      "length(-1.5)", "length(1e300)", "length(zeroblob(5))", "length(zeroblob(1000000))",
      "length(CAST(x'610062' AS TEXT))", "length(CAST(x'80808041' AS TEXT))",
      "length(CAST(x'c0' AS TEXT))", "length(CAST(x'c08080c1' AS TEXT))",
      "length(CAST(x'ff80' AS TEXT))", "length(CAST(x'e282' AS TEXT))",
      "length(CAST(x'41e28241' AS TEXT))", "length(CAST(12 AS TEXT))", "typeof(length(1))",
      "length(printf('%.*c', 70000, 'a') || '\xc3\xa9')",
  };
  for (const char* expr : kCases) ExpectSameAsBuiltin(std::string("SELECT ") + expr);
  // Long texts whose characters straddle the checkpoints' 64 KiB boundaries.
  std::string mixed;
  while (mixed.size() < (size_t{3} << 20)) mixed += "a\xc3\xa9\xf0\x9f\x98\x80\x80";
  ExpectSameAsBuiltin("SELECT length(?1)", {mixed});
  ExpectSameAsBuiltin("SELECT length(?1)", {mixed}, {true});
  ExpectSameAsBuiltin("SELECT length(substr(?1, 2))", {mixed});
}

TEST_F(SqliteFunctionsTest, SubstrMatchesBuiltinOnEdgeCases) {
  const char* kValues[] = {
      "NULL", "''", "'abc'", "'h\xc3\xa9llo\xf0\x9f\x98\x80!'", "x''", "x'00ff10'",
      "zeroblob(3)", "123456", "-1.5", "CAST(x'610062' AS TEXT)", "CAST(x'80c3a9c3' AS TEXT)",
  };
  const char* kStarts[] = {"NULL", "-10", "-3", "-1",  "0",           "1",
                           "2",    "3",   "10", "1.9", "4294967297", "-4294967297",
                           "'2'",  "x'32'"};
  const char* kLengths[] = {"",    ", NULL", ", -10", ", -2", ", -1",         ", 0",
                            ", 1", ", 2",    ", 10",  ", 2.5", ", 4294967298", ", '1'"};
  for (const char* fn : {"substr", "substring"}) {
    for (const char* value : kValues) {
      for (const char* start : kStarts) {
        for (const char* length : kLengths) {
          ExpectSameAsBuiltin(std::string("SELECT ") + fn + "(" + value + ", " + start + length +
                              ")");
        }
      }
    }
  }
  // Long texts whose characters straddle the checkpoints' 64 KiB boundaries.
  std::string mixed;
  while (mixed.size() < (size_t{3} << 20)) mixed += "a\xc3\xa9\xf0\x9f\x98\x80\x80" "bcdefghij";
  for (const char* sql :
       {"SELECT substr(?1, 1000001, 7)", "SELECT substr(?1, -1000000, 9)",
        "SELECT substr(?1, 3, 1500000) = substr(?1, 3)", "SELECT length(substr(?1, 65530))",
        "SELECT substr(?1, -5)", "SELECT substr(?1, 2000000, -100)"}) {
    ExpectSameAsBuiltin(sql, {mixed});
    ExpectSameAsBuiltin(sql, {mixed}, {true});
  }
  EXPECT_EQ(Eval(fast_, "SELECT substr(?1, 1000001, 7)", {mixed}).substr(0, 5), "TEXT:");
}

TEST_F(SqliteFunctionsTest, ReplaceMatchesBuiltinOnEdgeCases) {
  const char* kCases[] = {
      "replace(NULL, 'a', 'b')", "replace('abc', NULL, 'b')", "replace('abc', 'b', NULL)",
      "replace('abc', '', NULL)", "replace('abc', '', 'x')", "replace(12345, '', 'x')",
      "replace(1.5, '', 'x')", "replace(x'6162', '', 'x')", "replace(NULL, '', 'x')",
      "replace('', 'a', 'b')", "replace('aaaa', 'aa', 'b')", "replace('aaa', 'aa', 'b')",
      "replace('aaa', 'a', 'aa')", "replace('abc', 'abc', '')", "replace('abc', 'abcd', 'x')",
      "replace('abcabc', 'c', '\xf0\x9f\x98\x80')", "replace('\xf0\x9f\x98\x80\xf0\x9f\x98\x80', '\xf0\x9f\x98\x80', 'a')",
      "replace('\xc3\xa9', x'a9', 'x')", "replace(12345, 3, 'x')", "replace(12345, 3, 4.5)",
      "replace(1.5, '.', ',')", "replace(x'616263', 'b', 'z')", "replace('abc', x'62', x'7a')",
      "replace('abc', x'0062', 'z')", "replace(CAST(x'610062' AS TEXT), CAST(x'0062' AS TEXT), 'z')",
      "replace('abc', 'x', 'y')", "replace('abab', 'ab', 'ab')", "replace('abc', 'a', '')",
  };
  for (const char* expr : kCases) ExpectSameAsBuiltin(std::string("SELECT ") + expr);
}

TEST_F(SqliteFunctionsTest, ReplaceFailsAsTooBigExactlyWhenTheBuiltinDoes) {
  for (sqlite3* db : {fast_, builtin_}) sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 10);
  const std::vector<std::string> inputs = {"aaaaaaaaa", "aaaaaaaaaa", "aaaaa", "aaaaaa"};
  for (const std::string& x : inputs) {
    for (const char* rep : {"", "b", "bb", "bbb"}) {
      ExpectSameAsBuiltin("SELECT replace(?1, 'a', ?2)", {x, rep});
      ExpectSameAsBuiltin("SELECT replace(?1, 'aa', ?2)", {x, rep});
    }
  }
}

TEST_F(SqliteFunctionsTest, TrimMatchesBuiltinOnEdgeCases) {
  const char* kArgs[] = {
      "NULL, 'a'", "'abc', NULL", "'', 'a'", "'abc', ''", "'  abc  ', ' '", "'xxabcxx', 'x'",
      "'abc', 'abc'", "'abcba', 'ab'", "123321, 1", "12.5, 5", "x'616263', 'a'",
      "'abc', x'61'", "'\xc3\xa9" "a\xc3\xa9', '\xc3\xa9'",
      "'\xf0\x9f\x98\x80" "a\xf0\x9f\x98\x80', '\xf0\x9f\x98\x80'",
      "'\xf0\x9f\x98\x80\xc3\xa9" "a\xc3\xa9\xf0\x9f\x98\x80', 'x\xc3\xa9\xf0\x9f\x98\x80'",
      "'\xc3\xa9', x'a9'", "CAST(x'c3a9a9' AS TEXT), CAST(x'a9' AS TEXT)",
      "CAST(x'c3a9a9' AS TEXT), CAST(x'a9c3a9' AS TEXT)",
      "CAST(x'c3a971' AS TEXT), CAST(x'c37ac3a9' AS TEXT)",
      "CAST(x'c3a9a971' AS TEXT), CAST(x'c3a9c3a9a97a' AS TEXT)",
      "CAST(x'c3a9a971' AS TEXT), CAST(x'c3a9a97ac3a9' AS TEXT)",
      "CAST(x'71c3a9a9' AS TEXT), CAST(x'a9c3a9a9' AS TEXT)",
      "CAST(x'71c3a9a9' AS TEXT), CAST(x'c3a9a97aa9' AS TEXT)",
      "CAST(x'71c3a9a9c3' AS TEXT), CAST(x'c3a9a97aa9c37a' AS TEXT)",
      "'abc', CAST(x'610063' AS TEXT)", "'abc', CAST(x'0061' AS TEXT)", "123, ''",
      "CAST(x'616100' AS TEXT), 'a'", "CAST(x'006161' AS TEXT), CAST(x'00' AS TEXT)",
  };
  const char* kOneArg[] = {
      "NULL", "''", "' '", "'   '", "'  abc  '", "' a b '", "'\t a \n'", "123", "-1.5",
      "x'20612020'", "x'2000'", "CAST(x'2000612020' AS TEXT)", ("'\xc2\xa0" "a\xc2\xa0'"),
  };
  for (const char* fn : {"trim", "ltrim", "rtrim"}) {
    for (const char* args : kArgs) {
      ExpectSameAsBuiltin(std::string("SELECT ") + fn + "(" + args + ")");
    }
    for (const char* arg : kOneArg) {
      ExpectSameAsBuiltin(std::string("SELECT ") + fn + "(" + arg + ")");
    }
  }
}

/// Random strings over bytes that make SQLite's UTF-8 handling matter: ASCII, lead bytes
/// of 2- and 4-byte characters, continuation bytes and whole characters.
std::string RandomText(std::mt19937* rng, int max_len) {
  static const char* kPieces[] = {"a", "b", "\xc3", "\xa9", "\x80", "\xf0", "\xc3\xa9",
                                  "\xf0\x9f\x98\x80", "\xc3\xa9\xa9", "ab", " ", "\x00"};
  std::uniform_int_distribution<int> len_dist(0, max_len);
  std::uniform_int_distribution<int> piece_dist(0, std::size(kPieces) - 1);
  std::string out;
  for (int n = len_dist(*rng); n > 0; --n) {
    const int piece = piece_dist(*rng);
    if (piece == std::size(kPieces) - 1) {
      out.push_back('\0');
    } else {
      out += kPieces[piece];
    }
  }
  return out;
}

TEST_F(SqliteFunctionsTest, RandomInputsMatchBuiltin) {
  std::mt19937 rng(20240601);
  const char* kQueries[] = {"SELECT instr(?1, ?2)", "SELECT replace(?1, ?2, ?3)",
                            "SELECT trim(?1, ?2)", "SELECT ltrim(?1, ?2)",
                            "SELECT rtrim(?1, ?2)", "SELECT length(?1)",
                            "SELECT trim(?1)",      "SELECT ltrim(?1)",
                            "SELECT rtrim(?1)",     "SELECT substr(?1, length(?2) - 2)",
                            "SELECT substr(?1, -length(?2), length(?3) - 1)"};
  for (int i = 0; i < 3000; ++i) {
    const std::vector<std::string> params = {RandomText(&rng, 8), RandomText(&rng, 3),
                                             RandomText(&rng, 2)};
    const std::vector<bool> as_blob = {rng() % 3 == 0, rng() % 3 == 0, rng() % 3 == 0};
    for (const char* sql : kQueries) ExpectSameAsBuiltin(sql, params, as_blob);
  }
}

TEST_F(SqliteFunctionsTest, InstrAndReplaceAreRightOnLargeAdversarialInputs) {
  const size_t kSize = 4 << 20;
  std::string hay(kSize, 'a');
  hay += 'b';
  const std::string needle = std::string(kSize / 2, 'a') + 'b';
  EXPECT_EQ(Eval(fast_, "SELECT instr(?1, ?2)", {hay, needle}),
            "INTEGER:" + std::to_string(kSize / 2 + 1));
  EXPECT_EQ(Eval(fast_, "SELECT instr(?1, ?2)", {hay, needle}, {true, true}),
            "INTEGER:" + std::to_string(kSize / 2 + 1));
  EXPECT_EQ(Eval(fast_, "SELECT instr(?1, ?2 || 'a')", {hay, needle}), "INTEGER:0");
  EXPECT_EQ(Eval(fast_, "SELECT length(replace(?1, ?2, 'xyz'))", {hay, needle}),
            "INTEGER:" + std::to_string(kSize / 2 + 3));
  EXPECT_EQ(Eval(fast_, "SELECT replace(?1, ?2, '') = ?1", {std::string(kSize, 'a'), needle}),
            "INTEGER:1");
  std::string blocks;
  const std::string block = std::string(1000, 'a') + 'b';
  while (blocks.size() + block.size() <= kSize) blocks += block;
  const size_t n_blocks = blocks.size() / block.size();
  EXPECT_EQ(Eval(fast_, "SELECT replace(?1, ?2, 'x') = printf('%.*c', ?3, 'x')",
                 {blocks, block, std::to_string(n_blocks)}),
            "INTEGER:1");
}

bool StopNow(void* /*arg*/, bool /*may_yield*/) { return true; }

TEST_F(SqliteFunctionsTest, LongCallsStopAtTheirFirstCheckpointWhenTold) {
  const std::string hay(1 << 20, 'a');
  const StepCheckpoint checkpoint(&StopNow, nullptr);
  for (const char* sql : {"SELECT instr(?1, 'ab')", "SELECT instr(?1, substr(?1, 2000) || 'b')",
                          "SELECT replace(?1, 'a', 'b')", "SELECT replace(?1, 'a', '')",
                          "SELECT replace(?1, 'b', 'cc')", "SELECT length(?1)",
                          "SELECT trim(?1)", "SELECT rtrim(?1, 'b')", "SELECT ?1 LIKE '%b%'",
                          "SELECT ?1 GLOB '*b*'", "SELECT substr(?1, 1000000, 1)",
                          "SELECT substr(?1, -5)"}) {
    EXPECT_EQ(Eval(fast_, sql, {hay}), "error:interrupted") << sql;
  }
  // A call shorter than one checkpoint's worth of work never reaches one.
  EXPECT_EQ(Eval(fast_, "SELECT instr(?1, 'ab')", {std::string(1000, 'a') + 'b'}),
            "INTEGER:1000");
  EXPECT_EQ(Eval(fast_, "SELECT length(replace(?1, 'X', 'yy'))", {std::string(1000, 'X')}),
            "INTEGER:2000");
  EXPECT_EQ(Eval(fast_, "SELECT length(?1)", {std::string(1000, 'X')}), "INTEGER:1000");
}

/// A check that counts its calls and says stop from the 'stop_at'-th on (0: never).
struct CountingCheck {
  int calls = 0;
  int stop_at = 0;
  static bool Fn(void* arg, bool /*may_yield*/) {
    auto* self = static_cast<CountingCheck*>(arg);
    return ++self->calls >= self->stop_at && self->stop_at != 0;
  }
};

TEST_F(SqliteFunctionsTest, ARowOfLengthCallsChecksInsideEachCall) {
  // length() allocates nothing, and a load of x into a register that already holds a buffer
  // of its size allocates nothing either: only the override's own checks run in this row.
  std::string row = "WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 1048576, 'a')) SELECT ";
  for (int i = 0; i < 20; ++i) row += std::string(i > 0 ? ", " : "") + "length(x)";
  row += " FROM t";
  CountingCheck check;
  {
    const StepCheckpoint checkpoint(&CountingCheck::Fn, &check);
    EXPECT_EQ(Eval(fast_, row).substr(0, 8), "INTEGER:");
  }
  EXPECT_GE(check.calls, 20 * 15) << "one check per 64 KiB counted";
  CountingCheck stop;
  stop.stop_at = 20;
  {
    const StepCheckpoint checkpoint(&CountingCheck::Fn, &stop);
    EXPECT_EQ(Eval(fast_, row), "error:interrupted");
  }
  EXPECT_EQ(stop.calls, 20);
}

TEST_F(SqliteFunctionsTest, TrimIsRightOnLargeAdversarialInputs) {
  const size_t kSize = 4 << 20;
  const std::string x(kSize, 'a');
  std::string y(kSize + 1, 'b');
  y.back() = 'a';
  for (const char* fn : {"trim", "ltrim", "rtrim"}) {
    EXPECT_EQ(Eval(fast_, std::string("SELECT length(") + fn + "(?1, ?2))", {x, y}),
              "INTEGER:0") << fn;
    EXPECT_EQ(Eval(fast_, std::string("SELECT ") + fn + "(?1 || 'q' || ?1, ?2) = " +
                              (std::string(fn) == "ltrim" ? "'q' || ?1"
                               : std::string(fn) == "rtrim" ? "?1 || 'q'" : "'q'"),
                   {x, y}),
              "INTEGER:1") << fn;
  }
  // Multi-byte: X of 'é', Y of many 'ü' ending in 'é'.
  std::string ex, uy;
  while (ex.size() < kSize) ex += "\xc3\xa9";
  while (uy.size() < kSize) uy += "\xc3\xbc";
  EXPECT_EQ(Eval(fast_, "SELECT length(trim(?1, ?2 || '\xc3\xa9'))", {ex, uy}), "INTEGER:0");
  // Malformed UTF-8: Y's characters are a lead byte with thousands of continuation bytes;
  // X repeats one of them so that every step sees every length match.
  std::string long_char = "\xc3", y_long = "\x80";
  for (int i = 0; i < 2000; ++i) {
    long_char += '\x80';
    y_long += long_char;
  }
  std::string x_long;
  while (x_long.size() + long_char.size() <= kSize) x_long += long_char;
  for (const char* fn : {"trim", "ltrim", "rtrim"}) {
    ExpectSameAsBuiltin(std::string("SELECT length(CAST(") + fn + "(?1, ?2) AS BLOB))",
                        {long_char + long_char, y_long}, {true, true});
    // rtrim strips the continuation bytes one by one ('\x80' is Y's first character),
    // then stops at the last lead byte; ltrim strips the shortest character, then '\x80's.
    const size_t expected = std::string(fn) == "rtrim" ? x_long.size() - long_char.size() + 1 : 0;
    EXPECT_EQ(Eval(fast_, std::string("SELECT length(CAST(") + fn + "(?1, ?2) AS BLOB))",
                   {x_long, y_long}, {true, true}),
              "INTEGER:" + std::to_string(expected)) << fn;
  }
}

TEST(SqliteFunctionsLimitsTest, LongLikePatternsAreRefused) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  ApplyCpuBoundingLimits(db);
  EXPECT_EQ(sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, -1), kLikePatternLengthLimit);
  const std::string ok = "SELECT 'abc' LIKE '%" + std::string(kLikePatternLengthLimit - 1, 'b') + "'";
  const std::string too_long = "SELECT 'abc' LIKE '%" + std::string(kLikePatternLengthLimit, 'b') + "'";
  EXPECT_EQ(sqlite3_exec(db, ok.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, too_long.c_str(), nullptr, nullptr, nullptr), SQLITE_ERROR);
  EXPECT_STREQ(sqlite3_errmsg(db), "LIKE or GLOB pattern too complex");
  sqlite3_close(db);
}

}  // namespace
}  // namespace qr
