#include "service/session-properties.h"

#include <array>

#include "runtime/sql-rewrite.h"
#include "service/client-request-state.h"

namespace qr {
namespace {

struct SessionProperty {
  const char* name;
  const char* description;
};

/// Both lower the execution time limit of the session's queries (the server's
/// --exec_time_limit_s still applies when it is lower). Sorted by name.
constexpr std::array<SessionProperty, 2> kProperties = {{
    {"query_max_execution_time",
     "Maximum execution time of a query (a duration: '30s', '10m'); empty: the server's "
     "--exec_time_limit_s alone"},
    {"query_max_run_time",
     "Maximum run time of a query, queueing included; enforced as an execution time limit; "
     "empty: the server's --exec_time_limit_s alone"},
}};

}  // namespace

bool IsKnownSessionProperty(std::string_view name) {
  for (const SessionProperty& p : kProperties) {
    if (name == p.name) return true;
  }
  return false;
}

std::string SupportedSessionProperties() {
  std::string out;
  for (const SessionProperty& p : kProperties) {
    out += (out.empty() ? "" : ", ") + std::string(p.name);
  }
  return out;
}

std::string ShowSessionSql(const SessionInfo& session, const std::optional<std::string>& like,
                           const std::optional<std::string>& escape) {
  std::string values;
  for (const SessionProperty& p : kProperties) {
    std::string value;  // the last one the client sent wins, as its header's order says
    for (const auto& [name, v] : session.properties) {
      if (name == p.name) value = v;
    }
    values += values.empty() ? "(" : ", (";
    values += QuoteString(p.name) + ", " + QuoteString(value) + ", '', 'varchar', " +
              QuoteString(p.description) + ")";
  }
  std::string sql =
      "SELECT * FROM (SELECT column1 AS \"Name\", column2 AS \"Value\", column3 AS \"Default\", "
      "column4 AS \"Type\", column5 AS \"Description\" FROM (VALUES " + values + "))";
  if (like) {
    sql += " WHERE \"Name\" LIKE " + QuoteString(*like);
    if (escape) sql += " ESCAPE " + QuoteString(*escape);
  }
  return sql + " ORDER BY 1";
}

}  // namespace qr
