#include "runtime/sql-rewrite.h"

#include <algorithm>
#include <cctype>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>

namespace qr {

namespace {

bool IsWordChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '$' || u >= 0x80;
}

/// Scans a quoted run starting at 'pos' (on the opening quote) that ends at 'close'; a doubled
/// 'close' stands for one. Returns the position after it and sets '*value' to the inside.
size_t ScanQuoted(std::string_view sql, size_t pos, char close, std::string* value) {
  ++pos;
  while (pos < sql.size()) {
    if (sql[pos] == close) {
      if (close != ']' && pos + 1 < sql.size() && sql[pos + 1] == close) {
        value->push_back(close);
        pos += 2;
        continue;
      }
      return pos + 1;
    }
    value->push_back(sql[pos++]);
  }
  return pos;
}

bool ContainsIgnoreCase(std::string_view text, std::string_view what) {
  const auto it = std::search(text.begin(), text.end(), what.begin(), what.end(),
                              [](char a, char b) {
                                return absl::ascii_tolower(static_cast<unsigned char>(a)) ==
                                       absl::ascii_tolower(static_cast<unsigned char>(b));
                              });
  return it != text.end();
}

bool IsName(const SqlToken& t) {
  return t.kind == SqlToken::Kind::kWord || t.kind == SqlToken::Kind::kQuotedIdentifier;
}

}  // namespace

bool SameName(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(absl::string_view(a.data(), a.size()),
                                absl::string_view(b.data(), b.size()));
}

std::vector<SqlToken> TokenizeSql(std::string_view sql) {
  std::vector<SqlToken> tokens;
  ForEachSqlToken(sql, [&tokens](const SqlToken& t) {
    tokens.push_back(t);
    return true;
  });
  return tokens;
}

void ForEachSqlToken(std::string_view sql, const std::function<bool(const SqlToken&)>& fn) {
  size_t pos = 0;
  while (pos < sql.size()) {
    const char c = sql[pos];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++pos;
      continue;
    }
    if (sql.substr(pos, 2) == "--") {
      const size_t eol = sql.find('\n', pos);
      pos = eol == std::string_view::npos ? sql.size() : eol + 1;
      continue;
    }
    if (sql.substr(pos, 2) == "/*") {
      const size_t close = sql.find("*/", pos + 2);
      pos = close == std::string_view::npos ? sql.size() : close + 2;
      continue;
    }
    SqlToken t{SqlToken::Kind::kPunct, pos, pos + 1, ""};
    if (c == '\'') {
      t.kind = SqlToken::Kind::kString;
      t.end = ScanQuoted(sql, pos, '\'', &t.value);
    } else if (c == '"' || c == '`' || c == '[') {
      t.kind = SqlToken::Kind::kQuotedIdentifier;
      t.end = ScanQuoted(sql, pos, c == '[' ? ']' : c, &t.value);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && pos + 1 < sql.size() &&
                std::isdigit(static_cast<unsigned char>(sql[pos + 1])))) {
      t.kind = SqlToken::Kind::kNumber;
      size_t end = pos;
      while (end < sql.size() && (IsWordChar(sql[end]) || sql[end] == '.' ||
                                  ((sql[end] == '+' || sql[end] == '-') &&
                                   (sql[end - 1] == 'e' || sql[end - 1] == 'E')))) {
        ++end;
      }
      t.end = end;
    } else if (IsWordChar(c)) {
      t.kind = SqlToken::Kind::kWord;
      size_t end = pos;
      while (end < sql.size() && IsWordChar(sql[end])) ++end;
      t.end = end;
      t.value = absl::AsciiStrToLower(std::string(sql.substr(pos, end - pos)));
    }
    pos = t.end;
    if (!fn(t)) return;
  }
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

std::string QuoteString(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out.push_back('\'');
    out.push_back(c);
  }
  return out + "'";
}

bool RewriteCatalogNames(std::string_view sql, std::string_view catalog, std::string* out,
                         std::vector<SqlEdit>* edits) {
  // Most statements name none of these: they are not tokenized.
  if (!ContainsIgnoreCase(sql, catalog) && !ContainsIgnoreCase(sql, "information_schema") &&
      !ContainsIgnoreCase(sql, "system")) {
    return false;
  }
  const std::vector<SqlToken> tokens = TokenizeSql(sql);
  std::string result;
  size_t copied = 0;  // bytes of 'sql' already in 'result'
  std::vector<SqlEdit> made;
  auto replace = [&](size_t begin, size_t end, const std::string& with) {
    result.append(sql.substr(copied, begin - copied));
    made.push_back({begin, end, result.size(), result.size() + with.size()});
    result += with;
    copied = end;
  };
  size_t i = 0;
  while (i < tokens.size()) {
    // A chain of names: a . b . c (a name after a '.' continues the chain before it).
    if (!IsName(tokens[i]) || (i > 0 && tokens[i - 1].kind == SqlToken::Kind::kPunct &&
                               sql[tokens[i - 1].begin] == '.')) {
      ++i;
      continue;
    }
    std::vector<size_t> parts = {i};
    size_t j = i + 1;
    while (j + 1 < tokens.size() && tokens[j].kind == SqlToken::Kind::kPunct &&
           sql[tokens[j].begin] == '.' && IsName(tokens[j + 1])) {
      parts.push_back(j + 1);
      j += 2;
    }
    auto name = [&](size_t k) -> const std::string& { return tokens[parts[k]].value; };
    const bool ours = SameName(name(0), catalog);
    if (parts.size() >= 3 && ours && SameName(name(1), "main")) {
      replace(tokens[parts[0]].begin, tokens[parts[1]].begin, "");
    } else if (parts.size() >= 3 && (ours || SameName(name(0), "system")) &&
               SameName(name(1), "information_schema")) {
      replace(tokens[parts[0]].begin, tokens[parts[2]].end,
              "temp." + QuoteIdentifier("information_schema." +
                                        absl::AsciiStrToLower(name(2))));
    } else if (parts.size() >= 2 && SameName(name(0), "information_schema")) {
      replace(tokens[parts[0]].begin, tokens[parts[1]].end,
              "temp." + QuoteIdentifier("information_schema." +
                                        absl::AsciiStrToLower(name(1))));
    } else if (parts.size() >= 3 && SameName(name(0), "system")) {
      replace(tokens[parts[0]].begin, tokens[parts[2]].end,
              "temp." + QuoteIdentifier("system." + absl::AsciiStrToLower(name(1)) + "." +
                                        absl::AsciiStrToLower(name(2))));
    }
    i = j;
  }
  if (made.empty()) return false;
  result.append(sql.substr(copied));
  *out = std::move(result);
  if (edits != nullptr) *edits = std::move(made);
  return true;
}

size_t InputOffset(const std::vector<SqlEdit>& edits, size_t offset) {
  size_t in = offset;
  for (const SqlEdit& e : edits) {
    if (offset < e.out_begin) break;
    if (offset < e.out_end) return e.in_begin;
    in = e.in_end + (offset - e.out_end);
  }
  return in;
}

}  // namespace qr
