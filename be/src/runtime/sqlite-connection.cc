#include "runtime/sqlite-connection.h"

#include "runtime/memory-budget.h"
#include "runtime/sqlite-functions.h"
#include "runtime/sqlite-guarded-functions.h"
#include "runtime/sqlite-heap.h"
#include "runtime/sql-rewrite.h"
#include "runtime/trino-metadata.h"
#include "runtime/trino-show.h"
#include "runtime/trino-statements.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#ifndef QR_VERSION_STRING
#define QR_VERSION_STRING "0.1.0"
#endif

namespace qr {

namespace {

/// Pragmas that only read. Those in the first list take no argument (with one they would set
/// something: PRAGMA user_version=5); those in the second take the name of what they describe.
constexpr std::array<const char*, 22> kReadOnlyPragmas = {
    "application_id", "auto_vacuum", "cache_size", "collation_list", "compile_options",
    "data_version", "database_list", "encoding", "foreign_keys", "freelist_count",
    "function_list", "journal_mode", "max_page_count", "module_list", "page_count", "page_size",
    "pragma_list", "query_only", "schema_version", "user_version", "busy_timeout",
    "synchronous"};
constexpr std::array<const char*, 10> kDescribingPragmas = {
    "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check"};

template <size_t N>
bool InList(const std::array<const char*, N>& list, const char* name) {
  if (name == nullptr) return false;
  for (const char* item : list) {
    if (strcasecmp(item, name) == 0) return true;
  }
  return false;
}

bool IsReadOnlyPragma(const char* name, const char* arg) {
  return InList(kDescribingPragmas, name) || (arg == nullptr && InList(kReadOnlyPragmas, name));
}

/// What a refused authorizer action would have done, for the error message.
std::string DescribeAction(int action, const char* arg1) {
  static constexpr std::array<const char*, 34> kVerbs = {
      "COPY", "CREATE INDEX", "CREATE TABLE", "CREATE TEMP INDEX", "CREATE TEMP TABLE",
      "CREATE TEMP TRIGGER", "CREATE TEMP VIEW", "CREATE TRIGGER", "CREATE VIEW", "DELETE from",
      "DROP INDEX", "DROP TABLE", "DROP TEMP INDEX", "DROP TEMP TABLE", "DROP TEMP TRIGGER",
      "DROP TEMP VIEW", "DROP TRIGGER", "DROP VIEW", "INSERT into", "PRAGMA", "READ", "SELECT",
      "transaction control (BEGIN/COMMIT/ROLLBACK)", "UPDATE of", "ATTACH", "DETACH",
      "ALTER TABLE", "REINDEX", "ANALYZE", "CREATE VIRTUAL TABLE", "DROP VIRTUAL TABLE",
      "FUNCTION", "SAVEPOINT", "RECURSIVE"};
  std::string what = action >= 0 && action < static_cast<int>(kVerbs.size())
                         ? kVerbs[action]
                         : "action " + std::to_string(action);
  const bool names_object = action != SQLITE_TRANSACTION && action != SQLITE_ATTACH &&
                            action != SQLITE_DETACH && action != SQLITE_SAVEPOINT;
  if (names_object && arg1 != nullptr) what += std::string(" ") + arg1;
  return what;
}

void VersionFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** /*argv*/) {
  static const std::string version = EngineVersionString();
  sqlite3_result_text(ctx, version.data(), static_cast<int>(version.size()), SQLITE_STATIC);
}

/// Checks, before SQLite sees it, that 'path' is a readable regular file, so that the error
/// says why (SQLite reports every such case as "unable to open database file").
Status CheckReadableFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  "cannot open the database file '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("the database '" + path +
                           "' is a directory; give the path of an SQLite database file");
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(errno == EACCES ? StatusCode::kPermissionDenied : StatusCode::kInvalidArgument,
                  "cannot read the database file '" + path + "': " + std::strerror(errno));
  }
  ::close(fd);
  return Status::OK();
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

/// Index of the last character of 'sql' that is not blank or ';' (0 if none).
size_t LastSignificant(std::string_view sql) {
  size_t i = sql.size();
  while (i > 0 && (std::isspace(static_cast<unsigned char>(sql[i - 1])) || sql[i - 1] == ';')) {
    --i;
  }
  return i > 0 ? i - 1 : 0;
}

/// ValueLimitRefusals(): a counter, read by /metrics only.
std::atomic<int64_t> value_limit_refusals{0};

}  // namespace

std::string EngineVersionString() {
  return std::string("qr-coordinatord ") + QR_VERSION_STRING + " (SQLite " + sqlite3_libversion() +
         ")";
}

void LineAndColumn(std::string_view text, size_t offset, int* line, int* column) {
  *line = *column = 0;
  if (text.empty()) return;
  if (offset >= text.size()) offset = text.size() - 1;
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++*column;  // count code points, not UTF-8 continuation bytes
    }
  }
}

size_t SkipBlankSql(std::string_view sql, size_t pos) {
  while (pos < sql.size()) {
    const char c = sql[pos];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';') {
      ++pos;
    } else if (sql.substr(pos, 2) == "--") {
      const size_t eol = sql.find('\n', pos);
      pos = eol == std::string_view::npos ? sql.size() : eol + 1;
    } else if (sql.substr(pos, 2) == "/*") {
      const size_t close = sql.find("*/", pos + 2);
      pos = close == std::string_view::npos ? sql.size() : close + 2;
    } else {
      break;
    }
  }
  return pos;
}

bool IsBlankSql(std::string_view sql) { return SkipBlankSql(sql, 0) == sql.size(); }

Status SqliteConnection::Open(const std::string& path, std::unique_ptr<SqliteConnection>* out,
                              std::string_view catalog, int64_t max_value_bytes) {
  QR_RETURN_IF_ERROR(ValidateCatalogName(catalog));
  // SQLite's compiled-in maximum (SQLITE_MAX_LENGTH): a larger limit is silently truncated.
  constexpr int64_t kSqliteMaxLength = 1000000000;
  if (max_value_bytes < 1 || max_value_bytes > kSqliteMaxLength) {
    return InvalidArgument("the value size limit must be between 1 and " +
                           std::to_string(kSqliteMaxLength) + " bytes, got " +
                           std::to_string(max_value_bytes));
  }
  QR_RETURN_IF_ERROR(CheckReadableFile(path));
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(db, catalog));
  if (rc != SQLITE_OK) {
    return InvalidArgument("cannot open the database '" + path +
                           "': " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  QR_RETURN_IF_ERROR(conn->Configure(path, max_value_bytes));
  *out = std::move(conn);
  return Status::OK();
}

SqliteConnection::~SqliteConnection() { sqlite3_close_v2(db_); }

void SqliteConnection::EnableSystemTables(SystemTablesSource* source) {
  system_tables_->set_source(source);
}

Status SqliteConnection::Configure(const std::string& path, int64_t max_value_bytes) {
  int unused = 0;
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, &unused);
  sqlite3_enable_load_extension(db_, 0);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, &unused);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &unused);
  sqlite3_limit(db_, SQLITE_LIMIT_ATTACHED, 0);
  // One value (string, BLOB or row) may not exceed 'max_value_bytes' (--max_value_mb;
  // SQLite's default is 1e9): the page buffer bounds a result's memory only if no single value
  // is huge (SELECT zeroblob(999999999) would cost gigabytes: the value, then its base64
  // JSON), and one call of a built-in, which nothing interrupts, costs time in its input's
  // size. Larger values fail with GENERIC_INSUFFICIENT_RESOURCES (StepError()). Set before
  // GuardedBuiltins::Register(), which copies it to its private connection.
  sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, static_cast<int>(max_value_bytes));
  // A single function call cannot be interrupted: no built-in may be superlinear in its input
  // (docs/architecture.md, "CPU": instr, replace and trim are replaced, LIKE/GLOB bounded).
  ApplyCpuBoundingLimits(db_);
  sqlite3_busy_timeout(db_, 1000);
  // Reading the schema is what detects a file that is not a database.
  if (sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master;", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return InvalidArgument("'" + path + "' is not a usable SQLite database: " +
                           sqlite3_errmsg(db_));
  }
  // The system tables exist on every connection (empty until EnableSystemTables()), so that
  // the metadata views over them can be created.
  QR_RETURN_IF_ERROR(SystemTables::Register(db_, nullptr, &system_tables_));
  // The metadata views live in the temp schema: created before anything becomes read-only.
  QR_RETURN_IF_ERROR(InstallMetadataViews(db_, catalog_));
  if (sqlite3_exec(db_, "PRAGMA query_only=1;", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Internal("cannot make the connection to '" + path + "' read-only: " +
                    sqlite3_errmsg(db_));
  }
  QR_RETURN_IF_ERROR(RegisterLinearTimeFunctions(db_));
  QR_RETURN_IF_ERROR(GuardedBuiltins::Register(db_, &guarded_));
  if (sqlite3_create_function_v2(db_, "version", 0,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                 &VersionFunction, nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_set_authorizer(db_, &SqliteConnection::Authorize, this) != SQLITE_OK) {
    return Internal("cannot configure the connection to '" + path + "': " + sqlite3_errmsg(db_));
  }
  return Status::OK();
}

int SqliteConnection::Authorize(void* self_ptr, int action, const char* arg1, const char* arg2,
                                const char* /*db_name*/, const char* /*trigger*/) {
  auto* self = static_cast<SqliteConnection*>(self_ptr);
  std::string denied;
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      if (arg2 == nullptr ||
          (strcasecmp(arg2, "load_extension") != 0 && strcasecmp(arg2, "fts3_tokenizer") != 0)) {
        return SQLITE_OK;
      }
      denied = std::string("the function ") + arg2 + "()";
      break;
    case SQLITE_PRAGMA:
      if (IsReadOnlyPragma(arg1, arg2)) return SQLITE_OK;
      denied = std::string("PRAGMA ") + (arg1 ? arg1 : "") + (arg2 ? std::string(" = ") + arg2 : "");
      break;
    case SQLITE_UPDATE:
      // Using a table-valued function (pragma_table_info(...)) for the first time asks to
      // update the schema table; "ignore" lets it proceed without any write. A real UPDATE of
      // the schema is refused by sqlite3_stmt_readonly() and the read-only open.
      if (arg1 != nullptr && (strcmp(arg1, "sqlite_master") == 0 || strcmp(arg1, "sqlite_schema") == 0)) {
        return SQLITE_IGNORE;
      }
      [[fallthrough]];
    default:
      denied = DescribeAction(action, arg1);
  }
  if (self->denied_.empty()) self->denied_ = std::move(denied);
  return SQLITE_DENY;
}

void SqliteConnection::SetProgressHandler(int (*fn)(void*), void* arg) {
  sqlite3_progress_handler(db_, fn != nullptr ? 1000 : 0, fn, arg);
}

QueryError SqliteConnection::ReadOnlyError() const {
  std::string msg = "Access denied: the database is read-only";
  if (!denied_.empty()) msg += ", so " + denied_ + " is not allowed";
  msg += ". Only statements that read are accepted: SELECT, WITH, VALUES, EXPLAIN and read-only "
         "PRAGMAs such as PRAGMA table_info(t); ATTACH and load_extension() are not available";
  return QueryError::PermissionDenied(std::move(msg));
}

bool SqliteConnection::Prepare(std::string_view sql, sqlite3_stmt** stmt, QueryError* error) {
  denied_.clear();
  TrinoTranslation trino = TranslateTrinoStatement(db_, sql, catalog_);
  switch (trino.kind) {
    case TrinoTranslation::Kind::kError:
      *error = std::move(trino.error);
      return false;
    case TrinoTranslation::Kind::kExplain:
    case TrinoTranslation::Kind::kExplainValidate:
      return PrepareExplain(trino.sql,
                            trino.kind == TrinoTranslation::Kind::kExplainValidate, stmt, error);
    case TrinoTranslation::Kind::kSelect:
      sql = trino.sql;
      break;
    case TrinoTranslation::Kind::kNone:
      break;
  }
  // Locations of the Trino constructs we explain are given in the statement as sent.
  const std::string_view as_sent = sql;
  std::string rewritten;
  std::vector<SqlEdit> edits;
  if (RewriteCatalogNames(sql, catalog_, &rewritten, &edits)) sql = rewritten;
  const char* const begin = sql.data();
  const char* const end = begin + sql.size();
  const char* tail = begin;
  sqlite3_stmt* s = nullptr;
  // Skips empty statements (";") before the first real one.
  while (s == nullptr && tail < end) {
    const char* start = tail;
    const int rc = sqlite3_prepare_v3(db_, start, static_cast<int>(end - start), 0, &s, &tail);
    if (rc != SQLITE_OK) {
      *error = PrepareError(rc, start - begin, as_sent, edits);
      // A Trino statement SQLite does not know (or, as EXPLAIN ANALYZE, reads as something
      // else it refuses): say so, and what to use instead.
      if (error->name == "SYNTAX_ERROR" || error->name == "PERMISSION_DENIED") {
        if (std::optional<std::string> m = UnsupportedTrinoStatement(sql.substr(start - begin))) {
          *error = QueryError::NotSupported(std::move(*m));
        } else if (error->name == "SYNTAX_ERROR") {
          ExplainTrinoOnlySyntax(as_sent, start - begin, error);
        }
      } else if (error->name == "COLUMN_NOT_FOUND" ||
                 error->message.find("no such function") != std::string::npos) {
        // ARRAY[1] reads as column "array", ROW(1, 2) and MAP(...) as unknown functions.
        ExplainTrinoOnlySyntax(as_sent, start - begin, error);
      }
      return false;
    }
    if (s == nullptr && tail == start) {
      // SQLite stops at a NUL byte without consuming it: without this the loop never ends.
      int line = 0, column = 0;
      LineAndColumn(sql, start - begin, &line, &column);
      *error = QueryError::Syntax("line " + std::to_string(line) + ":" + std::to_string(column) +
                                      ": syntax error: a NUL byte is not valid in SQL text",
                                  line, column);
      return false;
    }
  }
  if (s == nullptr) {
    *error = QueryError::GenericUser(
        "The query is empty: it holds only whitespace, comments or semicolons. Send one SQL "
        "statement, such as SELECT 1");
    return false;
  }
  if (const size_t next = SkipBlankSql(sql, tail - begin); next < sql.size()) {
    sqlite3_finalize(s);
    int line = 0, column = 0;
    LineAndColumn(sql, next, &line, &column);
    *error = QueryError::NotSupported(
        "Only one statement per query is supported; more SQL follows the first statement at "
        "line " + std::to_string(line) + ", column " + std::to_string(column));
    return false;
  }
  if (!sqlite3_stmt_readonly(s)) {
    sqlite3_finalize(s);
    *error = ReadOnlyError();
    return false;
  }
  *stmt = s;
  return true;
}

bool SqliteConnection::PrepareExplain(const std::string& explained, bool validate,
                                      sqlite3_stmt** stmt, QueryError* error) {
  sqlite3_stmt* inner = nullptr;
  if (!Prepare(explained, &inner, error)) return false;
  std::string answer;
  if (validate) {
    answer = "SELECT \"Valid\" FROM temp.qr_valid";
  } else {
    const std::string eqp_sql = std::string("EXPLAIN QUERY PLAN ") + sqlite3_sql(inner);
    sqlite3_stmt* eqp = nullptr;
    if (sqlite3_prepare_v2(db_, eqp_sql.c_str(), -1, &eqp, nullptr) != SQLITE_OK) {
      *error = QueryError::Internal(std::string("cannot explain the statement: ") +
                                    sqlite3_errmsg(db_));
      sqlite3_finalize(inner);
      return false;
    }
    answer = "SELECT " + QuoteString(FormatQueryPlan(eqp)) + " AS \"Query Plan\"";
    sqlite3_finalize(eqp);
  }
  sqlite3_finalize(inner);
  if (sqlite3_prepare_v2(db_, answer.c_str(), -1, stmt, nullptr) != SQLITE_OK) {
    *error = QueryError::Internal(std::string("cannot explain the statement: ") +
                                  sqlite3_errmsg(db_));
    return false;
  }
  return true;
}

void SqliteConnection::ExplainTrinoOnlySyntax(std::string_view sql, size_t base,
                                              QueryError* error) {
  // 'base' counts the empty statements before this one, which the rewrite leaves as they are.
  base = std::min(base, sql.size());
  std::optional<TrinoOnlySyntax> found = FindTrinoOnlySyntax(sql.substr(base), catalog_);
  if (!found) return;
  int line = 0, column = 0;
  LineAndColumn(sql, base + found->offset, &line, &column);
  *error = std::move(found->error);
  error->message =
      "line " + std::to_string(line) + ":" + std::to_string(column) + ": " + error->message;
  error->line = line;
  error->column = column;
}

QueryError SqliteConnection::PrepareError(int rc, size_t base, std::string_view as_sent,
                                          const std::vector<SqlEdit>& edits) {
  std::string msg = sqlite3_errmsg(db_);
  // A refused function is reported as SQLITE_ERROR ("not authorized to use function").
  if ((rc & 0xff) == SQLITE_AUTH || !denied_.empty()) return ReadOnlyError();
  if (StartsWith(msg, "table ") && msg.find("may not be modified") != std::string::npos) {
    denied_ = "modifying the schema";
    return ReadOnlyError();
  }
  if ((rc & 0xff) != SQLITE_ERROR) return StepError(rc);
  int line = 0, column = 0;
  const int offset = sqlite3_error_offset(db_);
  const bool incomplete = msg == "incomplete input";
  if (offset >= 0) {
    LineAndColumn(as_sent, InputOffset(edits, base + offset), &line, &column);
  } else if (incomplete) {
    LineAndColumn(as_sent, LastSignificant(as_sent), &line, &column);
  }
  if (incomplete) msg = "syntax error: the statement ends before it is complete";
  const std::string where =
      line > 0 ? "line " + std::to_string(line) + ":" + std::to_string(column) + ": " : "";
  QueryError e;
  if (StartsWith(msg, "no such table:")) {
    e = QueryError::TableNotFound(where + msg + TableHint());
  } else if (StartsWith(msg, "no such column:")) {
    e = QueryError::ColumnNotFound(where + msg);
  } else if (incomplete || msg.find("syntax error") != std::string::npos ||
             StartsWith(msg, "unrecognized token")) {
    e = QueryError::Syntax(where + msg);
  } else {
    e = QueryError::GenericUser(where + msg);
  }
  e.line = line;
  e.column = column;
  return e;
}

std::string SqliteConnection::TableHint() {
  static constexpr int kMaxNames = 20;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_,
                         "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND "
                         "name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                         -1, &s, nullptr) != SQLITE_OK) {
    return "";
  }
  std::string names;
  int n = 0;
  while (sqlite3_step(s) == SQLITE_ROW) {
    if (++n > kMaxNames) {
      names += ", ...";
      break;
    }
    if (!names.empty()) names += ", ";
    names += reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  return names.empty() ? " (the database has no tables)" : " (tables: " + names + ")";
}

int64_t ValueLimitRefusals() { return value_limit_refusals.load(std::memory_order_relaxed); }

QueryError SqliteConnection::StepError(int rc) {
  std::string msg = sqlite3_errmsg(db_);
  switch (rc & 0xff) {
    case SQLITE_AUTH:
    case SQLITE_READONLY:
      return ReadOnlyError();
    case SQLITE_NOMEM: {
      const int64_t limit = SqliteHeapLimit();
      if (limit > 0) {
        return QueryError::ExceededGlobalMemoryLimit(
            "Query exceeded the memory limit of the SQL engine: SQLite's heap, shared by all "
            "running queries, may hold at most " + FormatBytes(limit) +
            " (--sqlite_heap_limit_mb)");
      }
      return QueryError::InsufficientResources("The query ran out of resources: " + msg);
    }
    case SQLITE_TOOBIG:
      value_limit_refusals.fetch_add(1, std::memory_order_relaxed);
      return QueryError::InsufficientResources(
          "Query exceeded the value size limit: one string, BLOB or row may hold at most " +
          FormatBytes(sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, -1)) + " (--max_value_mb): " +
          msg);
    case SQLITE_FULL:
      return QueryError::InsufficientResources("The query ran out of resources: " + msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_INTERNAL:
    case SQLITE_MISUSE:
    case SQLITE_PROTOCOL:
      return QueryError::Internal("SQLite could not read the database: " + msg);
    default:
      return QueryError::GenericUser(msg);
  }
}

}  // namespace qr
