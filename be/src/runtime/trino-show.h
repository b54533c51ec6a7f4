#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "runtime/query-error.h"

/// Trino's SHOW, DESCRIBE and EXPLAIN statements, answered over the metadata views
/// (trino-metadata.h): each becomes one SELECT that SQLite runs like any other query.
/// Thread-safety: per connection ('db' belongs to the calling executor thread).

namespace qr {

struct TrinoTranslation {
  enum class Kind {
    /// Not one of the statements below: run 'sql' as it is.
    kNone,
    /// Run 'sql' (a SELECT) instead.
    kSelect,
    /// EXPLAIN: prepare 'sql' (the explained statement) and answer with its plan in Trino's
    /// one-column shape (FormatQueryPlan()).
    kExplain,
    /// EXPLAIN (TYPE VALIDATE): prepare 'sql' and answer with one row, Valid = true.
    kExplainValidate,
    /// The statement is one of these but cannot be answered: 'error' says why.
    kError,
  };
  Kind kind = Kind::kNone;
  std::string sql;
  QueryError error;
};

/// Recognizes, in 'sql' (after blanks and comments, with an optional trailing ';'):
///   SHOW CATALOGS [LIKE p [ESCAPE e]]          -> column Catalog
///   SHOW SCHEMAS [FROM|IN c] [LIKE p]          -> column Schema
///   SHOW TABLES [FROM|IN [c.]s] [LIKE p]       -> column Table
///   SHOW COLUMNS FROM|IN t [LIKE p], DESCRIBE t, DESC t -> Column, Type, Extra, Comment
///   SHOW SESSION [LIKE p]                      -> Name, Value, Default, Type, Description
///   SHOW FUNCTIONS [LIKE p]                    -> Function, Return Type, Argument Types,
///                                                 Function Type, Deterministic, Description
///   EXPLAIN [( TYPE {LOGICAL|DISTRIBUTED|VALIDATE}, FORMAT TEXT )] statement
/// Table names have one to three parts ([[catalog.]schema.]table), resolved in catalog
/// 'catalog' and schema main; a missing catalog, schema or table is CATALOG_NOT_FOUND,
/// SCHEMA_NOT_FOUND or TABLE_NOT_FOUND, as Trino reports them ('db' is read to check).
/// EXPLAIN QUERY PLAN (SQLite's), EXPLAIN ANALYZE and DESCRIBE INPUT/OUTPUT are kNone.
TrinoTranslation TranslateTrinoStatement(sqlite3* db, std::string_view sql,
                                         std::string_view catalog);

/// The plan of an EXPLAIN QUERY PLAN statement 'eqp' (stepped to its end here) as indented
/// text, one line per plan step, the way SQLite's shell draws it.
std::string FormatQueryPlan(sqlite3_stmt* eqp);

}  // namespace qr
