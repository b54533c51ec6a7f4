#include "runtime/json-encoding.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/row-encoder.h"
#include "runtime/sqlite-connection.h"

namespace qr {
namespace {

std::string Str(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

std::string Dbl(double v) {
  std::string out;
  AppendJsonDouble(v, &out);
  return out;
}

std::string B64(std::string_view s) {
  std::string out;
  AppendBase64(s, &out);
  return out;
}

TEST(JsonEncodingTest, DoublesAlwaysHaveAPointOrAnExponent) {
  EXPECT_EQ(Dbl(3), "3.0");
  EXPECT_EQ(Dbl(-0.0), "-0.0");
  EXPECT_EQ(Dbl(0.1), "0.1");
  EXPECT_EQ(Dbl(1e300), "1e+300");
  EXPECT_EQ(Dbl(1e-7), "1e-07");
  EXPECT_EQ(Dbl(123456789012.0), "123456789012.0");
  EXPECT_EQ(Dbl(std::numeric_limits<double>::quiet_NaN()), "\"NaN\"");
  EXPECT_EQ(Dbl(std::numeric_limits<double>::infinity()), "\"Infinity\"");
  EXPECT_EQ(Dbl(-std::numeric_limits<double>::infinity()), "\"-Infinity\"");
  for (double v : {0.1, 1.0 / 3, 2.5e-300, 1.7976931348623157e308, 5e-324}) {
    EXPECT_EQ(nlohmann::json::parse(Dbl(v)).get<double>(), v) << "round trip of " << Dbl(v);
  }
}

TEST(JsonEncodingTest, IntegersAreExact) {
  std::string out;
  AppendJsonInt(std::numeric_limits<int64_t>::min(), &out);
  out += ',';
  AppendJsonInt(std::numeric_limits<int64_t>::max(), &out);
  EXPECT_EQ(out, "-9223372036854775808,9223372036854775807");
}

TEST(JsonEncodingTest, StringsEscapeQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Str(""), "\"\"");
  EXPECT_EQ(Str("plain text"), "\"plain text\"");
  EXPECT_EQ(Str("a\"b\\c/d"), R"("a\"b\\c/d")");
  EXPECT_EQ(Str(std::string_view("\n\t\r\b\f\x01\x1f\0", 8)),
            R"("\u000a\u0009\u000d\u0008\u000c\u0001\u001f\u0000")");
  EXPECT_EQ(Str("\x7f"), "\"\x7f\"");
}

TEST(JsonEncodingTest, ValidUtf8PassesThrough) {
  const std::string s = "é€😀\u2028 \xF4\x8F\xBF\xBF";  // includes U+10FFFF
  EXPECT_EQ(Str(s), "\"" + s + "\"");
  EXPECT_EQ(nlohmann::json::parse(Str(s)).get<std::string>(), s);
}

TEST(JsonEncodingTest, EachMaximalInvalidUtf8SubsequenceBecomesOneReplacement) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(Str("a\xff" "b"), "\"a" + r + "b\"");
  EXPECT_EQ(Str("\xC0\xAF"), "\"" + r + r + "\"") << "overlong '/'";
  EXPECT_EQ(Str("\xE0\x80\x80"), "\"" + r + r + r + "\"") << "overlong NUL";
  EXPECT_EQ(Str("\xED\xA0\x80"), "\"" + r + r + r + "\"") << "surrogate";
  EXPECT_EQ(Str("\xF4\x90\x80\x80"), "\"" + r + r + r + r + "\"") << "above U+10FFFF";
  EXPECT_EQ(Str("\xF0\x9F\x98" "a"), "\"" + r + "a\"") << "truncated emoji";
  EXPECT_EQ(Str("\xE2\x82"), "\"" + r + "\"") << "truncated at the end";
  EXPECT_EQ(Str("\x80"), "\"" + r + "\"") << "stray continuation byte";
  // Whatever the input, the output is valid JSON (nlohmann rejects invalid UTF-8).
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string encoded = Str(all);
  EXPECT_TRUE(nlohmann::json::accept(encoded)) << encoded;
}

TEST(JsonEncodingTest, StringSizeIsWhatTheEncodingAppends) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (std::string_view s :
       {std::string_view(""), std::string_view("plain"), std::string_view("a\"b\\c"),
        std::string_view("\0\0\0", 3), std::string_view("é€😀 \xF4\x8F\xBF\xBF"),
        std::string_view("\xC0\xAF\xE0\x80\x80\xED\xA0\x80"),
        std::string_view("\xF0\x9F\x98" "a\xE2\x82"), std::string_view(all)}) {
    EXPECT_EQ(JsonStringSize(s), Str(s).size()) << Str(s);
  }
  const std::string nuls(4096, '\0');
  EXPECT_EQ(JsonStringSize(nuls), 6 * nuls.size() + 2);
}

TEST(JsonEncodingTest, EscapesAreFoundAtEveryPositionOfTheWordScan) {
  // Plain text is skipped eight bytes at a time: a byte to escape or check must be found at
  // any offset within a word, and in the tail after the last whole word.
  const std::string plain = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";  // 40 bytes
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"", "\\\""},
      {"\\", "\\\\"},
      {std::string(1, '\0'), "\\u0000"},
      {"\x1f", "\\u001f"},
      {"\x7f", "\x7f"},
      {"\xC3\xA9", "\xC3\xA9"},
      {"\xff", "\xEF\xBF\xBD"},
      {" ", " "},
      {"~", "~"}};
  for (const auto& [raw, encoded] : cases) {
    for (size_t at = 0; at <= plain.size(); ++at) {
      for (size_t length : {at, plain.size()}) {
        const std::string text = plain.substr(0, at) + raw + plain.substr(at, length - at);
        const std::string expected =
            "\"" + plain.substr(0, at) + encoded + plain.substr(at, length - at) + "\"";
        ASSERT_EQ(Str(text), expected) << "at " << at << " of " << length;
        ASSERT_EQ(JsonStringSize(text), expected.size()) << "at " << at << " of " << length;
      }
    }
  }
}

TEST(RowEncoderTest, TheBoundOfALongTextCountsItsEscapes) {
  // A value whose JSON is 6 times its length must not count as its length: its encoding
  // would take that much memory before any check saw it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT CAST(zeroblob(100000) AS TEXT), 'short\x01', "
                               "CAST(x'ff' AS TEXT) || printf('%.2000c', 'a')",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  StmtValues values{stmt};
  for (int i = 0; i < 3; ++i) {
    std::string out;
    AppendValue(values, i, ColumnKind::kVarchar, &out);
    const int64_t bound = EncodedSizeBound(values, i, ColumnKind::kVarchar);
    if (values.bytes(i) >= kExactJsonSizeFromBytes) {
      EXPECT_EQ(bound, static_cast<int64_t>(out.size())) << i;
    } else {
      EXPECT_EQ(bound, values.bytes(i) + 2) << i;  // short: checked after the row
    }
  }
  EXPECT_EQ(EncodedSizeBound(values, 0, ColumnKind::kVarchar), 600002);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(JsonEncodingTest, Base64MatchesRfc4648) {
  EXPECT_EQ(B64(""), "");
  EXPECT_EQ(B64("f"), "Zg==");
  EXPECT_EQ(B64("fo"), "Zm8=");
  EXPECT_EQ(B64("foo"), "Zm9v");
  EXPECT_EQ(B64("foob"), "Zm9vYg==");
  EXPECT_EQ(B64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(B64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(B64(std::string_view("\x00\xff\xfe", 3)), "AP/+");
}

TEST(RowEncoderTest, DeclaredTypesMapToTrinoTypes) {
  EXPECT_EQ(KindFromDeclType("INTEGER"), ColumnKind::kBigint);
  EXPECT_EQ(KindFromDeclType("bigint"), ColumnKind::kBigint);
  EXPECT_EQ(KindFromDeclType("DOUBLE"), ColumnKind::kDouble);
  EXPECT_EQ(KindFromDeclType("real"), ColumnKind::kDouble);
  EXPECT_EQ(KindFromDeclType("FLOAT"), ColumnKind::kDouble);
  EXPECT_EQ(KindFromDeclType("DECIMAL(15,2)"), ColumnKind::kDecimal);
  EXPECT_EQ(KindFromDeclType("NUMERIC"), ColumnKind::kDouble);
  EXPECT_EQ(KindFromDeclType("VARCHAR(25)"), ColumnKind::kVarchar);
  EXPECT_EQ(KindFromDeclType("CHAR(1)"), ColumnKind::kVarchar);
  EXPECT_EQ(KindFromDeclType("TEXT"), ColumnKind::kVarchar);
  EXPECT_EQ(KindFromDeclType("CLOB"), ColumnKind::kVarchar);
  EXPECT_EQ(KindFromDeclType("DATE"), ColumnKind::kDate);
  EXPECT_EQ(KindFromDeclType("TIMESTAMP"), ColumnKind::kTimestamp);
  EXPECT_EQ(KindFromDeclType("TIME"), ColumnKind::kVarchar);
  EXPECT_EQ(KindFromDeclType("BLOB"), ColumnKind::kVarbinary);
  EXPECT_EQ(KindFromDeclType("BOOLEAN"), ColumnKind::kBoolean);
  EXPECT_EQ(KindFromDeclType(nullptr), ColumnKind::kUndecided);
  EXPECT_EQ(KindFromDeclType(""), ColumnKind::kUndecided);
  EXPECT_EQ(KindFromDeclType("JSON"), ColumnKind::kUndecided);
}

TEST(RowEncoderTest, ValueKindsMerge) {
  using K = ColumnKind;
  EXPECT_EQ(MergeValueKind(K::kUndecided, K::kUndecided), K::kUndecided);
  EXPECT_EQ(MergeValueKind(K::kUndecided, K::kBigint), K::kBigint);
  EXPECT_EQ(MergeValueKind(K::kBigint, K::kUndecided), K::kBigint) << "NULL changes nothing";
  EXPECT_EQ(MergeValueKind(K::kBigint, K::kDouble), K::kDouble);
  EXPECT_EQ(MergeValueKind(K::kDouble, K::kBigint), K::kDouble);
  EXPECT_EQ(MergeValueKind(K::kBigint, K::kVarchar), K::kVarchar);
  EXPECT_EQ(MergeValueKind(K::kVarchar, K::kBigint), K::kVarchar);
  EXPECT_EQ(MergeValueKind(K::kVarbinary, K::kVarchar), K::kVarbinary) << "first one decides";
}

TEST(RowEncoderTest, LiteralNamesAreNotColumnNames) {
  for (const char* bad : {"", "  ", "1", "-1", "+2.5", "1e10", ".5", "0x1F", "'a'", "''",
                          "X'00'", "x''", "NULL", "null", "TRUE", "false"}) {
    EXPECT_FALSE(IsUsableColumnName(bad)) << bad;
  }
  for (const char* good : {"a", "count(*)", "1+1", "x1", "e", "_col0", "\"1\"", "1a", "-"}) {
    EXPECT_TRUE(IsUsableColumnName(good)) << good;
  }
  EXPECT_EQ(MakeColumn("1", 3, ColumnKind::kBigint).name, "_col3");
  EXPECT_EQ(MakeColumn(nullptr, 0, ColumnKind::kBigint).name, "_col0");
}

TEST(SqliteConnectionTest, LineAndColumnCountCharacters) {
  int line = 0, column = 0;
  LineAndColumn("SELECT 1", 0, &line, &column);
  EXPECT_EQ(line, 1);
  EXPECT_EQ(column, 1);
  LineAndColumn("a\nbé c", 6, &line, &column);  // the c after a two-byte é
  EXPECT_EQ(line, 2);
  EXPECT_EQ(column, 4);
  LineAndColumn("abc", 99, &line, &column);
  EXPECT_EQ(column, 3) << "clamped to the last character";
  LineAndColumn("", 0, &line, &column);
  EXPECT_EQ(line, 0);
}

TEST(SqliteConnectionTest, BlankSqlIsWhitespaceSemicolonsAndComments) {
  EXPECT_TRUE(IsBlankSql(""));
  EXPECT_TRUE(IsBlankSql(" ;\n\t; -- comment\n /* block */ ;"));
  EXPECT_TRUE(IsBlankSql("-- to the end"));
  EXPECT_TRUE(IsBlankSql("/* unterminated"));
  EXPECT_FALSE(IsBlankSql("; SELECT 2"));
  EXPECT_FALSE(IsBlankSql("/* x */ x"));
  EXPECT_FALSE(IsBlankSql("- 1"));
}

}  // namespace
}  // namespace qr
