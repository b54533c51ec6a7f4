#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/query-error.h"
#include "runtime/sql-rewrite.h"
#include "runtime/sqlite-guarded-functions.h"
#include "runtime/system-tables.h"
#include "util/status.h"

namespace qr {

/// The version string answered by SQL's version(), e.g. "qr-coordinatord 0.1.0 (SQLite 3.40.1)".
std::string EngineVersionString();

/// One read-only SQLite connection, locked down for untrusted SQL: opened with
/// SQLITE_OPEN_READONLY, `PRAGMA query_only=1`, extension loading off, no attached databases,
/// defensive mode, and an authorizer that allows only reads (SELECT, recursive CTEs, functions
/// other than load_extension(), and read-only PRAGMAs). Statements that would write anyway
/// (sqlite3_stmt_readonly() false) are refused as well. Its temp schema holds Trino's metadata
/// tables as views (trino-metadata.h), created before the connection is made read-only.
/// Thread-safety: not thread-safe; one executor thread owns it (SQLITE_OPEN_NOMUTEX).
class SqliteConnection {
 public:
  /// The default of the most bytes one value (string, BLOB) or row may hold, --max_value_mb.
  /// One call of a built-in cannot be interrupted and costs time in its input's size: at
  /// 2 MiB the slowest (the json_* parse, strftime's format) take ~15-30 ms on a quiet
  /// machine, at 16 MiB 0.2-0.45 s (docs/architecture.md, "CPU").
  static constexpr int64_t kDefaultMaxValueBytes = int64_t{2} << 20;

  /// Opens 'path' and checks that it is a readable SQLite database. A missing, unreadable or
  /// non-SQLite file is an error that names the path and the reason.
  /// 'catalog' names the database in Trino's metadata and three-part names
  /// (trino-metadata.h); an invalid name is an error. 'max_value_bytes' (> 0) bounds every
  /// value and row (SQLITE_LIMIT_LENGTH); a statement that makes a larger one fails with
  /// GENERIC_INSUFFICIENT_RESOURCES, naming --max_value_mb.
  static Status Open(const std::string& path, std::unique_ptr<SqliteConnection>* out,
                     std::string_view catalog = "sqlite",
                     int64_t max_value_bytes = kDefaultMaxValueBytes);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  /// Prepares the one statement in 'sql' into '*stmt'. On failure returns false with '*error'
  /// set: a syntax error (with its location), a missing table or column, a refused write,
  /// more than one statement, or an empty query. Trino's SHOW, DESCRIBE and EXPLAIN are
  /// answered as SELECTs (trino-show.h), and Trino's qualified names rewritten to SQLite's
  /// (sql-rewrite.h); error locations are then those of the rewritten text.
  bool Prepare(std::string_view sql, sqlite3_stmt** stmt, QueryError* error);

  /// The error of a failed sqlite3_step() with result code 'rc' (not SQLITE_INTERRUPT).
  QueryError StepError(int rc);

  /// Calls 'fn(arg)' about every 1000 virtual machine instructions; a nonzero return
  /// interrupts the running statement with SQLITE_INTERRUPT. nullptr removes the handler.
  void SetProgressHandler(int (*fn)(void*), void* arg);

  sqlite3* db() const { return db_; }

  /// Feeds the system tables (system-tables.h; empty until then) from 'source', which must
  /// outlive this connection. Before the connection runs a statement.
  void EnableSystemTables(SystemTablesSource* source);
  SystemTables* system_tables() const { return system_tables_.get(); }

 private:
  SqliteConnection(sqlite3* db, std::string_view catalog) : db_(db), catalog_(catalog) {}
  Status Configure(const std::string& path, int64_t max_value_bytes);
  /// Prepares the plan of 'explained' in Trino's one-column shape ("Query Plan"), or, for
  /// 'validate', the one row Valid = true once 'explained' prepares.
  bool PrepareExplain(const std::string& explained, bool validate, sqlite3_stmt** stmt,
                      QueryError* error);
  static int Authorize(void* self, int action, const char* arg1, const char* arg2,
                       const char* db_name, const char* trigger);
  /// The error for a failed prepare, with result code 'rc', of the statement that starts at
  /// byte 'base' of the SQL SQLite saw (its error offset is relative to that start), which is
  /// 'as_sent' with the catalog names rewritten by 'edits': the location is in 'as_sent'.
  QueryError PrepareError(int rc, size_t base, std::string_view as_sent,
                          const std::vector<SqlEdit>& edits);
  /// Replaces the error '*error' (a syntax error, an unknown column or function) of the
  /// statement at byte 'base' of 'sql' (as the client sent it, before the catalog names were
  /// rewritten) with what FindTrinoOnlySyntax() finds in it (trino-statements.h), if anything.
  void ExplainTrinoOnlySyntax(std::string_view sql, size_t base, QueryError* error);
  QueryError ReadOnlyError() const;
  /// " (tables: a, b, ...)": what a user who named a missing table can choose from.
  std::string TableHint();

  sqlite3* const db_;
  /// The served catalog's name.
  const std::string catalog_;
  /// printf/format/json_patch with their guards (sqlite-guarded-functions.h). Destroyed after
  /// 'db_' is closed (members go after the destructor's body).
  std::unique_ptr<GuardedBuiltins> guarded_;
  /// Like 'guarded_': SQLite's modules point at it until 'db_' is closed.
  std::unique_ptr<SystemTables> system_tables_;
  /// What the authorizer refused during the current prepare ("INSERT into lineitem"), for the
  /// error message; empty when nothing was refused.
  std::string denied_;
};

/// Statements failed by a value or row over their connection's limit (--max_value_mb), in
/// this process.
int64_t ValueLimitRefusals();

/// 1-based line and column (in code points) of byte 'offset' of 'text'. 'offset' is clamped
/// to the last character; an empty text gives 0, 0.
void LineAndColumn(std::string_view text, size_t offset, int* line, int* column);

/// The first position at or after 'pos' that is not whitespace, a semicolon or a comment.
size_t SkipBlankSql(std::string_view sql, size_t pos);
/// True when 'sql' holds nothing but whitespace, semicolons and comments.
bool IsBlankSql(std::string_view sql);

}  // namespace qr
