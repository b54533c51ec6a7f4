#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "runtime/query-error.h"

namespace qr {

class ClientRequestState;
class QueryCoordinator;

/// The SQLite plan of a query's statement, for its per-query page.
struct StatementPlanResult {
  /// The plan as indented text (SQLite's EXPLAIN QUERY PLAN, drawn as its shell does).
  std::string plan;
  /// Why there is no plan (the statement is not a SELECT, or explaining it failed); empty
  /// when 'plan' is set.
  std::string no_plan_reason;
  /// The error of the EXPLAIN query when it failed: refused by admission (QUERY_QUEUE_FULL,
  /// SERVER_SHUTTING_DOWN, as any statement), or failed explaining.
  std::optional<QueryError> error;
};

/// Why 'statement' gets no plan (it is not a query: a SHOW, SET SESSION, CALL, EXPLAIN...),
/// or empty when it is a SELECT (or WITH, VALUES, TABLE) that can be explained.
std::string NoPlanReason(std::string_view statement);

/// The bound of one ExplainStatement(): a timer on 'io' fails the EXPLAIN query with
/// EXCEEDED_TIME_LIMIT (naming --query_plan_timeout_ms) when it has not ended 'timeout' after
/// its submission, queued or running, and counts it in '*timeouts'.
struct ExplainBound {
  boost::asio::io_context* io = nullptr;
  std::chrono::milliseconds timeout{10000};
  std::atomic<int64_t>* timeouts = nullptr;
};

/// Explains what 'req' runs (Trino's EXPLAIN of its SQL, never the statement itself) as a
/// statement of its own submitted to 'coordinator' in 'req''s session (source
/// "coordinatord-query-plan"): it goes through admission like any statement (queued behind
/// --max_running_queries and the user's running cap, refused by the in-flight caps with the
/// same errors) and is listed and recorded as a query, ended by 'bound' if it takes longer.
/// Calls 'done' once, on whichever thread delivers its final page (the caller's, or the one
/// that completes it), with the plan or the reason there is none.
void ExplainStatement(QueryCoordinator* coordinator, const ClientRequestState& req,
                      const ExplainBound& bound, std::function<void(StatementPlanResult)> done);

}  // namespace qr
