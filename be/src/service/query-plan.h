#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/query-state.h"

namespace qr {

class ClientRequestState;
class QueryExecMgr;
class SqliteEngine;

/// The SQLite plan of a query's statement, for its per-query page.
struct StatementPlanResult {
  /// The plan as indented text (SQLite's EXPLAIN QUERY PLAN, drawn as its shell does).
  std::string plan;
  /// Why there is no plan (the statement is not a SELECT, or explaining it failed); empty
  /// when 'plan' is set.
  std::string no_plan_reason;
};

/// Why 'statement' gets no plan (it is not a query: a SHOW, SET SESSION, CALL, EXPLAIN...),
/// or empty when it is a SELECT (or WITH, VALUES, TABLE) that can be explained.
std::string NoPlanReason(std::string_view statement);

/// Explains what 'req' runs (EXPLAIN QUERY PLAN of its SQL, never the statement itself) on
/// one of 'engine''s executor threads, with its read-only connection and its interrupt
/// handling, as a query of its own registered in 'exec_mgr' with 'ctx' (the server's
/// execution defaults; its time limit applies). Calls 'done' once, on an executor thread or
/// the caller's, with the plan or the reason there is none.
void ExplainStatement(const ClientRequestState& req, QueryContext ctx, QueryExecMgr* exec_mgr,
                      SqliteEngine* engine, std::function<void(StatementPlanResult)> done);

}  // namespace qr
