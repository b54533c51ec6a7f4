#include "runtime/trino-types.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <absl/strings/ascii.h>

namespace qr {

namespace {

bool Contains(const std::string& upper, const char* what) {
  return upper.find(what) != std::string::npos;
}

/// Splits "DECIMAL ( 12 , 2 )" into the upper-cased base name "DECIMAL" and its integer
/// arguments {12, 2}; false when the arguments are not all integers.
bool SplitDecl(const std::string& upper, std::string* base, std::vector<int64_t>* args) {
  const size_t open = upper.find('(');
  *base = std::string(absl::StripAsciiWhitespace(upper.substr(0, open)));
  args->clear();
  if (open == std::string::npos) return true;
  const size_t close = upper.find(')', open);
  if (close == std::string::npos) return false;
  size_t i = open + 1;
  while (i < close) {
    while (i < close && std::isspace(static_cast<unsigned char>(upper[i]))) ++i;
    const size_t start = i;
    while (i < close && std::isdigit(static_cast<unsigned char>(upper[i]))) ++i;
    if (i == start || i - start > 9) return false;
    args->push_back(std::strtoll(upper.substr(start, i - start).c_str(), nullptr, 10));
    while (i < close && std::isspace(static_cast<unsigned char>(upper[i]))) ++i;
    if (i < close && upper[i] != ',') return false;
    ++i;
  }
  return true;
}

bool Digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil inverse).
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

std::string FormatDate(int64_t days) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04lld-%02u-%02u", static_cast<long long>(y), m, d);
  return buf;
}

}  // namespace

ColumnType TypeFromDecl(const char* decl_type) {
  ColumnType t;
  if (decl_type == nullptr || decl_type[0] == '\0') return t;
  const std::string upper = absl::AsciiStrToUpper(decl_type);
  std::string base;
  std::vector<int64_t> args;
  const bool parsed = SplitDecl(upper, &base, &args);
  if (parsed && base == "DATE" && args.empty()) {
    t.kind = ColumnKind::kDate;
    return t;
  }
  if (parsed && (base == "TIMESTAMP" || base == "DATETIME" ||
                 base == "TIMESTAMP WITHOUT TIME ZONE") &&
      args.size() <= 1 && upper.find("WITH TIME ZONE") == std::string::npos) {
    t.kind = ColumnKind::kTimestamp;
    return t;
  }
  if (parsed && (base == "DECIMAL" || base == "NUMERIC") && !args.empty() && args.size() <= 2 &&
      args[0] >= 1 && args[0] <= 38 && (args.size() == 1 || args[1] <= args[0])) {
    t.kind = ColumnKind::kDecimal;
    t.precision = static_cast<int16_t>(args[0]);
    t.scale = static_cast<int16_t>(args.size() == 2 ? args[1] : 0);
    return t;
  }
  // BOOL is ours; then SQLite's affinity rules in its order (sqlite.org/datatype3.html, 3.1).
  if (Contains(upper, "BOOL")) {
    t.kind = ColumnKind::kBoolean;
  } else if (Contains(upper, "INT")) {
    t.kind = ColumnKind::kBigint;
  } else if (Contains(upper, "CHAR") || Contains(upper, "CLOB") || Contains(upper, "TEXT")) {
    t.kind = ColumnKind::kVarchar;
    if (parsed && args.size() == 1 && args[0] >= 1 && args[0] < 2147483647 &&
        (base == "VARCHAR" || base == "CHAR" || base == "CHARACTER" || base == "NVARCHAR" ||
         base == "NCHAR" || base == "CHARACTER VARYING" || base == "VARYING CHARACTER" ||
         base == "NATIVE CHARACTER")) {
      t.length = static_cast<int32_t>(args[0]);
    }
  } else if (Contains(upper, "BLOB")) {
    t.kind = ColumnKind::kVarbinary;
  } else if (Contains(upper, "REAL") || Contains(upper, "FLOA") || Contains(upper, "DOUB")) {
    t.kind = ColumnKind::kDouble;
  } else if (Contains(upper, "DATE") || Contains(upper, "TIME")) {
    // NUMERIC affinity: other date/time types are stored as text.
    t.kind = ColumnKind::kVarchar;
  } else if (Contains(upper, "NUMERIC") || Contains(upper, "DECIMAL")) {
    t.kind = ColumnKind::kDouble;
  }
  return t;
}

std::string TypeName(const ColumnType& type) {
  switch (type.kind) {
    case ColumnKind::kBigint: return "bigint";
    case ColumnKind::kDouble: return "double";
    case ColumnKind::kVarchar:
      return type.length > 0 ? "varchar(" + std::to_string(type.length) + ")" : "varchar";
    case ColumnKind::kVarbinary: return "varbinary";
    case ColumnKind::kBoolean: return "boolean";
    case ColumnKind::kDate: return "date";
    case ColumnKind::kTimestamp: return "timestamp(3)";
    case ColumnKind::kDecimal:
      return "decimal(" + std::to_string(type.precision) + "," + std::to_string(type.scale) + ")";
    case ColumnKind::kUndecided:
    case ColumnKind::kUnknown: break;
  }
  return "unknown";
}

std::string TypeSignatureJson(const ColumnType& type) {
  auto arg = [](int64_t v) { return R"({"kind":"LONG","value":)" + std::to_string(v) + "}"; };
  std::string raw;
  std::string args;
  switch (type.kind) {
    case ColumnKind::kVarchar:
      raw = "varchar";
      args = arg(type.length > 0 ? type.length : 2147483647);
      break;
    case ColumnKind::kTimestamp:
      raw = "timestamp";
      args = arg(3);
      break;
    case ColumnKind::kDecimal:
      raw = "decimal";
      args = arg(type.precision) + "," + arg(type.scale);
      break;
    default: raw = TypeName(type);
  }
  return R"({"rawType":")" + raw + R"(","arguments":[)" + args + "]}";
}

int JdbcTypeCode(const ColumnType& type) {
  switch (type.kind) {
    case ColumnKind::kBigint: return -5;     // BIGINT
    case ColumnKind::kDouble: return 8;      // DOUBLE
    case ColumnKind::kVarchar: return 12;    // VARCHAR
    case ColumnKind::kVarbinary: return -3;  // VARBINARY
    case ColumnKind::kBoolean: return 16;    // BOOLEAN
    case ColumnKind::kDate: return 91;       // DATE
    case ColumnKind::kTimestamp: return 93;  // TIMESTAMP
    case ColumnKind::kDecimal: return 3;     // DECIMAL
    case ColumnKind::kUndecided:
    case ColumnKind::kUnknown: break;
  }
  return 1111;  // OTHER
}

bool DateFromText(std::string_view text, std::string* out) {
  if (!(Digits(text, 0, 4) && text.size() >= 10 && text[4] == '-' && Digits(text, 5, 2) &&
        text[7] == '-' && Digits(text, 8, 2))) {
    return false;
  }
  if (text.size() > 10 && text[10] != ' ' && text[10] != 'T') return false;
  out->assign(text.substr(0, 10));
  return true;
}

std::string DateFromUnixSeconds(double seconds) {
  return FormatDate(static_cast<int64_t>(std::floor(seconds / 86400.0)));
}

bool TimestampFromText(std::string_view text, std::string* out) {
  std::string date;
  if (!DateFromText(text, &date)) return false;
  if (!text.empty() && text.back() == 'Z') text.remove_suffix(1);
  std::string hh = "00", mm = "00", ss = "00", fff = "000";
  if (text.size() > 10) {
    // "YYYY-MM-DD HH:MM[:SS[.f...]]"
    if (!(Digits(text, 11, 2) && text.size() >= 16 && text[13] == ':' && Digits(text, 14, 2))) {
      return false;
    }
    hh = text.substr(11, 2);
    mm = text.substr(14, 2);
    size_t pos = 16;
    if (pos < text.size()) {
      if (!(text[pos] == ':' && Digits(text, pos + 1, 2))) return false;
      ss = text.substr(pos + 1, 2);
      pos += 3;
      if (pos < text.size()) {
        if (text[pos] != '.' || pos + 1 == text.size() ||
            !Digits(text, pos + 1, text.size() - pos - 1)) {
          return false;
        }
        std::string frac(text.substr(pos + 1));
        frac.resize(3, '0');
        fff = frac;
      }
    }
  }
  *out = date + " " + hh + ":" + mm + ":" + ss + "." + fff;
  return true;
}

std::string TimestampFromUnixSeconds(double seconds) {
  const int64_t ms = static_cast<int64_t>(std::floor(seconds * 1000.0 + 0.5));
  const int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
  const int64_t in_day = ms - days * 86400000;
  char buf[32];
  std::snprintf(buf, sizeof(buf), " %02lld:%02lld:%02lld.%03lld",
                static_cast<long long>(in_day / 3600000),
                static_cast<long long>(in_day / 60000 % 60),
                static_cast<long long>(in_day / 1000 % 60), static_cast<long long>(in_day % 1000));
  return FormatDate(days) + buf;
}

bool DecimalFromText(std::string_view text, int scale, std::string* out) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  const size_t dot = text.find('.');
  std::string int_part(text.substr(0, dot));
  std::string frac(dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1));
  if (int_part.empty() && frac.empty()) return false;
  if (!Digits(int_part, 0, int_part.size()) || !Digits(frac, 0, frac.size())) return false;
  if (int_part.empty()) int_part = "0";
  // Rounds half away from zero at 'scale' digits, carrying into the integer part.
  const bool round_up = frac.size() > static_cast<size_t>(scale) && frac[scale] >= '5';
  frac.resize(scale, '0');
  std::string digits = int_part + frac;
  if (round_up) {
    int i = static_cast<int>(digits.size()) - 1;
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i >= 0) {
      ++digits[i];
    } else {
      digits.insert(digits.begin(), '1');
    }
  }
  std::string whole = digits.substr(0, digits.size() - scale);
  const size_t nz = whole.find_first_not_of('0');
  whole = nz == std::string::npos ? "0" : whole.substr(nz);
  std::string result = whole;
  if (scale > 0) result += "." + digits.substr(digits.size() - scale);
  if (negative && result.find_first_not_of("0.") != std::string::npos) result = "-" + result;
  *out = std::move(result);
  return true;
}

std::string DecimalFromDouble(double v, int scale) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", scale, v);
  std::string s = buf;
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string DecimalFromInt(int64_t v, int scale) {
  std::string s = std::to_string(v);
  if (scale > 0) s += "." + std::string(scale, '0');
  return s;
}

}  // namespace qr
