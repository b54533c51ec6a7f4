#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/query-error.h"

/// Trino statements that SQLite's dialect does not have and that are not answered
/// (SHOW CREATE, DESCRIBE INPUT, USE, SET SESSION, PREPARE, EXECUTE, START TRANSACTION, CALL,
/// ...; SHOW and DESCRIBE of tables are answered, trino-show.h): recognized by their leading
/// keywords so
/// that a client gets NOT_SUPPORTED naming the feature and what to do instead, rather than a
/// SQLite "syntax error near SHOW". Consulted only for statements SQLite failed to prepare:
/// anything SQLite accepts runs as SQLite runs it.
/// Thread-safety: stateless.

namespace qr {

/// The NOT_SUPPORTED message for 'sql' if it starts (after blanks and comments) with a Trino
/// statement we do not run; nullopt otherwise.
std::optional<std::string> UnsupportedTrinoStatement(std::string_view sql);

/// A Trino construct inside a statement that SQLite's dialect lacks, looked for when SQLite
/// reported a syntax error, an unknown column or an unknown function: ARRAY[...], UNNEST(...), TRY_CAST(...), INTERVAL '...', ROW(...),
/// MAP(...) (NOT_SUPPORTED, naming the feature and what to use instead), or a table named
/// catalog.schema.table in a catalog other than 'catalog' (CATALOG_NOT_FOUND).
struct TrinoOnlySyntax {
  QueryError error;  // without a location
  size_t offset;     // byte offset of the construct in the statement
};
std::optional<TrinoOnlySyntax> FindTrinoOnlySyntax(std::string_view sql,
                                                   std::string_view catalog);

}  // namespace qr
