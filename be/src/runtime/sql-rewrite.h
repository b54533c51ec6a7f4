#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

/// A small SQL tokenizer, and the rewrite of Trino's qualified names into the names SQLite
/// resolves (docs/protocol.md, "Metadata"): the served catalog's prefix is dropped
/// (sqlite.main.t -> main.t), and the metadata tables, which live as views in SQLite's temp
/// schema under their dotted Trino name, are named there
/// (system.jdbc.tables -> temp."system.jdbc.tables",
///  information_schema.columns or sqlite.information_schema.columns ->
///  temp."information_schema.columns").
/// The rewrite works on tokens: string literals, quoted identifiers and comments are never
/// changed.
/// Thread-safety: pure functions.

namespace qr {

struct SqlToken {
  enum class Kind {
    /// An unquoted identifier or keyword.
    kWord,
    /// "x", `x` or [x].
    kQuotedIdentifier,
    /// 'text' (x'..' is a kWord "x" followed by a kString).
    kString,
    kNumber,
    /// One character of anything else: . , ( ) ; * = ...
    kPunct,
  };
  Kind kind;
  /// Byte range in the SQL text.
  size_t begin;
  size_t end;
  /// Identifier value: words lower-cased, quoted identifiers unquoted and as written; for
  /// strings, the unescaped text.
  std::string value;
};

/// The tokens of 'sql', without blanks and comments. An unterminated string, quoted identifier
/// or comment runs to the end of the text.
std::vector<SqlToken> TokenizeSql(std::string_view sql);
/// The same tokens, one at a time to 'fn', until it returns false: for a scan that stops
/// early, or that should not hold ~56 bytes per token of a long text at once.
void ForEachSqlToken(std::string_view sql, const std::function<bool(const SqlToken&)>& fn);

/// Whether 'a' and 'b' are the same name: Trino's names are case-insensitive (ASCII).
bool SameName(std::string_view a, std::string_view b);

/// 'name' quoted as a SQLite identifier: "name" with '"' doubled.
std::string QuoteIdentifier(std::string_view name);
/// 'text' as a SQL string literal: 'text' with '\'' doubled.
std::string QuoteString(std::string_view text);

/// One replacement made by RewriteCatalogNames: bytes [in_begin, in_end) of the input became
/// bytes [out_begin, out_end) of the output.
struct SqlEdit {
  size_t in_begin, in_end, out_begin, out_end;
};

/// Rewrites the qualified names of 'sql' that name catalog 'catalog' or the metadata tables
/// (see the file comment) into '*out', and, if 'edits' is given, lists the replacements in
/// order. False, with '*out' and '*edits' untouched, when there is nothing to rewrite.
bool RewriteCatalogNames(std::string_view sql, std::string_view catalog, std::string* out,
                         std::vector<SqlEdit>* edits = nullptr);

/// The byte of the input that byte 'offset' of a rewritten output comes from: outside a
/// replacement, the same byte shifted by the replacements before it; inside one, the start of
/// the name it replaced.
size_t InputOffset(const std::vector<SqlEdit>& edits, size_t offset);

}  // namespace qr
