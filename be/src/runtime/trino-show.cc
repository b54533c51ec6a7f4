#include "runtime/trino-show.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/sql-rewrite.h"
#include "runtime/sqlite-connection.h"

namespace qr {

namespace {

using Kind = TrinoTranslation::Kind;

/// A cursor over the tokens of one statement.
class Parser {
 public:
  Parser(std::string_view sql, std::vector<SqlToken> tokens)
      : sql_(sql), tokens_(std::move(tokens)) {
    while (!tokens_.empty() && IsPunct(tokens_.back(), ';')) tokens_.pop_back();
  }
  bool AtEnd() const { return pos_ >= tokens_.size(); }
  size_t pos() const { return pos_; }
  const SqlToken& At(size_t i) const { return tokens_[i]; }
  size_t size() const { return tokens_.size(); }
  /// Consumes the word 'w' (lower case) if it is next.
  bool Word(const char* w) {
    if (AtEnd() || tokens_[pos_].kind != SqlToken::Kind::kWord || tokens_[pos_].value != w) {
      return false;
    }
    ++pos_;
    return true;
  }
  bool Punct(char c) {
    if (AtEnd() || !IsPunct(tokens_[pos_], c)) return false;
    ++pos_;
    return true;
  }
  /// A name (word or quoted identifier); false if none is next.
  bool Name(std::string* out) {
    if (AtEnd()) return false;
    const SqlToken& t = tokens_[pos_];
    if (t.kind != SqlToken::Kind::kWord && t.kind != SqlToken::Kind::kQuotedIdentifier) {
      return false;
    }
    *out = t.value;
    ++pos_;
    return true;
  }
  /// name [. name [. name]]
  bool QualifiedName(std::vector<std::string>* parts) {
    parts->clear();
    std::string part;
    if (!Name(&part)) return false;
    parts->push_back(part);
    while (parts->size() < 3 && Punct('.')) {
      if (!Name(&part)) return false;
      parts->push_back(part);
    }
    return true;
  }
  bool String(std::string* out) {
    if (AtEnd() || tokens_[pos_].kind != SqlToken::Kind::kString) return false;
    *out = tokens_[pos_++].value;
    return true;
  }
  /// The text from token 'pos_' to the end of the statement.
  std::string_view Rest() const {
    return AtEnd() ? std::string_view() : sql_.substr(tokens_[pos_].begin);
  }

 private:
  bool IsPunct(const SqlToken& t, char c) const {
    return t.kind == SqlToken::Kind::kPunct && sql_[t.begin] == c;
  }
  std::string_view sql_;
  std::vector<SqlToken> tokens_;
  size_t pos_ = 0;
};

TrinoTranslation Error(QueryError e) {
  TrinoTranslation t;
  t.kind = Kind::kError;
  t.error = std::move(e);
  return t;
}

TrinoTranslation Select(std::string sql) {
  TrinoTranslation t;
  t.kind = Kind::kSelect;
  t.sql = std::move(sql);
  return t;
}

/// A SHOW answer, typed even when it has no rows: `inner` (without ORDER BY) gets an empty
/// last arm over temp.qr_types, whose declared types SQLite gives the compound's columns
/// (`types`: one letter per column of `inner`, as in trino-metadata.cc); the outer query
/// selects `columns` of it in `order`.
TrinoTranslation TypedSelect(std::string_view columns, const std::string& inner,
                             std::string_view types, std::string_view order) {
  std::string sql = "SELECT " + std::string(columns) + " FROM (" + inner + "\nUNION ALL SELECT ";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) sql += ", ";
    sql += types[i];
  }
  sql += " FROM temp.qr_types WHERE 0) ORDER BY " + std::string(order);
  return Select(std::move(sql));
}

TrinoTranslation SyntaxError(const std::string& what) {
  return Error(QueryError::Syntax("syntax error: " + what));
}

/// " AND <column> LIKE 'p' [ESCAPE 'e']" for an optional LIKE clause; false on bad syntax.
bool LikeFilter(Parser* p, const char* column, std::string* filter) {
  if (!p->Word("like")) return true;
  std::string pattern, escape;
  if (!p->String(&pattern)) return false;
  *filter = std::string(" AND ") + column + " LIKE " + QuoteString(pattern);
  if (p->Word("escape")) {
    if (!p->String(&escape)) return false;
    *filter += " ESCAPE " + QuoteString(escape);
  }
  return true;
}

/// Whether 'sql' with its '?' parameters bound to 'params' returns a row.
bool HasRow(sqlite3* db, const char* sql, const std::vector<std::string>& params) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) return false;
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_text(s, static_cast<int>(i + 1), params[i].data(),
                      static_cast<int>(params[i].size()), SQLITE_TRANSIENT);
  }
  const bool row = sqlite3_step(s) == SQLITE_ROW;
  sqlite3_finalize(s);
  return row;
}

/// Checks that the catalog and schema exist; on success the names are those the metadata
/// views spell (SQLite's names are case-insensitive, Trino's are lower case).
std::optional<QueryError> CheckSchema(sqlite3* db, const std::string& catalog,
                                      const std::string& schema) {
  if (!HasRow(db, "SELECT 1 FROM temp.qr_schemata WHERE catalog_name = ? COLLATE NOCASE",
              {catalog})) {
    return QueryError::CatalogNotFound("Catalog '" + catalog + "' not found");
  }
  if (!HasRow(db,
              "SELECT 1 FROM temp.qr_schemata WHERE catalog_name = ? COLLATE NOCASE AND "
              "schema_name = ? COLLATE NOCASE",
              {catalog, schema})) {
    return QueryError::SchemaNotFound("Schema '" + schema + "' does not exist");
  }
  return std::nullopt;
}

/// [[catalog.]schema.]table -> catalog, schema, table.
std::vector<std::string> Resolve(std::vector<std::string> parts, std::string_view catalog) {
  if (parts.size() == 1) parts.insert(parts.begin(), "main");
  if (parts.size() == 2) parts.insert(parts.begin(), std::string(catalog));
  return parts;
}

TrinoTranslation ShowColumns(sqlite3* db, Parser* p, std::string_view catalog) {
  std::vector<std::string> parts;
  if (!p->QualifiedName(&parts)) return SyntaxError("a table name must follow");
  std::string like;
  if (!LikeFilter(p, "column_name", &like) || !p->AtEnd()) {
    return SyntaxError("unexpected text after the table name");
  }
  parts = Resolve(std::move(parts), catalog);
  if (std::optional<QueryError> e = CheckSchema(db, parts[0], parts[1])) return Error(*e);
  if (!HasRow(db,
              "SELECT 1 FROM temp.qr_tables WHERE table_cat = ? COLLATE NOCASE AND "
              "table_schem = ? COLLATE NOCASE AND table_name = ? COLLATE NOCASE",
              parts)) {
    return Error(QueryError::TableNotFound("Table '" + parts[0] + "." + parts[1] + "." +
                                           parts[2] + "' does not exist"));
  }
  return TypedSelect(
      "\"Column\", \"Type\", \"Extra\", \"Comment\"",
      "SELECT column_name AS \"Column\", qr_type_info(decl_type, 'name') AS \"Type\", "
      "'' AS \"Extra\", '' AS \"Comment\", ordinal_position FROM temp.qr_columns "
      "WHERE table_cat = " +
          QuoteString(parts[0]) + " COLLATE NOCASE AND table_schem = " + QuoteString(parts[1]) +
          " COLLATE NOCASE AND table_name = " + QuoteString(parts[2]) + " COLLATE NOCASE" + like,
      "vvvvb", "ordinal_position");
}

TrinoTranslation Show(sqlite3* db, Parser* p, std::string_view catalog) {
  std::string like;
  if (p->Word("catalogs")) {
    if (!LikeFilter(p, "TABLE_CAT", &like) || !p->AtEnd()) return SyntaxError("after CATALOGS");
    return TypedSelect(
        "*", "SELECT TABLE_CAT AS \"Catalog\" FROM temp.\"system.jdbc.catalogs\" WHERE 1" + like,
        "v", "1");
  }
  if (p->Word("schemas")) {
    std::string cat(catalog);
    if ((p->Word("from") || p->Word("in")) && !p->Name(&cat)) {
      return SyntaxError("a catalog name must follow FROM");
    }
    if (!LikeFilter(p, "schema_name", &like) || !p->AtEnd()) return SyntaxError("after SCHEMAS");
    if (!HasRow(db, "SELECT 1 FROM temp.qr_schemata WHERE catalog_name = ? COLLATE NOCASE",
                {cat})) {
      return Error(QueryError::CatalogNotFound("Catalog '" + cat + "' not found"));
    }
    return TypedSelect("*",
                       "SELECT schema_name AS \"Schema\" FROM temp.qr_schemata WHERE "
                       "catalog_name = " + QuoteString(cat) + " COLLATE NOCASE" + like,
                       "v", "1");
  }
  if (p->Word("tables")) {
    std::vector<std::string> parts = {"main"};
    if ((p->Word("from") || p->Word("in")) && (!p->QualifiedName(&parts) || parts.size() > 2)) {
      return SyntaxError("a schema name ([catalog.]schema) must follow FROM");
    }
    if (!LikeFilter(p, "table_name", &like) || !p->AtEnd()) return SyntaxError("after TABLES");
    if (parts.size() == 1) parts.insert(parts.begin(), std::string(catalog));
    if (std::optional<QueryError> e = CheckSchema(db, parts[0], parts[1])) return Error(*e);
    return TypedSelect("*",
                       "SELECT table_name AS \"Table\" FROM temp.qr_tables WHERE table_cat = " +
                           QuoteString(parts[0]) + " COLLATE NOCASE AND table_schem = " +
                           QuoteString(parts[1]) + " COLLATE NOCASE" + like,
                       "v", "1");
  }
  if (p->Word("columns")) {
    if (!p->Word("from") && !p->Word("in")) return SyntaxError("FROM must follow SHOW COLUMNS");
    return ShowColumns(db, p, catalog);
  }
  if (p->Word("session")) {
    if (!LikeFilter(p, "name", &like) || !p->AtEnd()) return SyntaxError("after SESSION");
    // The coordinator answers SHOW SESSION from the client's session before the engine sees
    // it (service/session-properties.h); the engine alone has no session: Trino's columns,
    // no rows.
    return TypedSelect(
        "*",
        "SELECT name AS \"Name\", value AS \"Value\", dflt AS \"Default\", type AS \"Type\", "
        "description AS \"Description\" FROM (SELECT '' AS name, '' AS value, '' AS dflt, "
        "'' AS type, '' AS description WHERE 0) WHERE 1" + like,
        "vvvvv", "1");
  }
  if (p->Word("functions")) {
    if (!LikeFilter(p, "name", &like) || !p->AtEnd()) return SyntaxError("after FUNCTIONS");
    // SQLITE_DETERMINISTIC is 0x800. Internal helpers (qr_*) are not listed.
    return TypedSelect(
        "*",
        "SELECT name AS \"Function\", '' AS \"Return Type\", "
        "CASE WHEN narg < 0 THEN 'variadic' ELSE narg || ' argument' || "
        "CASE narg WHEN 1 THEN '' ELSE 's' END END AS \"Argument Types\", "
        "CASE type WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window' ELSE 'scalar' END AS "
        "\"Function Type\", CASE WHEN flags & 2048 THEN 'true' ELSE 'false' END AS "
        "\"Deterministic\", '' AS \"Description\" FROM (SELECT DISTINCT name, narg, type, flags "
        "FROM pragma_function_list WHERE name NOT LIKE 'qr\\_%' ESCAPE '\\') WHERE 1" + like,
        "vvvvvv", "1, 3");
  }
  return TrinoTranslation();  // SHOW CREATE, SHOW STATS, ...: not supported
}

TrinoTranslation Explain(Parser* p) {
  if (p->Word("query") || p->Word("analyze")) return TrinoTranslation();  // SQLite's own
  Kind kind = Kind::kExplain;
  if (p->Punct('(')) {
    do {
      std::string option, value;
      if (!p->Name(&option) || !p->Name(&value)) return SyntaxError("in the EXPLAIN options");
      if (option == "type" && value == "validate") {
        kind = Kind::kExplainValidate;
      } else if (!(option == "type" && (value == "logical" || value == "distributed")) &&
                 !(option == "format" && value == "text")) {
        return Error(QueryError::NotSupported(
            "EXPLAIN option " + option + " " + value +
            " is not supported: the plan is SQLite's (EXPLAIN QUERY PLAN), as text"));
      }
    } while (p->Punct(','));
    if (!p->Punct(')')) return SyntaxError("')' must close the EXPLAIN options");
  }
  if (p->AtEnd()) return SyntaxError("a statement must follow EXPLAIN");
  // Each EXPLAIN prepares what it explains, which would translate the next one: a statement of
  // thousands of EXPLAINs would recurse until the executor's stack overflowed.
  if (p->Word("explain")) {
    return Error(QueryError::NotSupported("EXPLAIN of an EXPLAIN is not supported"));
  }
  TrinoTranslation t;
  t.kind = kind;
  t.sql = std::string(p->Rest());
  return t;
}

}  // namespace

TrinoTranslation TranslateTrinoStatement(sqlite3* db, std::string_view sql,
                                         std::string_view catalog) {
  // Most statements are not these: only those that start with one of the words are tokenized.
  std::vector<SqlToken> first = TokenizeSql(sql.substr(0, SkipBlankSql(sql, 0) + 9));
  if (first.empty() || first[0].kind != SqlToken::Kind::kWord ||
      (first[0].value != "show" && first[0].value != "describe" && first[0].value != "desc" &&
       first[0].value != "explain")) {
    return TrinoTranslation();
  }
  Parser p(sql, TokenizeSql(sql));
  if (p.Word("show")) return Show(db, &p, catalog);
  if (p.Word("describe") || p.Word("desc")) {
    // DESCRIBE INPUT name / DESCRIBE OUTPUT name describe prepared statements.
    if (p.size() == 3 && (p.At(1).value == "input" || p.At(1).value == "output") &&
        p.At(1).kind == SqlToken::Kind::kWord) {
      return TrinoTranslation();
    }
    return ShowColumns(db, &p, catalog);
  }
  if (p.Word("explain")) return Explain(&p);
  return TrinoTranslation();
}

std::string FormatQueryPlan(sqlite3_stmt* eqp) {
  // Rows: id, parent, notused, detail; a step's parent comes before it.
  std::map<int, int> depth = {{0, -1}};
  std::string text;
  while (sqlite3_step(eqp) == SQLITE_ROW) {
    const int id = sqlite3_column_int(eqp, 0);
    const int parent = sqlite3_column_int(eqp, 1);
    const auto* detail = reinterpret_cast<const char*>(sqlite3_column_text(eqp, 3));
    const auto it = depth.find(parent);
    const int d = (it != depth.end() ? it->second : -1) + 1;
    depth[id] = d;
    if (!text.empty()) text += '\n';
    text += std::string(static_cast<size_t>(d) * 4, ' ') + "- " + (detail ? detail : "");
  }
  return text.empty() ? "- (no plan steps)" : text;
}

}  // namespace qr
