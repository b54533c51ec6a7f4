#include "runtime/trino-metadata.h"

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <absl/strings/str_replace.h>

#include "runtime/sql-rewrite.h"
#include "runtime/trino-types.h"

namespace qr {

namespace {

/// A metadata view: its name, the Trino type of each column (one letter each: v varchar,
/// b bigint, o boolean; none for the internal views and those over the coordinator's virtual
/// tables, which declare their own), and its query.
struct MetadataView {
  const char* name;
  const char* types;
  const char* body;
};

/// The metadata views; "@CATALOG@" stands for the served catalog's name as a string literal.
/// temp."qr_tables" lists every table of every catalog: the served database's tables and
/// views (schema main), and the metadata views themselves (information_schema of the served
/// catalog, and the schemas of the system catalog).
constexpr MetadataView kViews[] = {
    {"qr_tables", nullptr, R"sql(
SELECT @CATALOG@ AS table_cat, 'main' AS table_schem, name AS table_name,
       CASE type WHEN 'view' THEN 'VIEW' ELSE 'TABLE' END AS table_type,
       'main' AS sqlite_schema, name AS sqlite_name, CASE type WHEN 'view' THEN sql END AS view_sql
  FROM main.sqlite_schema
 WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
UNION ALL
SELECT @CATALOG@, 'information_schema', substr(name, 20), 'TABLE', 'temp', name, NULL
  FROM temp.sqlite_schema WHERE type = 'view' AND name LIKE 'information\_schema.%' ESCAPE '\'
UNION ALL
SELECT 'system', substr(name, 8, instr(substr(name, 8), '.') - 1),
       substr(name, 8 + instr(substr(name, 8), '.')), 'TABLE', 'temp', name, NULL
  FROM temp.sqlite_schema WHERE type = 'view' AND name LIKE 'system.%')sql"},
    {"qr_schemata", nullptr, R"sql(
SELECT @CATALOG@ AS catalog_name, 'main' AS schema_name
UNION SELECT table_cat, table_schem FROM temp.qr_tables)sql"},
    {"qr_columns", nullptr, R"sql(
SELECT t.table_cat, t.table_schem, t.table_name, p.name AS column_name,
       coalesce((SELECT v.type FROM temp.qr_view_types v
                  WHERE t.sqlite_schema = 'temp' AND v.view = t.sqlite_name AND v.cid = p.cid),
                p.type) AS decl_type,
       p.cid + 1 AS ordinal_position, p.dflt_value AS column_default, p."notnull" AS not_null,
       p.hidden AS hidden
  FROM temp.qr_tables t JOIN pragma_table_xinfo(t.sqlite_name, t.sqlite_schema) p
 WHERE p.hidden <> 1)sql"},
    {"information_schema.schemata", "vv", R"sql(
SELECT catalog_name, schema_name FROM temp.qr_schemata WHERE catalog_name = @CATALOG@)sql"},
    {"information_schema.tables", "vvvvv", R"sql(
SELECT table_cat AS table_catalog, table_schem AS table_schema, table_name,
       CASE table_type WHEN 'VIEW' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type,
       NULL AS table_comment
  FROM temp.qr_tables WHERE table_cat = @CATALOG@)sql"},
    {"information_schema.columns", "vvvvbvvvv", R"sql(
SELECT table_cat AS table_catalog, table_schem AS table_schema, table_name, column_name,
       ordinal_position, column_default,
       CASE WHEN not_null THEN 'NO' ELSE 'YES' END AS is_nullable,
       qr_type_info(decl_type, 'name') AS data_type, NULL AS comment
  FROM temp.qr_columns WHERE table_cat = @CATALOG@)sql"},
    {"information_schema.views", "vvvvv", R"sql(
SELECT table_cat AS table_catalog, table_schem AS table_schema, table_name,
       NULL AS view_owner, qr_view_body(view_sql) AS view_definition
  FROM temp.qr_tables WHERE table_cat = @CATALOG@ AND table_type = 'VIEW')sql"},
    {"system.jdbc.catalogs", "v", R"sql(
SELECT DISTINCT catalog_name AS TABLE_CAT FROM temp.qr_schemata)sql"},
    {"system.jdbc.schemas", "vv", R"sql(
SELECT schema_name AS TABLE_SCHEM, catalog_name AS TABLE_CATALOG FROM temp.qr_schemata)sql"},
    {"system.jdbc.tables", "vvvvvvvvvv", R"sql(
SELECT table_cat AS TABLE_CAT, table_schem AS TABLE_SCHEM, table_name AS TABLE_NAME,
       table_type AS TABLE_TYPE, NULL AS REMARKS, NULL AS TYPE_CAT, NULL AS TYPE_SCHEM,
       NULL AS TYPE_NAME, NULL AS SELF_REFERENCING_COL_NAME, NULL AS REF_GENERATION
  FROM temp.qr_tables)sql"},
    {"system.jdbc.table_types", "v", R"sql(
SELECT 'TABLE' AS TABLE_TYPE UNION ALL SELECT 'VIEW')sql"},
    {"system.jdbc.columns", "vvvvbvbbbbbvvbbbbvvvvbvv", R"sql(
SELECT table_cat AS TABLE_CAT, table_schem AS TABLE_SCHEM, table_name AS TABLE_NAME,
       column_name AS COLUMN_NAME, qr_type_info(decl_type, 'jdbc') AS DATA_TYPE,
       qr_type_info(decl_type, 'name') AS TYPE_NAME,
       qr_type_info(decl_type, 'size') AS COLUMN_SIZE, NULL AS BUFFER_LENGTH,
       qr_type_info(decl_type, 'digits') AS DECIMAL_DIGITS,
       qr_type_info(decl_type, 'radix') AS NUM_PREC_RADIX,
       CASE WHEN not_null THEN 0 ELSE 1 END AS NULLABLE, NULL AS REMARKS,
       column_default AS COLUMN_DEF, NULL AS SQL_DATA_TYPE, NULL AS SQL_DATETIME_SUB,
       qr_type_info(decl_type, 'octets') AS CHAR_OCTET_LENGTH,
       ordinal_position AS ORDINAL_POSITION,
       CASE WHEN not_null THEN 'NO' ELSE 'YES' END AS IS_NULLABLE,
       NULL AS SCOPE_CATALOG, NULL AS SCOPE_SCHEMA, NULL AS SCOPE_TABLE,
       NULL AS SOURCE_DATA_TYPE, 'NO' AS IS_AUTOINCREMENT,
       CASE WHEN hidden IN (2, 3) THEN 'YES' ELSE 'NO' END AS IS_GENERATEDCOLUMN
  FROM temp.qr_columns)sql"},
    {"system.jdbc.types", "vbbvvvbobooovbbbbb", R"sql(
SELECT column1 AS TYPE_NAME, column2 AS DATA_TYPE, column3 AS PRECISION,
       column4 AS LITERAL_PREFIX, column5 AS LITERAL_SUFFIX, column6 AS CREATE_PARAMS,
       1 AS NULLABLE, column7 AS CASE_SENSITIVE, 3 AS SEARCHABLE,
       column8 AS UNSIGNED_ATTRIBUTE, column9 AS FIXED_PREC_SCALE, 0 AS AUTO_INCREMENT,
       NULL AS LOCAL_TYPE_NAME, column10 AS MINIMUM_SCALE, column11 AS MAXIMUM_SCALE,
       NULL AS SQL_DATA_TYPE, NULL AS SQL_DATETIME_SUB, column12 AS NUM_PREC_RADIX
  FROM (VALUES
    ('bigint', -5, 19, NULL, NULL, NULL, 0, 0, 1, 0, 0, 10),
    ('boolean', 16, 1, NULL, NULL, NULL, 0, 1, 0, NULL, NULL, NULL),
    ('date', 91, 10, 'DATE ''', '''', NULL, 0, 1, 0, NULL, NULL, NULL),
    ('decimal', 3, 38, NULL, NULL, 'precision,scale', 0, 0, 1, 0, 38, 10),
    ('double', 8, 53, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, 2),
    ('timestamp', 93, 23, 'TIMESTAMP ''', '''', NULL, 0, 1, 0, 3, 3, NULL),
    ('varbinary', -3, NULL, 'X''', '''', NULL, 0, 1, 0, NULL, NULL, NULL),
    ('varchar', 12, NULL, '''', '''', 'length', 1, 1, 0, NULL, NULL, NULL)))sql"},
    // What the JDBC driver reads (with LIMIT 0) for features the engine does not have.
    {"system.jdbc.procedures", "vvvvbv", R"sql(
SELECT NULL AS PROCEDURE_CAT, NULL AS PROCEDURE_SCHEM, NULL AS PROCEDURE_NAME,
       NULL AS REMARKS, NULL AS PROCEDURE_TYPE, NULL AS SPECIFIC_NAME WHERE 0)sql"},
    {"system.jdbc.procedure_columns", "vvvvbbvbbbbbvvbbbbvv", R"sql(
SELECT NULL AS PROCEDURE_CAT, NULL AS PROCEDURE_SCHEM, NULL AS PROCEDURE_NAME,
       NULL AS COLUMN_NAME, NULL AS COLUMN_TYPE, NULL AS DATA_TYPE, NULL AS TYPE_NAME,
       NULL AS PRECISION, NULL AS LENGTH, NULL AS SCALE, NULL AS RADIX, NULL AS NULLABLE,
       NULL AS REMARKS, NULL AS COLUMN_DEF, NULL AS SQL_DATA_TYPE, NULL AS SQL_DATETIME_SUB,
       NULL AS CHAR_OCTET_LENGTH, NULL AS ORDINAL_POSITION, NULL AS IS_NULLABLE,
       NULL AS SPECIFIC_NAME WHERE 0)sql"},
    {"system.jdbc.udts", "vvvvbvb", R"sql(
SELECT NULL AS TYPE_CAT, NULL AS TYPE_SCHEM, NULL AS TYPE_NAME, NULL AS CLASS_NAME,
       NULL AS DATA_TYPE, NULL AS REMARKS, NULL AS BASE_TYPE WHERE 0)sql"},
    {"system.jdbc.super_types", "vvvvvv", R"sql(
SELECT NULL AS TYPE_CAT, NULL AS TYPE_SCHEM, NULL AS TYPE_NAME, NULL AS SUPERTYPE_CAT,
       NULL AS SUPERTYPE_SCHEM, NULL AS SUPERTYPE_NAME WHERE 0)sql"},
    {"system.jdbc.super_tables", "vvvv", R"sql(
SELECT NULL AS TABLE_CAT, NULL AS TABLE_SCHEM, NULL AS TABLE_NAME,
       NULL AS SUPERTABLE_NAME WHERE 0)sql"},
    {"system.jdbc.attributes", "vvvvbvbbbbbvvbbbbvvvvb", R"sql(
SELECT NULL AS TYPE_CAT, NULL AS TYPE_SCHEM, NULL AS TYPE_NAME, NULL AS ATTR_NAME,
       NULL AS DATA_TYPE, NULL AS ATTR_TYPE_NAME, NULL AS ATTR_SIZE, NULL AS DECIMAL_DIGITS,
       NULL AS NUM_PREC_RADIX, NULL AS NULLABLE, NULL AS REMARKS, NULL AS ATTR_DEF,
       NULL AS SQL_DATA_TYPE, NULL AS SQL_DATETIME_SUB, NULL AS CHAR_OCTET_LENGTH,
       NULL AS ORDINAL_POSITION, NULL AS IS_NULLABLE, NULL AS SCOPE_CATALOG,
       NULL AS SCOPE_SCHEMA, NULL AS SCOPE_TABLE, NULL AS SOURCE_DATA_TYPE WHERE 0)sql"},
    {"system.jdbc.pseudo_columns", "vvvvbbbbvvbv", R"sql(
SELECT NULL AS TABLE_CAT, NULL AS TABLE_SCHEM, NULL AS TABLE_NAME, NULL AS COLUMN_NAME,
       NULL AS DATA_TYPE, NULL AS COLUMN_SIZE, NULL AS DECIMAL_DIGITS, NULL AS NUM_PREC_RADIX,
       NULL AS COLUMN_USAGE, NULL AS REMARKS, NULL AS CHAR_OCTET_LENGTH,
       NULL AS IS_NULLABLE WHERE 0)sql"},
    {"system.metadata.catalogs", "vvv", R"sql(
SELECT @CATALOG@ AS catalog_name, @CATALOG@ AS connector_id, 'sqlite' AS connector_name
UNION ALL SELECT 'system', 'system', 'system')sql"},
    // The coordinator's own tables (system-tables.h), empty in an engine without one.
    {"system.runtime.queries", nullptr, "SELECT * FROM main.qr_system_runtime_queries"},
    {"system.runtime.nodes", nullptr, "SELECT * FROM main.qr_system_runtime_nodes"},
    {"system.runtime.completed_queries", nullptr,
     "SELECT * FROM main.qr_system_runtime_completed_queries"},
    {"system.metadata.table_comments", "vvvv", R"sql(
SELECT table_cat AS catalog_name, table_schem AS schema_name, table_name,
       NULL AS comment FROM temp.qr_tables)sql"},
};

/// qr_type_info(declared_type, field): what system.jdbc.columns and information_schema.columns
/// say about a column of that declared type. 'field' is one of name (the Trino type name),
/// jdbc (java.sql.Types), size (COLUMN_SIZE), digits (DECIMAL_DIGITS), radix
/// (NUM_PREC_RADIX), octets (CHAR_OCTET_LENGTH).
void TypeInfoFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  const auto* decl = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const auto* field = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
  const ColumnType type = TypeFromDecl(decl);
  const std::string_view f = field != nullptr ? field : "";
  std::optional<int64_t> value;  // none: NULL (java.sql.Types codes can be negative)
  if (f == "name") {
    const std::string name = TypeName(type);
    sqlite3_result_text(ctx, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    return;
  } else if (f == "jdbc") {
    value = JdbcTypeCode(type);
  } else if (f == "size") {
    switch (type.kind) {
      case ColumnKind::kBigint: value = 19; break;
      case ColumnKind::kDouble: value = 53; break;
      case ColumnKind::kBoolean: value = 1; break;
      case ColumnKind::kDate: value = 10; break;
      case ColumnKind::kTimestamp: value = 23; break;
      case ColumnKind::kDecimal: value = type.precision; break;
      case ColumnKind::kVarchar:
        if (type.length > 0) value = type.length;
        break;
      default: break;
    }
  } else if (f == "digits") {
    if (type.kind == ColumnKind::kBigint) value = 0;
    if (type.kind == ColumnKind::kDecimal) value = type.scale;
    if (type.kind == ColumnKind::kTimestamp) value = 3;
  } else if (f == "radix") {
    if (type.kind == ColumnKind::kBigint || type.kind == ColumnKind::kDecimal) value = 10;
    if (type.kind == ColumnKind::kDouble) value = 2;
  } else if (f == "octets") {
    if (type.kind == ColumnKind::kVarchar && type.length > 0) value = int64_t{type.length} * 4;
  }
  if (value.has_value()) {
    sqlite3_result_int64(ctx, *value);
  } else {
    sqlite3_result_null(ctx);
  }
}

/// qr_view_body(create_view_sql): the query of a CREATE VIEW statement (what follows its
/// first AS outside parentheses).
void ViewBodyFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  const auto* sql = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  if (sql == nullptr) return sqlite3_result_null(ctx);
  const std::string_view text(sql, sqlite3_value_bytes(argv[0]));
  // One token at a time, up to the AS: any text may be passed, and the whole of a 2 MB one
  // tokenized at once took ~100 MB outside the query's memory limit.
  int depth = 0;
  std::optional<size_t> body_start;
  ForEachSqlToken(text, [&](const SqlToken& t) {
    if (t.kind == SqlToken::Kind::kPunct && text[t.begin] == '(') ++depth;
    if (t.kind == SqlToken::Kind::kPunct && text[t.begin] == ')') --depth;
    if (depth == 0 && t.kind == SqlToken::Kind::kWord && t.value == "as") {
      size_t start = t.end;
      while (start < text.size() && (text[start] == ' ' || text[start] == '\n')) ++start;
      body_start = start;
      return false;
    }
    return true;
  });
  if (body_start) {
    const std::string_view body = text.substr(*body_start);
    sqlite3_result_text(ctx, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
    return;
  }
  sqlite3_result_text(ctx, sql, -1, SQLITE_TRANSIENT);
}

}  // namespace

Status ValidateCatalogName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64 && !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) {
    return InvalidArgument("the catalog name '" + std::string(name) +
                           "' is not a lower-case identifier ([a-z_][a-z0-9_]*, at most 64 "
                           "characters)");
  }
  if (name == "system") {
    return InvalidArgument("the catalog name 'system' is Trino's catalog of system tables; "
                           "choose another --catalog_name");
  }
  return Status::OK();
}

Status InstallMetadataViews(sqlite3* db, std::string_view catalog) {
  QR_RETURN_IF_ERROR(ValidateCatalogName(catalog));
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  if (sqlite3_create_function_v2(db, "qr_type_info", 2, kFlags, nullptr, &TypeInfoFunction,
                                 nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_create_function_v2(db, "qr_view_body", 1, kFlags, nullptr, &ViewBodyFunction,
                                 nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Internal(std::string("cannot register the metadata functions: ") + sqlite3_errmsg(db));
  }
  const std::string literal = QuoteString(catalog);
  // An expression column has no declared type, so an empty result would type it `unknown`:
  // each typed view ends with an empty arm that reads columns of qr_types, and SQLite takes
  // a compound query's declared types from its last arm (and its names from its first).
  // SQLite gives a view's columns (pragma table_xinfo, so DESCRIBE and the column listings)
  // the types of the compound's first arm instead: those come from qr_view_types.
  std::string sql =
      "BEGIN; CREATE TEMP TABLE qr_types (v VARCHAR, b BIGINT, o BOOLEAN);\n"
      "CREATE TEMP TABLE qr_view_types (view TEXT, cid INTEGER, type TEXT, "
      "PRIMARY KEY (view, cid)) WITHOUT ROWID;\n";
  std::string view_types;
  for (const MetadataView& view : kViews) {
    sql += "CREATE TEMP VIEW " + QuoteIdentifier(view.name) + " AS " +
           absl::StrReplaceAll(view.body, {{"@CATALOG@", literal}});
    if (view.types != nullptr) {
      sql += "\nUNION ALL SELECT ";
      for (const char* t = view.types; *t != '\0'; ++t) {
        if (t != view.types) sql += ", ";
        sql += *t;
        const char* type = *t == 'v' ? "VARCHAR" : *t == 'b' ? "BIGINT" : "BOOLEAN";
        view_types += std::string(view_types.empty() ? "" : ", ") + "(" +
                      QuoteString(view.name) + ", " + std::to_string(t - view.types) + ", '" +
                      type + "')";
      }
      sql += " FROM temp.qr_types WHERE 0";
    }
    sql += ";\n";
  }
  sql += "INSERT INTO qr_view_types VALUES " + view_types + ";\n";
  sql += "CREATE TEMP TABLE qr_valid (\"Valid\" BOOLEAN); INSERT INTO qr_valid VALUES (1);";
  sql += "COMMIT;";
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return Internal("cannot create the metadata views: " + msg);
  }
  return Status::OK();
}

}  // namespace qr
