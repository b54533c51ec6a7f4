#pragma once

#include <string>
#include <string_view>

#include "runtime/query-error.h"

/// DESCRIBE OUTPUT of a prepared statement: what its result columns will be, read from the
/// prepared (never stepped) SQLite statement.
/// Thread-safety: as the connection: one caller at a time.

namespace qr {

class SqliteConnection;

/// Prepares 'sql' on 'conn' without running it and writes into '*out' a SELECT answering
/// Trino's DESCRIBE OUTPUT, one row per result column: "Column Name", "Catalog", "Schema",
/// "Table", "Type", "Type Size", "Aliased". Types come from the declared column types; an
/// expression's type is known only once values exist, so it is "unknown". Every name is a
/// quoted string literal of '*out', never SQL. On failure returns false with '*error' (the
/// statement's own prepare error).
bool DescribeOutputSql(SqliteConnection* conn, std::string_view sql, std::string* out,
                       QueryError* error);

}  // namespace qr
