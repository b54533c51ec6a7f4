#include "runtime/trino-literal.h"

#include <absl/strings/ascii.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <utility>

namespace qr {
namespace {

constexpr char kAccepted[] =
    "Parameters must be literals: NULL, TRUE, FALSE, numbers, 'strings', X'hex', DATE "
    "'YYYY-MM-DD', TIME '...', TIMESTAMP '...', DECIMAL/DOUBLE/REAL/BIGINT/INTEGER/SMALLINT/"
    "TINYINT/VARCHAR/CHAR/UUID/JSON '...', infinity(), nan() or CAST(NULL AS type)";

/// 's' without leading and trailing ASCII whitespace. (Debian's Abseil has its own
/// string_view, so its helpers do not take std::string_view.)
std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_tolower(c);
  return out;
}

bool IsIntegerType(const char* type) {
  return type != nullptr && std::string_view(type).find("int") != std::string_view::npos;
}

/// Whether 'v' is in the range of integer type 'type' (bigint, integer, smallint, tinyint).
bool FitsIntegerType(std::string_view type, int64_t v) {
  if (type == "integer") return v >= INT32_MIN && v <= INT32_MAX;
  if (type == "smallint") return v >= INT16_MIN && v <= INT16_MAX;
  if (type == "tinyint") return v >= INT8_MIN && v <= INT8_MAX;
  return true;
}

size_t SkipBlanks(std::string_view s, size_t pos) {
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  return pos;
}

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The identifier-like word at 'pos' (letters, digits, '_'), upper-cased.
std::string WordAt(std::string_view s, size_t pos) {
  std::string word;
  while (pos < s.size() && IsWordChar(s[pos])) word += absl::ascii_toupper(s[pos++]);
  return word;
}

/// 'text' shortened for an error message.
std::string Shown(std::string_view text) {
  constexpr size_t kMax = 60;
  std::string out = "'";
  out.append(text.substr(0, kMax));
  out.append(text.size() > kMax ? "...'" : "'");
  return out;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

/// YYYY-MM-DD with a real month and day.
bool IsDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  if (!AllDigits(s.substr(0, 4)) || !AllDigits(s.substr(5, 2)) || !AllDigits(s.substr(8, 2))) {
    return false;
  }
  const int year = std::atoi(std::string(s.substr(0, 4)).c_str());
  const int month = std::atoi(std::string(s.substr(5, 2)).c_str());
  const int day = std::atoi(std::string(s.substr(8, 2)).c_str());
  return month >= 1 && month <= 12 && day >= 1 && day <= DaysInMonth(year, month);
}

/// HH:MM[:SS[.fraction]], then optionally a blank and a zone (an offset or a name).
bool IsTime(std::string_view s) {
  const size_t blank = s.find(' ');
  const std::string_view zone = blank == std::string_view::npos ? "" : s.substr(blank + 1);
  if (blank != std::string_view::npos && zone.empty()) return false;
  s = s.substr(0, blank);
  if (s.size() < 5 || s[2] != ':' || !AllDigits(s.substr(0, 2)) || !AllDigits(s.substr(3, 2))) {
    return false;
  }
  if (std::atoi(std::string(s.substr(0, 2)).c_str()) > 23 ||
      std::atoi(std::string(s.substr(3, 2)).c_str()) > 59) {
    return false;
  }
  if (s.size() == 5) return true;
  if (s.size() < 8 || s[5] != ':' || !AllDigits(s.substr(6, 2)) ||
      std::atoi(std::string(s.substr(6, 2)).c_str()) > 59) {
    return false;
  }
  return s.size() == 8 || (s[8] == '.' && AllDigits(s.substr(9)) && s.size() <= 21);
}

/// A date, optionally followed by a blank and a time (with its optional zone).
bool IsTimestamp(std::string_view s) {
  if (s.size() == 10) return IsDate(s);
  return s.size() > 11 && s[10] == ' ' && IsDate(s.substr(0, 10)) && IsTime(s.substr(11));
}

bool IsUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

SqlParameter Text(std::string value, std::string type) {
  SqlParameter p;
  p.kind = SqlParameter::Kind::kText;
  p.bytes = std::move(value);
  p.type = std::move(type);
  return p;
}

SqlParameter Real(double value, std::string type) {
  SqlParameter p;
  p.kind = SqlParameter::Kind::kDouble;
  p.real = value;
  p.type = std::move(type);
  return p;
}

/// Parses a whole number text ("-12", "1.5", "1e3", " 7 ") into 'out' with 'type'
/// (nullptr: the type follows the form: bigint, decimal or double).
bool ParseNumber(std::string_view text, const char* type, SqlParameter* out) {
  text = Trim(text);
  std::string_view body = text;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) {
    return false;
  }
  const bool integral = body.find_first_not_of("0123456789") == std::string_view::npos;
  const bool exponent = body.find_first_of("eE") != std::string_view::npos;
  std::string s(text[0] == '+' ? text.substr(1) : text);
  if (integral && (type == nullptr || IsIntegerType(type))) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) {
      // SMALLINT '100000' is out of range, as in Trino.
      if (type != nullptr && !FitsIntegerType(type, v)) return false;
      out->kind = SqlParameter::Kind::kInteger;
      out->integer = v;
      out->type = type != nullptr ? type : "bigint";
      return true;
    }
    if (type != nullptr) return false;  // BIGINT '99999999999999999999' is out of range
  } else if (IsIntegerType(type)) {
    return false;
  } else if (exponent && type != nullptr && std::string_view(type) == "decimal") {
    return false;  // DECIMAL '1e5' is not a decimal literal in Trino
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = Real(v, type != nullptr ? type : (exponent ? "double" : "decimal"));
  return true;
}

/// A typed literal: TYPE 'value'. 'type' is upper-case.
bool TypedLiteral(const std::string& type, const std::string& value, SqlParameter* out,
                  QueryError* error) {
  const std::string lower = Lower(type);
  bool ok = true;
  if (type == "DATE") {
    ok = IsDate(value);
    if (ok) *out = Text(value, lower);
  } else if (type == "TIME") {
    ok = IsTime(value);
    if (ok) *out = Text(value, lower);
  } else if (type == "TIMESTAMP") {
    ok = IsTimestamp(value);
    if (ok) *out = Text(value, lower);
  } else if (type == "VARCHAR" || type == "CHAR" || type == "JSON") {
    *out = Text(value, lower);
  } else if (type == "UUID") {
    ok = IsUuid(value);
    if (ok) *out = Text(Lower(value), lower);
  } else if (type == "DOUBLE" || type == "REAL") {
    const std::string v = Lower(Trim(value));
    if (v == "nan" || v == "infinity" || v == "+infinity" || v == "-infinity") {
      const double inf = std::numeric_limits<double>::infinity();
      *out = Real(v == "nan" ? std::nan("") : v[0] == '-' ? -inf : inf, lower);
    } else {
      ok = ParseNumber(value, lower == "real" ? "real" : "double", out);
    }
  } else if (type == "DECIMAL" || type == "BIGINT" || type == "INTEGER" || type == "INT" ||
             type == "SMALLINT" || type == "TINYINT") {
    ok = ParseNumber(value, type == "INT" ? "integer" : lower.c_str(), out);
  } else {
    *error = QueryError::NotSupported("Parameters of type " + type + " are not supported. " +
                                      kAccepted);
    return false;
  }
  if (!ok) *error = QueryError::InvalidLiteral(type + " " + Shown(value) + " is not a valid " +
                                               lower + " literal");
  return ok;
}

bool HexLiteral(std::string_view text, size_t* pos, SqlParameter* out, QueryError* error) {
  ++*pos;  // the X
  std::string hex;
  if (!ParseStringLiteral(text, pos, &hex)) {
    *error = QueryError::Syntax("X must be followed by a quoted hexadecimal string: X'0aff'");
    return false;
  }
  hex.erase(std::remove_if(hex.begin(), hex.end(),
                           [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
            hex.end());
  if (hex.size() % 2 != 0 ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    std::string msg = "X";
    msg += Shown(hex);
    msg += " is not a binary literal: it needs an even number of hexadecimal digits";
    *error = QueryError::InvalidLiteral(std::move(msg));
    return false;
  }
  out->kind = SqlParameter::Kind::kBlob;
  out->type = "varbinary";
  out->bytes.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    out->bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return true;
}

/// A number, or infinity()/nan(), with an optional sign (already consumed: 'negative').
bool NumericLiteral(std::string_view text, size_t* pos, bool negative, SqlParameter* out,
                    QueryError* error) {
  const std::string word = WordAt(text, *pos);
  if (word == "INFINITY" || word == "NAN") {
    size_t p = SkipBlanks(text, *pos + word.size());
    if (text.substr(p, 1) == "(") p = SkipBlanks(text, p + 1);
    if (text.substr(p, 1) != ")") {
      *error = QueryError::Syntax(Lower(word) + " needs (): " +
                                  Lower(word) + "()");
      return false;
    }
    *pos = p + 1;
    const double inf = std::numeric_limits<double>::infinity();
    *out = Real(word == "NAN" ? std::nan("") : negative ? -inf : inf, "double");
    return true;
  }
  size_t end = *pos;
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
          ((text[end] == '+' || text[end] == '-') && end > *pos &&
           (text[end - 1] == 'e' || text[end - 1] == 'E')))) {
    ++end;
  }
  std::string number = negative ? "-" : "";
  number.append(text.substr(*pos, end - *pos));
  if (!ParseNumber(number, nullptr, out)) {
    *error = QueryError::InvalidLiteral(Shown(number) + " is not a number");
    return false;
  }
  *pos = end;
  return true;
}

/// CAST(NULL AS type), as the JDBC driver's setNull() sends it: a NULL of that type. 'pos' is
/// just after CAST; on success it moves past the closing parenthesis.
bool CastOfNull(std::string_view text, size_t* pos, SqlParameter* out) {
  size_t p = SkipBlanks(text, *pos);
  if (p >= text.size() || text[p] != '(') return false;
  p = SkipBlanks(text, p + 1);
  if (WordAt(text, p) != "NULL") return false;
  p = SkipBlanks(text, p + 4);
  if (WordAt(text, p) != "AS") return false;
  p = SkipBlanks(text, p + 2);
  const std::string type = WordAt(text, p);
  if (type.empty()) return false;
  // The type's arguments (DECIMAL(10, 2), TIMESTAMP(3) WITH TIME ZONE) up to the CAST's ')'.
  int depth = 0;
  for (p += type.size(); p < text.size(); ++p) {
    if (text[p] == '\'' || text[p] == '"') return false;
    if (text[p] == '(') ++depth;
    if (text[p] == ')' && depth-- == 0) break;
  }
  if (p >= text.size()) return false;
  *out = SqlParameter();
  out->type = Lower(type);
  *pos = p + 1;
  return true;
}

}  // namespace

bool ParseStringLiteral(std::string_view text, size_t* pos, std::string* out) {
  size_t p = SkipBlanks(text, *pos);
  if (p >= text.size() || text[p] != '\'') return false;
  out->clear();
  for (++p; p < text.size(); ++p) {
    if (text[p] != '\'') {
      out->push_back(text[p]);
    } else if (p + 1 < text.size() && text[p + 1] == '\'') {
      out->push_back('\'');
      ++p;
    } else {
      *pos = p + 1;
      return true;
    }
  }
  return false;
}

bool ParseTrinoLiteral(std::string_view text, size_t* pos, SqlParameter* out,
                       QueryError* error) {
  size_t p = SkipBlanks(text, *pos);
  *out = SqlParameter();
  if (p >= text.size()) {
    *error = QueryError::Syntax("A parameter is missing. " + std::string(kAccepted));
    return false;
  }
  if (text[p] == '\'') {
    std::string value;
    if (!ParseStringLiteral(text, &p, &value)) {
      *error = QueryError::Syntax("A string parameter is not closed: " + Shown(text.substr(p)));
      return false;
    }
    *out = Text(std::move(value), "varchar");
  } else if (text[p] == '+' || text[p] == '-') {
    const bool negative = text[p] == '-';
    p = SkipBlanks(text, p + 1);
    if (!NumericLiteral(text, &p, negative, out, error)) return false;
  } else if (std::isdigit(static_cast<unsigned char>(text[p])) || text[p] == '.') {
    if (!NumericLiteral(text, &p, false, out, error)) return false;
  } else if ((text[p] == 'X' || text[p] == 'x') && text.substr(SkipBlanks(text, p + 1), 1) == "'") {
    if (!HexLiteral(text, &p, out, error)) return false;
  } else {
    const std::string word = WordAt(text, p);
    size_t after = p + word.size();
    std::string value;
    if (word == "NULL") {
      out->type = "unknown";
      p = after;
    } else if (word == "TRUE" || word == "FALSE") {
      out->kind = SqlParameter::Kind::kInteger;
      out->integer = word == "TRUE" ? 1 : 0;
      out->type = "boolean";
      p = after;
    } else if (word == "INFINITY" || word == "NAN") {
      if (!NumericLiteral(text, &p, false, out, error)) return false;
    } else if (word == "CAST" && CastOfNull(text, &after, out)) {
      p = after;
    } else if (!word.empty() && ParseStringLiteral(text, &after, &value)) {
      if (!TypedLiteral(word, value, out, error)) return false;
      p = after;
    } else {
      *error = QueryError::NotSupported(
          "The parameter " + Shown(Trim(text.substr(p))) +
          " is not supported. " + kAccepted);
      return false;
    }
  }
  *pos = p;
  return true;
}

bool ParseParameterList(std::string_view text, std::vector<SqlParameter>* out,
                        QueryError* error) {
  out->clear();
  size_t pos = 0;
  while (true) {
    SqlParameter param;
    if (!ParseTrinoLiteral(text, &pos, &param, error)) {
      error->message = "Parameter " + std::to_string(out->size() + 1) + ": " + error->message;
      out->clear();
      return false;
    }
    out->push_back(std::move(param));
    pos = SkipBlanks(text, pos);
    if (pos < text.size() && text[pos] == ',') {
      if (out->size() == kMaxParameters) {
        *error = QueryError::InvalidParameterUsage(
            "Too many parameters: EXECUTE binds at most " + std::to_string(kMaxParameters) +
            " (SQLite's limit of parameters in a statement)");
        out->clear();
        return false;
      }
      ++pos;
      continue;
    }
    while (pos < text.size() && (text[pos] == ';' || std::isspace(static_cast<unsigned char>(text[pos])))) {
      ++pos;
    }
    if (pos == text.size()) return true;
    *error = QueryError::Syntax("Parameter " + std::to_string(out->size()) +
                                " is followed by " + Shown(text.substr(pos)) +
                                " instead of a comma or the end. " + kAccepted);
    out->clear();
    return false;
  }
}

bool BindParameters(sqlite3_stmt* stmt, const std::vector<SqlParameter>& params,
                    QueryError* error) {
  const int expected = sqlite3_bind_parameter_count(stmt);
  if (expected != static_cast<int>(params.size())) {
    *error = QueryError::InvalidParameterUsage(
        "Incorrect number of parameters: expected " + std::to_string(expected) +
        " but found " + std::to_string(params.size()) +
        " (each ? of the statement takes one value of EXECUTE ... USING)");
    return false;
  }
  for (int i = 0; i < expected; ++i) {
    const SqlParameter& p = params[i];
    int rc = SQLITE_OK;
    switch (p.kind) {
      case SqlParameter::Kind::kNull: rc = sqlite3_bind_null(stmt, i + 1); break;
      case SqlParameter::Kind::kInteger: rc = sqlite3_bind_int64(stmt, i + 1, p.integer); break;
      case SqlParameter::Kind::kDouble: rc = sqlite3_bind_double(stmt, i + 1, p.real); break;
      case SqlParameter::Kind::kText:
        rc = sqlite3_bind_text64(stmt, i + 1, p.bytes.data(), p.bytes.size(), SQLITE_TRANSIENT,
                                 SQLITE_UTF8);
        break;
      case SqlParameter::Kind::kBlob:
        rc = sqlite3_bind_blob64(stmt, i + 1, p.bytes.data(), p.bytes.size(), SQLITE_TRANSIENT);
        break;
    }
    if (rc != SQLITE_OK) {
      *error = QueryError::InsufficientResources("Parameter " + std::to_string(i + 1) +
                                                 " cannot be bound: " + sqlite3_errstr(rc));
      return false;
    }
  }
  return true;
}

}  // namespace qr
