#include "runtime/row-encoder.h"

#include <cctype>
#include <cmath>
#include <string>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>

namespace qr {

namespace {

/// A numeric literal as SQLite spells one: [+-] digits [. digits] [e [+-] digits], or 0x hex.
bool IsNumericLiteral(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  auto digits = [&](auto pred) {
    size_t start = i;
    while (i < s.size() && pred(static_cast<unsigned char>(s[i]))) ++i;
    return i - start;
  };
  auto is_digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (s.size() > i + 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    i += 2;
    return digits([](unsigned char c) { return std::isxdigit(c) != 0; }) > 0 && i == s.size();
  }
  size_t n = digits(is_digit);
  if (i < s.size() && s[i] == '.') {
    ++i;
    n += digits(is_digit);
  }
  if (n == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits(is_digit) == 0) return false;
  }
  return i == s.size();
}


}  // namespace

ColumnKind KindFromDeclType(const char* decl_type) { return TypeFromDecl(decl_type).kind; }

ColumnKind KindFromStorageClass(int sqlite_type) {
  switch (sqlite_type) {
    case SQLITE_INTEGER: return ColumnKind::kBigint;
    case SQLITE_FLOAT: return ColumnKind::kDouble;
    case SQLITE_TEXT: return ColumnKind::kVarchar;
    case SQLITE_BLOB: return ColumnKind::kVarbinary;
    default: return ColumnKind::kUndecided;
  }
}

ColumnKind MergeValueKind(ColumnKind so_far, ColumnKind value) {
  if (value == ColumnKind::kUndecided || value == so_far) return so_far;
  if (so_far == ColumnKind::kUndecided || so_far == ColumnKind::kUnknown) return value;
  const auto is_number = [](ColumnKind k) {
    return k == ColumnKind::kBigint || k == ColumnKind::kDouble;
  };
  if (is_number(so_far) && is_number(value)) return ColumnKind::kDouble;
  if (is_number(so_far) && value == ColumnKind::kVarchar) return ColumnKind::kVarchar;
  return so_far;
}

bool IsUsableColumnName(std::string_view name) {
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) {
    name.remove_prefix(1);
  }
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) {
    name.remove_suffix(1);
  }
  if (name.empty()) return false;
  const absl::string_view n(name.data(), name.size());
  if (absl::EqualsIgnoreCase(n, "NULL") || absl::EqualsIgnoreCase(n, "TRUE") ||
      absl::EqualsIgnoreCase(n, "FALSE")) {
    return false;
  }
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'') return false;
  if (name.size() >= 3 && (name[0] == 'x' || name[0] == 'X') && name[1] == '\'' &&
      name.back() == '\'') {
    return false;
  }
  return !IsNumericLiteral(name);
}

Column MakeColumn(const char* sqlite_name, int index, ColumnKind kind) {
  return MakeColumn(sqlite_name, index, ColumnType{kind});
}

Column MakeColumn(const char* sqlite_name, int index, const ColumnType& type) {
  Column c;
  if (sqlite_name != nullptr && IsUsableColumnName(sqlite_name)) {
    c.name = sqlite_name;
  } else {
    c.name = "_col" + std::to_string(index);
  }
  c.type = TypeName(type);
  c.type_signature_json = TypeSignatureJson(type);
  return c;
}

int64_t AppendTemporalOrDecimal(const ColumnType& type, int sqlite_type, int64_t i, double d,
                                std::string_view text, std::string* out) {
  std::string value;
  bool ok = true;
  const bool number = sqlite_type == SQLITE_INTEGER || sqlite_type == SQLITE_FLOAT;
  switch (type.kind) {
    case ColumnKind::kDate:
      if (number) {
        value = DateFromUnixSeconds(sqlite_type == SQLITE_INTEGER ? static_cast<double>(i) : d);
      } else {
        ok = DateFromText(text, &value);
      }
      break;
    case ColumnKind::kTimestamp:
      if (number) {
        value =
            TimestampFromUnixSeconds(sqlite_type == SQLITE_INTEGER ? static_cast<double>(i) : d);
      } else {
        ok = TimestampFromText(text, &value);
      }
      break;
    default:
      if (sqlite_type == SQLITE_INTEGER) {
        value = DecimalFromInt(i, type.scale);
      } else if (sqlite_type == SQLITE_FLOAT) {
        ok = std::isfinite(d);
        if (ok) value = DecimalFromDouble(d, type.scale);
      } else {
        ok = DecimalFromText(text, type.scale, &value);
      }
  }
  if (!ok) {
    out->append("null");
    return 0;
  }
  AppendJsonString(value, out);
  return static_cast<int64_t>(value.size());
}

int BoolFromText(std::string_view text) {
  const absl::string_view t(text.data(), text.size());
  if (absl::EqualsIgnoreCase(t, "true")) return 1;
  if (absl::EqualsIgnoreCase(t, "false")) return 0;
  return -1;
}

}  // namespace qr
