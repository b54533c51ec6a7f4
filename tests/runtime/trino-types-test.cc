#include "runtime/trino-types.h"

#include <string>

#include <gtest/gtest.h>

#include "runtime/sql-rewrite.h"

namespace qr {
namespace {

std::string Name(const char* decl) { return TypeName(TypeFromDecl(decl)); }

TEST(TrinoTypesTest, DeclaredTypesMapToTrinoTypes) {
  EXPECT_EQ(Name("DATE"), "date");
  EXPECT_EQ(Name("date"), "date");
  EXPECT_EQ(Name("TIMESTAMP"), "timestamp(3)");
  EXPECT_EQ(Name("timestamp(6)"), "timestamp(3)");
  EXPECT_EQ(Name("DATETIME"), "timestamp(3)");
  EXPECT_EQ(Name("TIMESTAMP WITH TIME ZONE"), "varchar");
  EXPECT_EQ(Name("DECIMAL(12,2)"), "decimal(12,2)");
  EXPECT_EQ(Name("numeric ( 5 )"), "decimal(5,0)");
  EXPECT_EQ(Name("DECIMAL(39,2)"), "double");
  EXPECT_EQ(Name("DECIMAL(2,3)"), "double");
  EXPECT_EQ(Name("DECIMAL"), "double");
  EXPECT_EQ(Name("VARCHAR(25)"), "varchar(25)");
  EXPECT_EQ(Name("CHAR(1)"), "varchar(1)");
  EXPECT_EQ(Name("character varying(7)"), "varchar(7)");
  EXPECT_EQ(Name("TEXT"), "varchar");
  EXPECT_EQ(Name("INTEGER"), "bigint");
  EXPECT_EQ(Name("REAL"), "double");
  EXPECT_EQ(Name("BOOLEAN"), "boolean");
  EXPECT_EQ(Name("BLOB"), "varbinary");
  EXPECT_EQ(Name("TIME"), "varchar");
  EXPECT_EQ(Name("JSON"), "unknown");
  EXPECT_EQ(Name(nullptr), "unknown");
  EXPECT_EQ(TypeSignatureJson(TypeFromDecl("VARCHAR(3)")),
            R"({"rawType":"varchar","arguments":[{"kind":"LONG","value":3}]})");
  EXPECT_EQ(TypeSignatureJson(TypeFromDecl("TIMESTAMP")),
            R"({"rawType":"timestamp","arguments":[{"kind":"LONG","value":3}]})");
  EXPECT_EQ(TypeSignatureJson(TypeFromDecl("DATE")), R"({"rawType":"date","arguments":[]})");
  EXPECT_EQ(JdbcTypeCode(TypeFromDecl("DATE")), 91);
  EXPECT_EQ(JdbcTypeCode(TypeFromDecl("DECIMAL(3,1)")), 3);
}

TEST(TrinoTypesTest, TemporalValues) {
  std::string out;
  EXPECT_TRUE(DateFromText("2024-02-29", &out));
  EXPECT_EQ(out, "2024-02-29");
  EXPECT_TRUE(DateFromText("2024-02-29T10:00", &out));
  EXPECT_EQ(out, "2024-02-29");
  EXPECT_FALSE(DateFromText("2024-2-29", &out));
  EXPECT_FALSE(DateFromText("2024-02-29x", &out));
  EXPECT_EQ(DateFromUnixSeconds(0), "1970-01-01");
  EXPECT_EQ(DateFromUnixSeconds(-1), "1969-12-31");
  EXPECT_EQ(DateFromUnixSeconds(951782400), "2000-02-29");
  EXPECT_TRUE(TimestampFromText("2024-02-29 13:45:06.123456", &out));
  EXPECT_EQ(out, "2024-02-29 13:45:06.123");
  EXPECT_TRUE(TimestampFromText("2024-02-29T13:45Z", &out));
  EXPECT_EQ(out, "2024-02-29 13:45:00.000");
  EXPECT_TRUE(TimestampFromText("2024-02-29", &out));
  EXPECT_EQ(out, "2024-02-29 00:00:00.000");
  EXPECT_TRUE(TimestampFromText("2024-02-29 01:02:03.4", &out));
  EXPECT_EQ(out, "2024-02-29 01:02:03.400");
  EXPECT_FALSE(TimestampFromText("2024-02-29 1:02", &out));
  EXPECT_FALSE(TimestampFromText("2024-02-29 01:02:03.", &out));
  EXPECT_EQ(TimestampFromUnixSeconds(1.5), "1970-01-01 00:00:01.500");
  EXPECT_EQ(TimestampFromUnixSeconds(-0.001), "1969-12-31 23:59:59.999");
}

TEST(TrinoTypesTest, DecimalValues) {
  std::string out;
  EXPECT_TRUE(DecimalFromText("12.345", 2, &out));
  EXPECT_EQ(out, "12.35");
  EXPECT_TRUE(DecimalFromText(" 7 ", 2, &out));
  EXPECT_EQ(out, "7.00");
  EXPECT_TRUE(DecimalFromText("-9.995", 2, &out));
  EXPECT_EQ(out, "-10.00");
  EXPECT_TRUE(DecimalFromText(".5", 0, &out));
  EXPECT_EQ(out, "1");
  EXPECT_TRUE(DecimalFromText("-0.001", 2, &out));
  EXPECT_EQ(out, "0.00");
  EXPECT_TRUE(DecimalFromText("+0012.1", 1, &out));
  EXPECT_EQ(out, "12.1");
  EXPECT_FALSE(DecimalFromText("1e5", 2, &out));
  EXPECT_FALSE(DecimalFromText("abc", 2, &out));
  EXPECT_FALSE(DecimalFromText(".", 2, &out));
  EXPECT_EQ(DecimalFromDouble(2.5, 3), "2.500");
  EXPECT_EQ(DecimalFromDouble(-0.0001, 2), "0.00");
  EXPECT_EQ(DecimalFromInt(-3, 1), "-3.0");
  EXPECT_EQ(DecimalFromInt(42, 0), "42");
}

std::string Rewrite(const char* sql) {
  std::string out;
  return RewriteCatalogNames(sql, "sqlite", &out) ? out : std::string("(unchanged)");
}

TEST(SqlRewriteTest, CatalogNamesAreRewrittenOnTokens) {
  EXPECT_EQ(Rewrite("SELECT * FROM sqlite.main.t"), "SELECT * FROM main.t");
  EXPECT_EQ(Rewrite("SELECT * FROM \"sqlite\".\"main\".\"t\""), "SELECT * FROM \"main\".\"t\"");
  EXPECT_EQ(Rewrite("SELECT * FROM system.jdbc.tables"),
            "SELECT * FROM temp.\"system.jdbc.tables\"");
  EXPECT_EQ(Rewrite("select * from \"information_schema\".\"COLUMNS\" c"),
            "select * from temp.\"information_schema.columns\" c");
  EXPECT_EQ(Rewrite("SELECT * FROM Sqlite.Information_Schema.tables"),
            "SELECT * FROM temp.\"information_schema.tables\"");
  EXPECT_EQ(Rewrite("SELECT 'sqlite.main.t' -- sqlite.main.t\n/* system.jdbc.x */"),
            "(unchanged)");
  EXPECT_EQ(Rewrite("SELECT \"sqlite.main.t\" FROM main.t"), "(unchanged)");
  EXPECT_EQ(Rewrite("SELECT a.b FROM sqlite.main"), "(unchanged)");
  EXPECT_EQ(Rewrite("SELECT 1.5, x.y FROM t x"), "(unchanged)");
  EXPECT_EQ(Rewrite("SELECT * FROM other.main.t"), "(unchanged)");
}

TEST(SqlRewriteTest, OutputOffsetsMapBackToTheInput) {
  //                 0         1         2         3         4
  //                 0123456789012345678901234567890123456789012345
  const char* sql = "SELECT x FROM sqlite.main.t, information_schema.tables WHERE y";
  std::string out;
  std::vector<SqlEdit> edits;
  ASSERT_TRUE(RewriteCatalogNames(sql, "sqlite", &out, &edits));
  ASSERT_EQ(out, "SELECT x FROM main.t, temp.\"information_schema.tables\" WHERE y");
  ASSERT_EQ(edits.size(), 2u);
  EXPECT_EQ(InputOffset(edits, 7), 7u);    // x: before any replacement
  EXPECT_EQ(InputOffset(edits, 14), 21u);  // main: after "sqlite." was dropped
  EXPECT_EQ(InputOffset(edits, 25), 29u);  // inside the view's name: where the name began
  EXPECT_EQ(out.substr(out.find(" y") + 1, 1), "y");
  EXPECT_EQ(InputOffset(edits, out.find(" y") + 1), std::string_view(sql).find(" y") + 1);
  EXPECT_EQ(InputOffset({}, 5), 5u);
}

TEST(SqlRewriteTest, Tokens) {
  const auto tokens = TokenizeSql("SELECT 'it''s', \"a\"\"b\", [c d], 1e-3 -- x\n/* y */;");
  ASSERT_EQ(tokens.size(), 9u);
  EXPECT_EQ(tokens[0].value, "select");
  EXPECT_EQ(tokens[1].kind, SqlToken::Kind::kString);
  EXPECT_EQ(tokens[1].value, "it's");
  EXPECT_EQ(tokens[3].kind, SqlToken::Kind::kQuotedIdentifier);
  EXPECT_EQ(tokens[3].value, "a\"b");
  EXPECT_EQ(tokens[5].value, "c d");
  EXPECT_EQ(tokens[7].kind, SqlToken::Kind::kNumber);
  EXPECT_EQ(tokens[8].kind, SqlToken::Kind::kPunct);
  EXPECT_EQ(QuoteString("a'b"), "'a''b'");
  EXPECT_EQ(QuoteIdentifier("a\"b"), "\"a\"\"b\"");
  // One at a time, the same tokens, until the callback says stop.
  const std::string sql = "SELECT 'it''s', \"a\"\"b\", [c d], 1e-3 -- x\n/* y */;";
  std::vector<SqlToken> seen;
  ForEachSqlToken(sql, [&](const SqlToken& t) {
    seen.push_back(t);
    return seen.size() < 4;
  });
  ASSERT_EQ(seen.size(), 4u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].begin, tokens[i].begin);
    EXPECT_EQ(seen[i].end, tokens[i].end);
    EXPECT_EQ(seen[i].value, tokens[i].value);
  }
}

}  // namespace
}  // namespace qr
