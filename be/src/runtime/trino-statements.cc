#include "runtime/trino-statements.h"

#include <cctype>
#include <vector>

#include "runtime/sql-rewrite.h"
#include "runtime/sqlite-connection.h"

namespace qr {
namespace {

/// The first 'n' words of 'sql' (identifier characters), upper-cased, skipping blanks and
/// comments between them.
std::vector<std::string> LeadingWords(std::string_view sql, size_t n) {
  std::vector<std::string> words;
  size_t pos = SkipBlankSql(sql, 0);
  while (words.size() < n && pos < sql.size()) {
    std::string word;
    while (pos < sql.size() &&
           (std::isalnum(static_cast<unsigned char>(sql[pos])) || sql[pos] == '_')) {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[pos])));
      ++pos;
    }
    if (word.empty()) break;
    words.push_back(std::move(word));
    pos = SkipBlankSql(sql, pos);
  }
  return words;
}

constexpr char kSqliteDialect[] =
    " Statements run in SQLite's SQL dialect (docs/protocol.md, \"SQL dialect\").";

}  // namespace

std::optional<std::string> UnsupportedTrinoStatement(std::string_view sql) {
  const std::vector<std::string> w = LeadingWords(sql, 2);
  if (w.empty()) return std::nullopt;
  const std::string& first = w[0];
  const std::string second = w.size() > 1 ? w[1] : "";
  std::string msg;
  if (first == "SHOW") {
    msg = "SHOW " + (second.empty() ? std::string("statements") : second) +
          " is not supported. Supported are SHOW CATALOGS, SHOW SCHEMAS, SHOW TABLES, SHOW "
          "COLUMNS, SHOW SESSION and SHOW FUNCTIONS; a table's definition is in SELECT sql "
          "FROM sqlite_schema WHERE name = 't'.";
  } else if (first == "DESCRIBE" || first == "DESC") {
    msg = first + " is not supported. Use PRAGMA table_info(t) or SELECT * FROM "
                  "pragma_table_info('t').";
  } else if (first == "USE") {
    // The coordinator answers USE, SET/RESET SESSION, PREPARE, EXECUTE and DEALLOCATE sent as
    // statements (service/session-statements.h); SQLite sees them only as the SQL of a
    // prepared statement, or from a caller of the engine without a coordinator.
    msg = "USE cannot run as the SQL of a prepared statement: send it as a statement of its "
          "own (there is one catalog and one schema, main).";
  } else if ((first == "SET" || first == "RESET") && second == "SESSION") {
    msg = first + " SESSION cannot run as the SQL of a prepared statement: send it as a "
                  "statement of its own.";
  } else if (first == "PREPARE" || first == "DEALLOCATE" || first == "EXECUTE") {
    msg = first + (second == "IMMEDIATE" ? " IMMEDIATE" : "") +
          " cannot run as the SQL of a prepared statement: send it as a statement of its own, "
          "with the values as literals or bound with USING.";
  } else if (first == "START" && second == "TRANSACTION") {
    msg = "START TRANSACTION is not supported: every statement runs alone in its own read-only "
          "snapshot of the database.";
  } else if (first == "CALL") {
    msg = "CALL cannot run as the SQL of a prepared statement: send CALL "
          "system.runtime.kill_query(...) as a statement of its own.";
  } else if (first == "EXPLAIN" && second == "ANALYZE") {
    msg = "EXPLAIN ANALYZE is not supported. Use EXPLAIN for the plan (SQLite's, as text).";
  } else {
    return std::nullopt;
  }
  return msg + kSqliteDialect;
}

std::optional<TrinoOnlySyntax> FindTrinoOnlySyntax(std::string_view sql,
                                                   std::string_view catalog) {
  const std::vector<SqlToken> t = TokenizeSql(sql);
  auto punct = [&](size_t i, char c) {
    return i < t.size() && t[i].kind == SqlToken::Kind::kPunct && sql[t[i].begin] == c;
  };
  auto name = [&](size_t i) {
    return i < t.size() &&
           (t[i].kind == SqlToken::Kind::kWord || t[i].kind == SqlToken::Kind::kQuotedIdentifier);
  };
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != SqlToken::Kind::kWord) continue;
    const std::string& w = t[i].value;
    std::string msg;
    // SQLite reads [1, 2] as a quoted identifier: ARRAY[1, 2] is column "array" aliased.
    if (w == "array" && i + 1 < t.size() && sql[t[i + 1].begin] == '[') {
      msg = "ARRAY[...] is not supported: SQLite has no array type. Use json_array(...), and "
            "json_each(...) to read one as rows.";
    } else if (w == "unnest" && punct(i + 1, '(')) {
      msg = "UNNEST is not supported. Use json_each(json_array(...)) or a VALUES list as a "
            "table.";
    } else if (w == "try_cast" && punct(i + 1, '(')) {
      msg = "TRY_CAST is not supported. Use CAST (SQLite's CAST never fails: text that is not "
            "a number becomes 0), or CASE with typeof() to test a value first.";
    } else if (w == "interval" && i + 1 < t.size() && t[i + 1].kind == SqlToken::Kind::kString) {
      msg = "INTERVAL literals are not supported. Use SQLite's date and time modifiers: "
            "date(d, '+1 day'), datetime(t, '-3 hours').";
    } else if (w == "row" && punct(i + 1, '(')) {
      msg = "ROW(...) is not supported. Use a row value (a, b) in comparisons, or "
            "json_object(...).";
    } else if (w == "map" && punct(i + 1, '(')) {
      msg = "MAP(...) is not supported. Use json_object(...).";
    } else if ((w == "from" || w == "join") && name(i + 1) && punct(i + 2, '.') &&
               name(i + 3) && punct(i + 4, '.') && name(i + 5) && t[i + 1].value != "system" &&
               !SameName(t[i + 1].value, catalog)) {
      // The served catalog's and system's names resolve (sql-rewrite.h).
      return TrinoOnlySyntax{
          QueryError::CatalogNotFound(
              "Catalog '" + t[i + 1].value + "' does not exist: the one catalog is the served "
              "database, '" + std::string(catalog) + "' (SHOW CATALOGS)"),
          t[i + 1].begin};
    } else {
      continue;
    }
    return TrinoOnlySyntax{QueryError::NotSupported(msg + kSqliteDialect), t[i].begin};
  }
  return std::nullopt;
}

}  // namespace qr
