#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json-encoding.h"
#include "runtime/result-buffer.h"
#include "runtime/trino-types.h"

/// Mapping of SQLite result columns to Trino columns (docs/protocol.md, "Types"),
/// encoding of their values as JSON, and the readers of a row's values that the encoder reads
/// (a statement's current row, or copies of a first page's rows).
/// Thread-safety: the functions are pure; a reader or a PendingRows belongs to one thread.

namespace qr {

/// The kind of TypeFromDecl(decl_type) (trino-types.h).
ColumnKind KindFromDeclType(const char* decl_type);

/// The kind of a value of SQLite storage class 'sqlite_type'; kUndecided for SQLITE_NULL.
ColumnKind KindFromStorageClass(int sqlite_type);

/// Folds the kind of one more value into the kind decided so far for an expression column:
/// the first non-NULL value decides, except that bigint widens to double when a REAL value
/// follows, and numbers widen to varchar when TEXT follows (so no value is forced into a type
/// that cannot hold it).
ColumnKind MergeValueKind(ColumnKind so_far, ColumnKind value);

/// The Trino column for SQLite column 'index' named 'sqlite_name' of kind 'kind'
/// (kUndecided is published as unknown). The name is "_col<index>" when SQLite's name is
/// unusable (see IsUsableColumnName).
Column MakeColumn(const char* sqlite_name, int index, ColumnKind kind);
/// The same for a type with parameters (varchar(n), decimal(p,s), timestamp(3)).
Column MakeColumn(const char* sqlite_name, int index, const ColumnType& type);

/// False for names that are not names: empty, all blanks, or the text of a bare literal, which
/// is what SQLite calls an unaliased literal column ("1", "-2.5", "'a'", "X'00'", "NULL",
/// "TRUE"); Trino calls those "_col<N>". (A column explicitly aliased AS "1" is renamed too.)
bool IsUsableColumnName(std::string_view name);

/// Reads values through the sqlite3_column_* functions of a statement positioned on a row.
struct StmtValues {
  sqlite3_stmt* stmt;
  int type(int i) const { return sqlite3_column_type(stmt, i); }
  int64_t int64(int i) const { return sqlite3_column_int64(stmt, i); }
  double dbl(int i) const { return sqlite3_column_double(stmt, i); }
  std::string_view text(int i) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
    return p ? std::string_view(p, sqlite3_column_bytes(stmt, i)) : std::string_view();
  }
  std::string_view blob(int i) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, i));
    return p ? std::string_view(p, sqlite3_column_bytes(stmt, i)) : std::string_view();
  }
  /// The size of a TEXT or BLOB value without materializing it (a zeroblob stays unexpanded).
  int64_t bytes(int i) const { return sqlite3_column_bytes(stmt, i); }
};

/// Reads values of one row held as protected sqlite3_value copies (sqlite3_value_dup()); the
/// sqlite3_value_* conversions are the same as sqlite3_column_*'s.
struct CopiedValues {
  sqlite3_value* const* row;
  int type(int i) const { return sqlite3_value_type(row[i]); }
  int64_t int64(int i) const { return sqlite3_value_int64(row[i]); }
  double dbl(int i) const { return sqlite3_value_double(row[i]); }
  std::string_view text(int i) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(row[i]));
    return p ? std::string_view(p, sqlite3_value_bytes(row[i])) : std::string_view();
  }
  std::string_view blob(int i) const {
    const auto* p = static_cast<const char*>(sqlite3_value_blob(row[i]));
    return p ? std::string_view(p, sqlite3_value_bytes(row[i])) : std::string_view();
  }
  int64_t bytes(int i) const { return sqlite3_value_bytes(row[i]); }
};

/// The rows of a first page, held as value copies while the types of expression columns are
/// decided from their values (columns must be published before the first page).
class PendingRows {
 public:
  explicit PendingRows(int num_columns) : num_columns_(num_columns) {}
  ~PendingRows() {
    for (sqlite3_value* v : values_) sqlite3_value_free(v);
  }
  PendingRows(const PendingRows&) = delete;
  PendingRows& operator=(const PendingRows&) = delete;

  /// Copies the current row of 'stmt'; false when out of memory.
  bool Add(sqlite3_stmt* stmt) {
    for (int i = 0; i < num_columns_; ++i) {
      sqlite3_value* v = sqlite3_value_dup(sqlite3_column_value(stmt, i));
      if (v == nullptr) return false;
      values_.push_back(v);
      bytes_ += 8 + sqlite3_value_bytes(v);
    }
    ++rows_;
    return true;
  }
  int64_t num_rows() const { return rows_; }
  int64_t approx_bytes() const { return bytes_; }
  CopiedValues Row(int64_t r) const { return CopiedValues{values_.data() + r * num_columns_}; }

 private:
  const int num_columns_;
  std::vector<sqlite3_value*> values_;
  int64_t rows_ = 0;
  int64_t bytes_ = 0;
};

/// The current row of a statement with each value's storage class, and a TEXT or BLOB's size,
/// read from SQLite once: the size check before a row is encoded and the encoding both need
/// them (asking twice was ~11% of a wide scan's instructions, docs/benchmarks.md). Reading the
/// size first is safe: a TEXT or BLOB value's UTF-8 size is what sqlite3_column_text() then
/// returns (a UTF-16 database's text is converted by either call, to the same bytes).
class RowValues {
 public:
  RowValues(sqlite3_stmt* stmt, std::vector<int>* types, std::vector<int64_t>* sizes)
      : stmt_(stmt), types_(types->data()), sizes_(sizes->data()) {
    const int n = static_cast<int>(types->size());
    for (int i = 0; i < n; ++i) {
      const int t = sqlite3_column_type(stmt, i);
      types_[i] = t;
      sizes_[i] = t == SQLITE_TEXT || t == SQLITE_BLOB ? sqlite3_column_bytes(stmt, i) : 0;
    }
  }
  int type(int i) const { return types_[i]; }
  int64_t int64(int i) const { return sqlite3_column_int64(stmt_, i); }
  double dbl(int i) const { return sqlite3_column_double(stmt_, i); }
  std::string_view text(int i) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    return p ? std::string_view(p, Size(i)) : std::string_view();
  }
  std::string_view blob(int i) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p ? std::string_view(p, Size(i)) : std::string_view();
  }
  int64_t bytes(int i) const { return Size(i); }

 private:
  /// A number read as text or bytes is converted by SQLite first: its size is asked after.
  size_t Size(int i) const {
    const int t = types_[i];
    return static_cast<size_t>(t == SQLITE_TEXT || t == SQLITE_BLOB
                                   ? sizes_[i]
                                   : sqlite3_column_bytes(stmt_, i));
  }
  sqlite3_stmt* const stmt_;
  int* const types_;
  int64_t* const sizes_;
};

/// From this size on, EncodedSizeBound() counts a text value's escaped size exactly.
inline constexpr int64_t kExactJsonSizeFromBytes = 1024;

/// The JSON bytes AppendValue() appends for value 'i', computed before it is encoded: what
/// must fit in a memory budget first. Exact for base64 and for text of at least
/// kExactJsonSizeFromBytes (escaping can make text 6 times longer: a control byte becomes
/// \u00XX, so a row of 60 2 MB texts of NUL bytes counted at its length would build 720 MB
/// before the check after the row; counting costs one more pass over long values only).
/// Shorter text counts its length plus quotes; what its escapes add is checked after the row,
/// at most 5 bytes per byte of short values. A BLOB of a column whose kind its values still
/// decide (kUndecided, kUnknown) counts as base64, what it will most likely be sent as, so
/// that a first page of huge BLOBs fails before they are copied rather than after (a row of
/// 60 2 MB zeroblobs: 120 MB copied, then refused at 160 MB encoded).
template <typename Values>
int64_t EncodedSizeBound(const Values& values, int i, ColumnKind kind) {
  const int type = values.type(i);
  if (type != SQLITE_TEXT && type != SQLITE_BLOB) return 24;
  const int64_t n = values.bytes(i);
  const bool base64 =
      kind == ColumnKind::kVarbinary ||
      (type == SQLITE_BLOB && (kind == ColumnKind::kUndecided || kind == ColumnKind::kUnknown));
  if (base64) return (n + 2) / 3 * 4 + 2;
  if (n >= kExactJsonSizeFromBytes) {
    // The other kinds (numbers, booleans, dates, decimals) encode to fewer bytes than this.
    return static_cast<int64_t>(JsonStringSize(values.text(i)));
  }
  return n + 2;
}

/// 1 for "true", 0 for "false" (any case), -1 for any other text.
int BoolFromText(std::string_view text);

/// Appends a value of a date, timestamp(3) or decimal(p,s) column 'type' given as SQLite
/// storage class 'sqlite_type' (never SQLITE_NULL) with its integer, double and text forms:
///  - date / timestamp: text in the form TypeFromDecl's comment gives, or a number of seconds
///    since 1970-01-01 UTC;
///  - decimal: a number, or text holding a plain decimal number, rounded to the scale.
/// A value that is none of these is sent as null (CAST(col AS TEXT) shows it as stored).
/// Returns the bytes counted for processedBytes.
int64_t AppendTemporalOrDecimal(const ColumnType& type, int sqlite_type, int64_t i, double d,
                                std::string_view text, std::string* out);

/// Appends value 'i' of 'values' as JSON of column kind 'kind'; returns its size for the
/// processedBytes statistic (8 per number, the length of text and blobs, 0 for NULL).
///
/// A value whose storage class differs from the column's type is converted the way SQLite's
/// CAST converts it, so that every value is valid for the published type:
///  - bigint: REAL is truncated toward zero (clamped to the int64 range); TEXT/BLOB take their
///    leading integer ("12abc" -> 12, "abc" -> 0), like CAST(x AS INTEGER).
///  - double: INTEGER becomes "3.0"; TEXT/BLOB take their leading number, like CAST(x AS REAL).
///  - varchar: numbers are rendered as SQLite renders them as text ("3", "2.5"); BLOB bytes are
///    taken as text (invalid UTF-8 replaced by U+FFFD).
///  - varbinary: the bytes of the value's text form, base64-encoded.
///  - boolean: nonzero numbers are true; TEXT "true"/"false" (any case), else its number.
///  - unknown (NULL throughout the rows that decided the type): a later non-NULL value is sent
///    in its natural JSON form rather than silently dropped.
template <typename Values>
int64_t AppendValue(const Values& values, int i, ColumnKind kind, std::string* out) {
  const int type = values.type(i);
  if (type == SQLITE_NULL) {
    out->append("null");
    return 0;
  }
  if (kind == ColumnKind::kDate || kind == ColumnKind::kTimestamp) {
    return AppendTemporalOrDecimal(ColumnType{kind}, type, values.int64(i), values.dbl(i),
                                   type == SQLITE_TEXT ? values.text(i) : std::string_view(),
                                   out);
  }
  if (kind == ColumnKind::kUnknown || kind == ColumnKind::kUndecided) {
    kind = KindFromStorageClass(type);
  }
  switch (kind) {
    case ColumnKind::kBigint: AppendJsonInt(values.int64(i), out); return 8;
    case ColumnKind::kDouble: AppendJsonDouble(values.dbl(i), out); return 8;
    case ColumnKind::kBoolean: {
      int b;
      if (type == SQLITE_INTEGER) {
        b = values.int64(i) != 0;
      } else if (type == SQLITE_FLOAT) {
        b = values.dbl(i) != 0.0;
      } else if ((b = BoolFromText(values.text(i))) < 0) {
        b = values.dbl(i) != 0.0;
      }
      out->append(b ? "true" : "false");
      return 1;
    }
    case ColumnKind::kVarbinary: {
      std::string_view bytes = values.blob(i);
      out->push_back('"');
      AppendBase64(bytes, out);
      out->push_back('"');
      return static_cast<int64_t>(bytes.size());
    }
    default: {
      std::string_view text = values.text(i);
      AppendJsonString(text, out);
      return static_cast<int64_t>(text.size());
    }
  }
}

/// AppendValue for a column of type 'type': decimals need their scale.
template <typename Values>
int64_t AppendValue(const Values& values, int i, const ColumnType& type, std::string* out) {
  if (type.kind != ColumnKind::kDecimal || values.type(i) == SQLITE_NULL) {
    return AppendValue(values, i, type.kind, out);
  }
  const int sqlite_type = values.type(i);
  return AppendTemporalOrDecimal(type, sqlite_type, values.int64(i), values.dbl(i),
                                 sqlite_type == SQLITE_TEXT ? values.text(i) : std::string_view(),
                                 out);
}

}  // namespace qr
