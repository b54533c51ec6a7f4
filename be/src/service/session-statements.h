#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/query-error.h"
#include "runtime/trino-literal.h"

/// Statements the coordinator answers from the session rather than SQLite's dialect:
/// prepared statements (PREPARE, EXECUTE [IMMEDIATE] ... USING, DEALLOCATE PREPARE, DESCRIBE
/// INPUT), USE, SET SESSION / RESET SESSION, CALL system.runtime.kill_query, and the
/// transaction statements (NOT_SUPPORTED).
/// Like Trino, the server keeps no session: the client sends its prepared statements
/// (X-Trino-Prepared-Statement), properties (X-Trino-Session), catalog and schema with every
/// request, and these statements answer with response headers that tell it what to change.
/// Thread-safety: stateless functions.

namespace qr {

struct SessionInfo;

/// How the coordinator runs one submitted statement.
struct StatementPlan {
  /// The SQL SQLite runs instead of the statement (QueryContext::sql); null: the statement.
  std::shared_ptr<const std::string> sql;
  /// Bound to the placeholders of the SQL that runs (EXECUTE ... USING).
  std::vector<SqlParameter> parameters;
  /// Sent with every answer of the query: X-Trino-Added-Prepare, X-Trino-Set-Session, ...
  std::vector<std::pair<std::string, std::string>> response_headers;
  /// Trino's `updateType` of a session statement ("PREPARE", "USE", ...), sent with every
  /// answer; null for a query. The JDBC driver applies the response headers above only to a
  /// statement that has one.
  const char* update_type = nullptr;
  /// The execution time limit the session asks for (query_max_execution_time,
  /// query_max_run_time); 0: none. The server's limit still applies when it is lower.
  int64_t exec_time_limit_ms = 0;
  /// DESCRIBE OUTPUT: describe the result columns of 'sql' instead of running it.
  bool describe_output = false;
  /// CALL system.runtime.kill_query(query_id => ..., message => ...): the query the
  /// coordinator cancels, under the rules of /cancel_query, and the message its client sees
  /// (empty: none given).
  std::optional<std::string> kill_query_id;
  std::string kill_message;
  /// Set when the statement fails before it runs (an unknown prepared statement, a malformed
  /// parameter, an unknown session property).
  std::optional<QueryError> error;
};

/// Plans 'statement' under 'session'. Statements that are not session statements run as
/// sent (only the session's properties apply).
StatementPlan PlanStatement(std::string_view statement, const SessionInfo& session);

/// Number of '?' placeholders in 'sql' outside string literals, quoted identifiers and
/// comments.
int CountPlaceholders(std::string_view sql);

}  // namespace qr
