// EXPLAIN of a query's statement for its per-query page (query-plan.h).

#include "service/query-plan.h"

#include <cctype>
#include <memory>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "runtime/sqlite-connection.h"
#include "service/client-request-state.h"
#include "service/query-coordinator.h"

namespace qr {
namespace {

/// The source of the EXPLAIN queries the per-query page submits.
constexpr char kExplainSource[] = "coordinatord-query-plan";

/// The first word of 'sql' (after blanks and comments), upper-cased.
std::string FirstKeyword(std::string_view sql) {
  size_t pos = SkipBlankSql(sql, 0);
  std::string word;
  while (pos < sql.size() && std::isalpha(static_cast<unsigned char>(sql[pos]))) {
    word.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(sql[pos++]))));
  }
  return word;
}

/// The plan text from the result rows ("[\"plan\"]" rows, comma-separated: one row, one
/// column, for Trino's EXPLAIN).
StatementPlanResult PlanFromRows(const std::string& rows) {
  StatementPlanResult result;
  nlohmann::json parsed =
      nlohmann::json::parse("[" + rows + "]", nullptr, /*allow_exceptions=*/false);
  if (parsed.is_array()) {
    for (const auto& row : parsed) {
      if (row.is_array() && !row.empty() && row[0].is_string()) {
        if (!result.plan.empty()) result.plan += "\n";
        result.plan += row[0].get<std::string>();
      }
    }
  }
  if (result.plan.empty()) result.no_plan_reason = "no plan: SQLite answered no plan rows";
  return result;
}

/// One EXPLAIN query in flight: fetches its pages as a client would, then answers.
/// Poll() runs on one thread at a time: the caller's, then each waiter's (a waiter is
/// registered only when Fetch() returns kWait, after which the registering call touches
/// nothing).
struct ExplainFetch : std::enable_shared_from_this<ExplainFetch> {
  QueryCoordinator* coordinator = nullptr;
  ClientRequestStatePtr req;
  int64_t token = 0;
  std::string rows;
  std::function<void(StatementPlanResult)> done;
  /// Ends the query after the bound; canceled by Finish() (on the timer's own thread: a
  /// timer is not safe to touch from two threads at once).
  std::shared_ptr<boost::asio::steady_timer> timer;

  /// Starts 'timer': when it fires with the query not ended, fails it (its waiter, Poll(),
  /// then delivers the error page).
  void StartTimer(const ExplainBound& bound) {
    timer = std::make_shared<boost::asio::steady_timer>(*bound.io, bound.timeout);
    // The query by id, not by reference: the timer must not keep it alive.
    timer->async_wait([coordinator = coordinator, id = req->query_id(),
                       timeout = bound.timeout,
                       timeouts = bound.timeouts](const boost::system::error_code& ec) {
      if (ec) return;
      ClientRequestStatePtr query = coordinator->Find(id);
      if (!query) return;
      const std::string ms = std::to_string(timeout.count());
      const bool failed = coordinator->FailRequest(
          query, QueryError::ExceededTimeLimit(
                     "The per-query page's EXPLAIN did not end within --query_plan_timeout_ms=" +
                     ms + " ms (it waits for a running slot like any statement)"));
      if (failed && timeouts != nullptr) timeouts->fetch_add(1, std::memory_order_relaxed);
    });
  }

  void Poll() {
    for (;;) {
      QueryPage page;
      uint64_t waiter_id = 0;
      auto self = shared_from_this();
      const auto outcome = coordinator->Fetch(
          req, token, /*may_wait=*/true, [self] { self->Poll(); }, &page, &waiter_id);
      if (outcome == ClientRequestState::FetchOutcome::kWait) return;
      if (outcome != ClientRequestState::FetchOutcome::kPage) {
        // Not reachable with one fetcher and fresh tokens; ended rather than left running.
        coordinator->CancelRequest(req);
        return Finish(StatementPlanResult{"", "no plan: the EXPLAIN query's results were lost",
                                          std::nullopt});
      }
      if (page.page && page.page->json_rows && page.page->num_rows > 0) {
        if (!rows.empty()) rows += ",";
        rows += *page.page->json_rows;
      }
      if (page.next_token) {
        token = *page.next_token;
        continue;
      }
      if (page.error) {
        return Finish(StatementPlanResult{
            "", "no plan: " + page.error->name + ": " + page.error->message, page.error});
      }
      return Finish(PlanFromRows(rows));
    }
  }
  void Finish(StatementPlanResult result) {
    if (timer) {
      auto executor = timer->get_executor();
      boost::asio::post(executor, [t = std::move(timer)] { t->cancel(); });
    }
    auto callback = std::move(done);
    callback(std::move(result));
  }
};

}  // namespace

std::string NoPlanReason(std::string_view statement) {
  std::string word = FirstKeyword(statement);
  if (word == "SELECT" || word == "WITH" || word == "VALUES" || word == "TABLE") return "";
  if (word.empty()) return "no plan: the statement does not start with a keyword";
  return "no plan: " + word +
         " is not a query (only SELECT, WITH, VALUES and TABLE statements have a plan)";
}

void ExplainStatement(QueryCoordinator* coordinator, const ClientRequestState& req,
                      const ExplainBound& bound, std::function<void(StatementPlanResult)> done) {
  static const std::string kEmpty;
  const std::string& statement = req.statement() ? *req.statement() : kEmpty;
  // EXECUTE runs its prepared statement: that is what is explained.
  const bool execute = FirstKeyword(statement) == "EXECUTE" && req.plan().sql;
  const std::string& sql = execute ? *req.plan().sql : statement;
  if (std::string reason = NoPlanReason(sql); !reason.empty()) {
    return done(StatementPlanResult{"", std::move(reason), std::nullopt});
  }
  if (req.plan().error) {
    return done(
        StatementPlanResult{"", "no plan: the statement failed before it ran", std::nullopt});
  }
  // Trino's EXPLAIN (SQLite's EXPLAIN QUERY PLAN, prepared and never stepped, drawn as
  // indented text), submitted as any statement of the query's user and session is.
  SessionInfo session = req.session();
  session.source = kExplainSource;
  auto fetch = std::make_shared<ExplainFetch>();
  fetch->coordinator = coordinator;
  fetch->done = std::move(done);
  fetch->req = coordinator->Submit(std::make_shared<const std::string>("EXPLAIN " + sql),
                                   std::move(session));
  QueryPage first = fetch->req->CurrentPage();
  if (!first.next_token) {
    // Refused at submission: terminal already (and completed by the coordinator).
    QueryError error = first.error.value_or(QueryError::UserCanceled());
    return fetch->Finish(StatementPlanResult{
        "", "no plan: " + error.name + ": " + error.message, std::move(error)});
  }
  fetch->token = *first.next_token;
  if (bound.io != nullptr) fetch->StartTimer(bound);
  fetch->Poll();
}

}  // namespace qr
