#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/query-error.h"

/// Parameters of EXECUTE ... USING and EXECUTE IMMEDIATE ... USING: Trino literals parsed into
/// values that are bound to the statement's '?' placeholders with sqlite3_bind_*(). A
/// parameter never becomes SQL text, so "'x'' OR 1=1 --'" stays the string x' OR 1=1 --.
/// Thread-safety: stateless functions; a SqlParameter is a plain value.

namespace qr {

/// One bound value and the Trino type it was written as.
struct SqlParameter {
  /// How the value is bound: sqlite3_bind_null/int64/double/text/blob.
  enum class Kind { kNull, kInteger, kDouble, kText, kBlob };
  Kind kind = Kind::kNull;
  int64_t integer = 0;
  double real = 0;
  /// kText: UTF-8 text; kBlob: the bytes.
  std::string bytes;
  /// The Trino type of the literal ("bigint", "varchar", "date", ...), for DESCRIBE INPUT and
  /// messages.
  std::string type = "unknown";

  bool operator==(const SqlParameter&) const = default;
};

/// The most parameters an EXECUTE may bind: SQLite's default limit of host parameters in a
/// statement (SQLITE_MAX_VARIABLE_NUMBER since 3.32). Each parsed one takes ~90 bytes and is
/// kept with the query in the query log: the 2 bytes of "1," would otherwise become ~45x
/// their size, ~46 MB for a 1 MiB statement.
inline constexpr size_t kMaxParameters = 32766;

/// Parses the comma-separated literals of a USING clause ('text' is what follows USING) into
/// 'out'. Accepted: NULL, TRUE, FALSE, integers (bigint), decimals (1.5, bound as a double),
/// doubles (1e3), 'strings' ('' for a quote), X'hex', DATE/TIME/TIMESTAMP '...' (checked,
/// bound as ISO text, the way dates are stored in SQLite), DECIMAL/DOUBLE/REAL/BIGINT/INTEGER/
/// SMALLINT/TINYINT/VARCHAR/CHAR/UUID '...', infinity(), nan(), each optionally signed when
/// numeric. Anything else (ARRAY, ROW, MAP, expressions) fails with a message naming the
/// parameter and what is accepted. At most kMaxParameters of them. On an error, '*out' is
/// left empty.
bool ParseParameterList(std::string_view text, std::vector<SqlParameter>* out,
                        QueryError* error);

/// Parses one literal starting at '*pos' (leading blanks skipped) and advances '*pos' past it.
/// On failure returns false with '*error': INVALID_LITERAL for a malformed value (DATE
/// '2024-13-01'), NOT_SUPPORTED for a Trino value SQLite has no binding for (ARRAY[1]),
/// SYNTAX_ERROR when no literal starts there.
bool ParseTrinoLiteral(std::string_view text, size_t* pos, SqlParameter* out,
                       QueryError* error);

/// Parses a Trino string literal ('...' with '' for a quote) at '*pos' (leading blanks
/// skipped) into '*out'; false if there is none or it is not closed.
bool ParseStringLiteral(std::string_view text, size_t* pos, std::string* out);

/// Binds 'params' to the placeholders of 'stmt', in order. Fails with INVALID_PARAMETER_USAGE
/// when their number differs from the statement's placeholders (also when parameters are
/// given to a statement without any, or none to one with '?').
bool BindParameters(sqlite3_stmt* stmt, const std::vector<SqlParameter>& params,
                    QueryError* error);

}  // namespace qr
