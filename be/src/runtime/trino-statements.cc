#include "runtime/trino-statements.h"

#include <cctype>
#include <vector>

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

}  // namespace qr
