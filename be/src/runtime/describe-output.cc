#include "runtime/describe-output.h"

#include <sqlite3.h>

#include "runtime/row-encoder.h"
#include "runtime/sqlite-connection.h"

namespace qr {
namespace {

/// 's' as an SQL string literal ('' for a quote); NULL for a null pointer.
std::string Quoted(const char* s) {
  if (s == nullptr) return "NULL";
  std::string out = "'";
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p == '\'') out.push_back('\'');
    out.push_back(*p);
  }
  out.push_back('\'');
  return out;
}

/// Bytes of a value of a fixed-width Trino type; 0 for the others.
int TypeSize(const std::string& type) {
  if (type == "bigint" || type == "double") return 8;
  if (type == "boolean") return 1;
  return 0;
}

}  // namespace

bool DescribeOutputSql(SqliteConnection* conn, std::string_view sql, std::string* out,
                       QueryError* error) {
  sqlite3_stmt* stmt = nullptr;
  if (!conn->Prepare(sql, &stmt, error)) return false;
  const int n = sqlite3_column_count(stmt);
  std::string rows;
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt, i);
    const Column column =
        MakeColumn(name, i, KindFromDeclType(sqlite3_column_decltype(stmt, i)));
    const char* origin = sqlite3_column_origin_name(stmt, i);
    const bool aliased = origin == nullptr || name == nullptr || std::string_view(origin) != name;
    rows += i > 0 ? ",(" : "(";
    rows += Quoted(column.name.c_str()) + ",''," + Quoted(sqlite3_column_database_name(stmt, i)) +
            "," + Quoted(sqlite3_column_table_name(stmt, i)) + "," + Quoted(column.type.c_str()) +
            "," + std::to_string(TypeSize(column.type)) + "," + (aliased ? "1" : "0") + ")";
  }
  sqlite3_finalize(stmt);
  constexpr char kColumns[] =
      "column1 AS \"Column Name\", column2 AS \"Catalog\", column3 AS \"Schema\", column4 AS "
      "\"Table\", column5 AS \"Type\", column6 AS \"Type Size\", column7 AS \"Aliased\"";
  *out = n == 0 ? std::string("SELECT ") + kColumns +
                      " FROM (VALUES ('','','','','',0,0)) WHERE 0"
                : std::string("SELECT ") + kColumns + " FROM (VALUES " + rows + ")";
  return true;
}

}  // namespace qr
