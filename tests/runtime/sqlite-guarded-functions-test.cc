// printf/format/json_patch behind their guards: the same results as SQLite's built-ins, and a
// refusal (with the built-in's own error where there is one) for the inputs whose cost the
// built-ins do not bound. The json_* overrides: the built-ins' results, and a check before
// each large call.

#include "runtime/sqlite-guarded-functions.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/step-checkpoint.h"

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
  // A precision that only bounds what is taken (strings), or is not used ('%', %n), or a
  // width that %n ignores, costs the built-in nothing: answered by it.
  for (const char* sql : {"SELECT printf('%.2000000000s|%.*q', 'abc', 2000000000, 'it''s')",
                          "SELECT printf('%.2000000000%%2000000000n.')"}) {
    EXPECT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
    EXPECT_NE(Eval(guarded_, sql), "NULL") << sql;
  }
}

/// The type and bytes of the first column of the one row of 'sql' ("error: <msg>" if none).
std::string EvalBytes(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return std::string("error: ") + sqlite3_errmsg(db);
  }
  std::string out;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* bytes = static_cast<const char*>(sqlite3_column_blob(stmt, 0));
    out = std::to_string(sqlite3_column_type(stmt, 0)) + ":" +
          std::string(bytes != nullptr ? bytes : "", sqlite3_column_bytes(stmt, 0));
  } else {
    out = std::string("error: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  return out;
}

/// A random printf() call in SQL: formats of every syntax the parser knows (flags, '*' and
/// digit widths and precisions, 'l', conversions valid and not), with arguments of every type.
std::string RandomPrintfCall(std::mt19937* rng) {
  auto pick = [&](int n) { return static_cast<int>((*rng)() % n); };
  static const char* const kArgs[] = {
      "NULL", "''", "'a'", "'xyz'", "'\xc3\xa9t\xc3\xa9'", "char(233)", "char(8364, 97)",
      "char(128512)", "x'80'", "x'c3'", "x'00'", "x'e282ac'", "x'f09f9880ff'", "0", "7",
      "-3", "12", "-12", "2.5", "-0.25", "65",
      // As an int (a '*' width or precision): 3, 3, -1 and 0.
      "4294967299", "-4294967293", "1e300", "-1e300"};
  std::string format;
  const int conversions = 1 + pick(4);
  for (int c = 0; c < conversions; ++c) {
    if (pick(3) == 0) format += pick(2) == 0 ? "ab " : "\xc3\xa9";
    format += '%';
    for (int f = pick(3); f > 0; --f) format += "-+ #0,!"[pick(7)];
    switch (pick(4)) {
      case 0: format += '*'; break;
      case 1: format += std::to_string(pick(14) + (pick(4) == 0 ? 30 : 0)); break;
      default: break;
    }
    switch (pick(4)) {
      case 0: format += ".*"; break;
      case 1: format += "." + std::to_string(pick(14) + (pick(4) == 0 ? 30 : 0)); break;
      case 2: format += '.'; break;
      default: break;
    }
    if (pick(8) == 0) format += pick(2) == 0 ? "l" : "ll";
    format += pick(3) != 0 ? 'c' : "dsgzqQwcouxXfeEGipr%nTy"[pick(23)];
  }
  if (pick(10) == 0) format += '%';
  std::string sql = "printf('" + format + "'";  // no quote in a format: no escaping
  for (int a = pick(7); a > 0; --a) {
    sql += ", ";
    sql += pick(2) == 0 ? std::to_string(pick(30) - 10) : kArgs[pick(std::size(kArgs))];
  }
  return sql + ")";
}

TEST_F(GuardedBuiltinsTest, PrintfRepeatsAnswerAsTheBuiltinOnRandomFormats) {
  // With the threshold at 1, every %c with a precision of 2 or more is rendered by the plan;
  // at a length limit of 40 bytes, many results and widths cross it.
  for (const int limit : {1 << 20, 40}) {
    sqlite3* guarded = nullptr;
    sqlite3* plain = nullptr;
    ASSERT_EQ(sqlite3_open(":memory:", &guarded), SQLITE_OK);
    ASSERT_EQ(sqlite3_open(":memory:", &plain), SQLITE_OK);
    for (sqlite3* db : {guarded, plain}) sqlite3_limit(db, SQLITE_LIMIT_LENGTH, limit);
    std::unique_ptr<GuardedBuiltins> builtins;
    ASSERT_TRUE(GuardedBuiltins::Register(guarded, &builtins).ok());
    builtins->set_printf_repeat_threshold(1);
    std::mt19937 rng(20261127 + limit);
    for (int i = 0; i < 20000; ++i) {
      const std::string sql = "SELECT " + RandomPrintfCall(&rng);
      ASSERT_EQ(EvalBytes(guarded, sql), EvalBytes(plain, sql)) << sql;
    }
    EXPECT_GT(builtins->planned_calls(), 2000) << "the plan must be what is compared";
    sqlite3_close(guarded);
    builtins.reset();
    sqlite3_close(plain);
  }
}

TEST_F(GuardedBuiltinsTest, PrintfPlansOnlyLargeRepeatsInFormatsItKnows) {
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(plain_, "SELECT 5, 'x', 100000, 'y'", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  sqlite3_value* v[4];
  for (int i = 0; i < 4; ++i) v[i] = sqlite3_column_value(stmt, i);
  std::vector<PrintfPiece> pieces;
  EXPECT_FALSE(PlanPrintfRepeats("%d %.*c", 4, v, kPrintfRepeatThreshold, &pieces))
      << "a precision of 'x' (0) repeats nothing";
  ASSERT_TRUE(PlanPrintfRepeats("<%s|%.*c>", 4, v + 1, kPrintfRepeatThreshold, &pieces));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].format_end, 4u);  // "<%s|": the built-in, with argument 0
  EXPECT_EQ(pieces[0].end_arg, 1);
  EXPECT_EQ(pieces[1].repeat, 100000);
  EXPECT_EQ(pieces[1].unit, "y");
  EXPECT_EQ(pieces[2].format_begin, 8u);  // ">"
  EXPECT_EQ(pieces[2].first_arg, 3);
  EXPECT_FALSE(PlanPrintfRepeats("%n%.*c", 4, v + 1, kPrintfRepeatThreshold, &pieces))
      << "%n takes no argument: left to the built-in";
  EXPECT_FALSE(PlanPrintfRepeats("%.*c%y", 4, v + 1, kPrintfRepeatThreshold, &pieces))
      << "an unknown conversion ends the output: left to the built-in";
  sqlite3_finalize(stmt);
  // A repeat too big for the limit is NULL, as the built-in answers; one within it is exact.
  EXPECT_EQ(Eval(guarded_, "SELECT printf('%s%.*c', 'x', 1048575, 'a')"), "NULL");
  for (const char* sql : {"SELECT printf('%s%.*c', 'x', 1048574, 'a')",
                          "SELECT printf('%-300000.200000c|%200000.*c', 'b', 100000, 'c')",
                          "SELECT printf('%.*c', 300000, char(8364, 97))"}) {
    EXPECT_EQ(EvalBytes(guarded_, sql), EvalBytes(plain_, sql)) << sql;
  }
}

bool StopNow(void* /*arg*/, bool /*may_yield*/) { return true; }

TEST_F(GuardedBuiltinsTest, LargeRepeatsStopAtTheirFirstCheckpointWhenTold) {
  const StepCheckpoint checkpoint(&StopNow, nullptr);
  EXPECT_EQ(Eval(guarded_, "SELECT printf('<%.*c>', 1000000, 'a')"), "error: interrupted");
  EXPECT_EQ(Eval(guarded_, "SELECT length(printf('<%.*c>', 60000, 'a'))"), "60002")
      << "shorter than one checkpoint's worth of work";
}

TEST_F(GuardedBuiltinsTest, MinimumPrintfLengthFollowsThePrintfSyntax) {
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(plain_, "SELECT 5, 7, 3000000000, -9", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  sqlite3_value* v[4];
  for (int i = 0; i < 4; ++i) v[i] = sqlite3_column_value(stmt, i);
  EXPECT_EQ(MinimumPrintfLength("%*.*d", 3, v), 7);
  EXPECT_EQ(MinimumPrintfLength("%%%d", 3, v + 2), 0) << "a %d argument is a value, not a width";
  EXPECT_EQ(MinimumPrintfLength("%d%*c", 3, v + 1), 1294967296)
      << "the '*' takes the 2nd argument, as an int (3000000000 wraps to -1294967296)";
  EXPECT_EQ(MinimumPrintfLength("%d%*c", 4, v), 7);
  EXPECT_EQ(MinimumPrintfLength("%-12.40s", 0, v), 12) << "a string's precision is a maximum";
  EXPECT_EQ(MinimumPrintfLength("%-12.40x", 0, v), 40);
  EXPECT_EQ(MinimumPrintfLength("%*d", 1, v + 3), 9);
  EXPECT_EQ(MinimumPrintfLength("%*d", 0, v), 0) << "a missing argument is 0";
  // The conversions add up: each alone below the limit, together past it.
  EXPECT_EQ(MinimumPrintfLength("%.5c%.7d%3s%-4.2f", 0, v), 5 + 7 + 3 + 4);
  EXPECT_EQ(MinimumPrintfLength("%n%.1000c x %.1000c", 0, v), 2000) << "%n outputs nothing";
  EXPECT_EQ(MinimumPrintfLength("%.1000c%y%.1000c", 0, v), 1000)
      << "the output ends at an unknown conversion";
  sqlite3_finalize(stmt);
}

TEST_F(GuardedBuiltinsTest, PrintfOfManyRepeatsPastTheLimitIsNullAtOnce) {
  // Repeats that only together pass the 1 MiB limit: NULL as the built-in answers, without
  // the built-in's character-at-a-time appends (%n keeps the planner out) or planned pieces
  // (the threshold of 1 plans every repeat).
  builtins_->set_printf_repeat_threshold(1);
  for (const char* sql :
       {"SELECT printf('%n%.500000c%.500000c%.500000c', 0, 'a', 'b', 'c')",
        "SELECT printf(replace(printf('%.3000c', 'x'), 'x', '%.500c'))"}) {
    EXPECT_EQ(Eval(guarded_, sql), "NULL") << sql;
    EXPECT_EQ(Eval(plain_, sql), "NULL") << sql;
  }
  EXPECT_EQ(builtins_->planned_calls(), 1) << "only the inner printf('%.3000c'): the others "
                                               "are answered before any plan";
  // Just under the limit, still the built-in's answer.
  EXPECT_EQ(Eval(guarded_, "SELECT length(printf('%.500000c%.500000c', 'a', 'b'))"), "1000000");
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

TEST_F(GuardedBuiltinsTest, JsonFunctionsAnswerAsTheBuiltins) {
  const char* const kObject = "'{\"a\":[1,2,{\"b\":null}],\"c\":\"x\",\"d\":1.5e300}'";
  const std::vector<std::string> exprs = {
      "json(' [1, 2 ] ')", "json('{')", "json(NULL)", "json(x'5b315d')", "json(12)",
      "json_array(1, 'a', NULL, 2.5, x'00')", "json_array()", "json_array(json('[1]'), '[1]')",
      "json_array_length('[1,2,3]')", "json_array_length(K, '$.a')", "json_array_length('{}')",
      "json_extract(K, '$.a[2].b')", "json_extract(K, '$.a', '$.c')", "json_extract(K)",
      "json_extract(K, '$.a[#-1]')", "json_extract(K, 'a')", "json_extract('[', '$')",
      "K -> '$.a'", "K ->> '$.a'", "K -> 'c'", "K ->> 'd'", "K -> '$.nosuch'",
      "json_array(K -> '$.a', K ->> '$.a', K ->> '$.c')",
      "json_insert(K, '$.e', 9, '$.a[#]', json('{}'))", "json_insert(K, '$.e')",
      "json_object('k', json_object('l', json_array(1)), 'm', '{}')", "json_object('k')",
      "json_object(1, 2)", "json_quote('a\"b')", "json_quote(json('[1]'))", "json_quote(3)",
      "json_remove(K, '$.a[0]', '$.c')", "json_remove(K)",
      "json_replace(K, '$.c', json('[true]'), '$.z', 1)",
      "json_set(K, '$.c', json_extract(K, '$.a'), '$.n.m', 2)", "json_set(K, '$[', 1)",
      "json_type(K)", "json_type(K, '$.d')", "json_type(K, '$.a[2].b')", "json_type('x')",
      "json_valid(K)", "json_valid('{')", "json_valid(NULL)",
      "json_patch(K, json_object('c', NULL, 'e', json('[1]')))",
      "json_group_array(json(v)) FROM (SELECT '[1]' AS v UNION ALL SELECT '{}')",
      "json_group_object(v, json_extract(v, '$')) FROM (SELECT '[1]' AS v)"};
  for (std::string expr : exprs) {
    for (size_t k = expr.find('K'); k != std::string::npos; k = expr.find('K')) {
      expr.replace(k, 1, kObject);
    }
    for (const std::string& sql : {"SELECT " + expr, "SELECT typeof(" + expr + ")",
                                   "SELECT json_array(" + expr + ")"}) {
      EXPECT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
    }
  }
  // Wrong argument counts are refused at prepare time, by SQLite, as before.
  for (const char* sql : {"SELECT json()", "SELECT json_valid(1, 2)", "SELECT json_type()",
                          "SELECT json_array_length(1, 2, 3)", "SELECT json_quote()"}) {
    EXPECT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
    EXPECT_EQ(Eval(guarded_, sql).rfind("error: wrong number of arguments", 0), 0u) << sql;
  }
}

/// A check that counts its calls and says stop from the 'stop_at'-th on.
struct CountingCheck {
  int calls = 0;
  int stop_at = 0;
  static bool Fn(void* arg, bool /*may_yield*/) {
    auto* self = static_cast<CountingCheck*>(arg);
    return ++self->calls >= self->stop_at;
  }
};

TEST_F(GuardedBuiltinsTest, APrintfPastTheLengthLimitStopsRenderingAtOnce) {
  // 60 planned repeats alternating with 60 pieces of 400,000 bytes each (a string argument,
  // which no width announces): the result is past the 1 MiB limit after 3 of them. Rendering
  // them all first held 24 MB outside SQLite's heap (at 2 MB a piece and 5,000 pieces, 10 GB)
  // before the length check.
  builtins_->set_printf_repeat_threshold(100);
  std::string format, args;
  for (int i = 0; i < 60; ++i) {
    format += "%.200c%s";
    args += ", 'a', b";
  }
  const std::string sql = "SELECT printf('" + format + "'" + args +
                          ") FROM (SELECT printf('%.400000c', 'y') AS b)";
  EXPECT_EQ(Eval(guarded_, sql), "NULL");
  EXPECT_EQ(builtins_->planned_calls(), 2) << "the argument's printf and the outer one";
  EXPECT_LE(builtins_->rendered_pieces(), 3);
  // Within the limit, as the built-in.
  const std::string small = "SELECT printf('%.200c%5d%.200c', 'a', 7, 'b')";
  EXPECT_EQ(Eval(guarded_, small), Eval(plain_, small));
}

TEST_F(GuardedBuiltinsTest, TheCacheOfBuiltinStatementsIsBounded) {
  // Each placement of json() values among a call's arguments is a statement of its own: 256
  // placements over 8 arguments used to stay prepared, in SQLite's shared heap, for the
  // connection's life (127 arguments: 2^127 of them).
  for (int k = 0; k < 256; ++k) {
    std::string args;
    for (int i = 0; i < 8; ++i) {
      args += std::string(i ? "," : "") + ((k >> i) & 1 ? "json('1')" : "1");
    }
    const std::string sql = "SELECT json_array(" + args + ")";
    ASSERT_EQ(Eval(guarded_, sql), Eval(plain_, sql)) << sql;
    ASSERT_LE(builtins_->cached_statements(), GuardedBuiltins::kMaxCachedStatements);
  }
}

TEST_F(GuardedBuiltinsTest, JsonCallsOfOneRowCheckBetweenThemselves) {
  // Four distinct 128 KiB arrays (SQLite reuses the parse of an equal text): each call is
  // preceded by a check, and the row stops at the third.
  // Built without printf, whose repeats have checkpoints of their own.
  const std::string x = "('[' || replace(hex(zeroblob(32768)), '0', '0,') || '0]')";
  std::string row = "SELECT json_valid(" + x + ")";
  for (const char* pad : {" ", "  ", "   "}) {
    row += " + json_valid(" + x + " || '" + pad + "')";
  }
  CountingCheck check{0, 3};
  {
    const StepCheckpoint checkpoint(&CountingCheck::Fn, &check);
    EXPECT_EQ(Eval(guarded_, row), "error: interrupted");
  }
  EXPECT_EQ(check.calls, 3);
  // Told to go on, all four run, each after its check; small calls add up to one check.
  check = {0, 1000};
  {
    const StepCheckpoint checkpoint(&CountingCheck::Fn, &check);
    EXPECT_EQ(Eval(guarded_, row), "4");
    EXPECT_EQ(check.calls, 4);
    check.calls = 0;
    EXPECT_EQ(Eval(guarded_, "SELECT json_valid('[1]') + json_array_length('[1,2]')"), "3")
        << "no check for a few bytes";
    EXPECT_EQ(check.calls, 0);
  }
  EXPECT_EQ(Eval(guarded_, row), "4") << "no check installed";
  // The operators are overridden too.
  check = {0, 1};
  {
    const StepCheckpoint checkpoint(&CountingCheck::Fn, &check);
    EXPECT_EQ(Eval(guarded_, "SELECT " + x + " -> '$[0]'"), "error: interrupted");
    EXPECT_EQ(Eval(guarded_, "SELECT " + x + " ->> '$[0]'"), "error: interrupted");
  }
  EXPECT_EQ(check.calls, 2);
  EXPECT_EQ(Eval(guarded_, "SELECT " + x + " ->> '$[0]'"), "0");
}

}  // namespace
}  // namespace qr
