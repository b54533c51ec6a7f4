#include "runtime/row-encoder.h"

#include <cctype>
#include <string>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>

namespace qr {

namespace {

bool Contains(const std::string& upper, const char* what) {
  return upper.find(what) != std::string::npos;
}

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

constexpr const char* kBigintSig = R"({"rawType":"bigint","arguments":[]})";
constexpr const char* kDoubleSig = R"({"rawType":"double","arguments":[]})";
constexpr const char* kVarcharSig =
    R"({"rawType":"varchar","arguments":[{"kind":"LONG","value":2147483647}]})";
constexpr const char* kVarbinarySig = R"({"rawType":"varbinary","arguments":[]})";
constexpr const char* kBooleanSig = R"({"rawType":"boolean","arguments":[]})";
constexpr const char* kUnknownSig = R"({"rawType":"unknown","arguments":[]})";

}  // namespace

ColumnKind KindFromDeclType(const char* decl_type) {
  if (decl_type == nullptr || decl_type[0] == '\0') return ColumnKind::kUndecided;
  const std::string upper = absl::AsciiStrToUpper(decl_type);
  // BOOL is ours; then SQLite's affinity rules in its order (sqlite.org/datatype3.html, 3.1).
  if (Contains(upper, "BOOL")) return ColumnKind::kBoolean;
  if (Contains(upper, "INT")) return ColumnKind::kBigint;
  if (Contains(upper, "CHAR") || Contains(upper, "CLOB") || Contains(upper, "TEXT")) {
    return ColumnKind::kVarchar;
  }
  if (Contains(upper, "BLOB")) return ColumnKind::kVarbinary;
  if (Contains(upper, "REAL") || Contains(upper, "FLOA") || Contains(upper, "DOUB")) {
    return ColumnKind::kDouble;
  }
  // NUMERIC affinity: dates are stored as text, decimals as numbers.
  if (Contains(upper, "DATE") || Contains(upper, "TIME")) return ColumnKind::kVarchar;
  if (Contains(upper, "NUMERIC") || Contains(upper, "DECIMAL")) return ColumnKind::kDouble;
  return ColumnKind::kUndecided;
}

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
  Column c;
  if (sqlite_name != nullptr && IsUsableColumnName(sqlite_name)) {
    c.name = sqlite_name;
  } else {
    c.name = "_col" + std::to_string(index);
  }
  switch (kind) {
    case ColumnKind::kBigint: c.type = "bigint"; c.type_signature_json = kBigintSig; break;
    case ColumnKind::kDouble: c.type = "double"; c.type_signature_json = kDoubleSig; break;
    case ColumnKind::kVarchar: c.type = "varchar"; c.type_signature_json = kVarcharSig; break;
    case ColumnKind::kVarbinary:
      c.type = "varbinary";
      c.type_signature_json = kVarbinarySig;
      break;
    case ColumnKind::kBoolean: c.type = "boolean"; c.type_signature_json = kBooleanSig; break;
    case ColumnKind::kUndecided:
    case ColumnKind::kUnknown: c.type = "unknown"; c.type_signature_json = kUnknownSig; break;
  }
  return c;
}

int BoolFromText(std::string_view text) {
  const absl::string_view t(text.data(), text.size());
  if (absl::EqualsIgnoreCase(t, "true")) return 1;
  if (absl::EqualsIgnoreCase(t, "false")) return 0;
  return -1;
}

}  // namespace qr
