#pragma once

#include <cstdint>
#include <string>
#include <string_view>

/// Trino's parameterized types for declared SQLite column types (docs/protocol.md, "Types"):
/// DATE, TIMESTAMP(3), DECIMAL(p,s) and VARCHAR(n), with the text encodings the Trino
/// protocol uses for their values.
/// Thread-safety: pure functions.

namespace qr {

/// The Trino type of a result column.
enum class ColumnKind : uint8_t {
  /// Not decided yet: no usable declared type, so the values decide.
  kUndecided,
  /// Trino's "unknown": every value seen while deciding was NULL.
  kUnknown,
  kBigint,
  kDouble,
  kVarchar,
  kVarbinary,
  kBoolean,
  /// date: "YYYY-MM-DD".
  kDate,
  /// timestamp(3): "YYYY-MM-DD HH:MM:SS.fff".
  kTimestamp,
  /// decimal(p,s): a JSON string with exactly s digits after the point.
  kDecimal,
};

/// A Trino type: a kind and its parameters.
struct ColumnType {
  ColumnKind kind = ColumnKind::kUndecided;
  /// varchar(n): n; 0 is unbounded varchar.
  int32_t length = 0;
  /// decimal(p,s).
  int16_t precision = 0;
  int16_t scale = 0;
};

/// The Trino type a declared column type maps to. First the types Trino spells the same way:
/// DATE -> date; TIMESTAMP / DATETIME (with an optional precision, without a time zone) ->
/// timestamp(3); DECIMAL(p[,s]) / NUMERIC(p[,s]) with 1 <= p <= 38 -> decimal(p,s);
/// VARCHAR(n) / CHAR(n) / CHARACTER VARYING(n) / NVARCHAR(n) -> varchar(n). Then SQLite's own
/// substring rules: BOOL -> boolean; INT -> bigint (SQLite integers are 64-bit, so INTEGER
/// is not Trino's 32-bit integer); CHAR/CLOB/TEXT -> varchar; BLOB -> varbinary;
/// REAL/FLOA/DOUB -> double (SQLite's REAL is 8 bytes, Trino's real is 4); other DATE/TIME
/// types -> varchar; NUMERIC/DECIMAL without a precision -> double. kUndecided for NULL (an
/// expression) or an unrecognized type.
ColumnType TypeFromDecl(const char* decl_type);

/// The Trino type name: "bigint", "varchar(25)", "decimal(12,2)", "timestamp(3)", ...
std::string TypeName(const ColumnType& type);

/// The typeSignature object as JSON text, e.g. {"rawType":"date","arguments":[]}.
std::string TypeSignatureJson(const ColumnType& type);

/// The JDBC type code (java.sql.Types) of 'type', as system.jdbc.columns reports it.
int JdbcTypeCode(const ColumnType& type);

/// A date "YYYY-MM-DD" from a text value that starts with one (followed by nothing, a blank
/// or 'T'); false otherwise.
bool DateFromText(std::string_view text, std::string* out);
/// A date from seconds since 1970-01-01 UTC.
std::string DateFromUnixSeconds(double seconds);

/// A timestamp "YYYY-MM-DD HH:MM:SS.fff" from "YYYY-MM-DD[( |T)HH:MM[:SS[.f...]]]" with an
/// optional trailing "Z" (fractions past milliseconds are truncated); false otherwise.
bool TimestampFromText(std::string_view text, std::string* out);
/// A timestamp from seconds since 1970-01-01 UTC (milliseconds kept).
std::string TimestampFromUnixSeconds(double seconds);

/// The decimal text of 'text' with exactly 'scale' digits after the point, rounded half away
/// from zero: "12.345" at scale 2 is "12.35", "7" is "7.00". Accepts [+-]digits[.digits]
/// (with blanks around); false for anything else (exponents included).
bool DecimalFromText(std::string_view text, int scale, std::string* out);
/// Finite 'v' with 'scale' digits after the point.
std::string DecimalFromDouble(double v, int scale);
std::string DecimalFromInt(int64_t v, int scale);

}  // namespace qr
