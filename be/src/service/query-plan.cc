// EXPLAIN of a query's statement for its per-query page (query-plan.h).

#include "service/query-plan.h"

#include <cctype>
#include <memory>
#include <utility>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "runtime/query-exec-mgr.h"
#include "runtime/sqlite-connection.h"
#include "runtime/sqlite-engine.h"
#include "service/client-request-state.h"
#include "util/mutex.h"
#include "util/unique-id.h"

namespace qr {
namespace {

/// Explaining never needs long: the plan is prepared, not run. The server's own limit applies
/// when it is lower.
constexpr int64_t kExplainTimeLimitMs = 10000;

/// The first word of 'sql' (after blanks and comments), upper-cased.
std::string FirstKeyword(std::string_view sql) {
  size_t pos = SkipBlankSql(sql, 0);
  std::string word;
  while (pos < sql.size() && std::isalpha(static_cast<unsigned char>(sql[pos]))) {
    word.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(sql[pos++]))));
  }
  return word;
}

/// One explain in flight: collects the result pages the executor puts, then answers.
struct Explain {
  Mutex lock;
  QueryStateHandle exec QR_GUARDED_BY(lock);
  std::string rows QR_GUARDED_BY(lock);
  bool answered QR_GUARDED_BY(lock) = false;
  std::function<void(StatementPlanResult)> done;
};

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

/// The buffer's change callback: takes what is there; answers once the executor is done.
void OnChange(const std::shared_ptr<Explain>& explain) {
  StatementPlanResult result;
  QueryStateHandle finished;  // dropped after the lock, once the answer is sent
  {
    MutexLock l(&explain->lock);
    if (explain->answered || !explain->exec) return;
    for (;;) {
      ResultPage page;
      std::optional<QueryError> error;
      ResultBuffer::Next next = explain->exec->result_buffer()->TryGet(&page, &error);
      if (next == ResultBuffer::Next::kNotYet) return;
      if (next == ResultBuffer::Next::kPage) {
        if (page.json_rows && page.num_rows > 0) {
          if (!explain->rows.empty()) explain->rows += ",";
          explain->rows += *page.json_rows;
        }
        continue;
      }
      if (error) {
        result.no_plan_reason = "no plan: " + error->name + ": " + error->message;
      } else {
        result = PlanFromRows(explain->rows);
      }
      break;
    }
    explain->answered = true;
    finished = std::move(explain->exec);  // breaks the cycle through the buffer's callback
  }
  explain->done(std::move(result));
}

}  // namespace

std::string NoPlanReason(std::string_view statement) {
  std::string word = FirstKeyword(statement);
  if (word == "SELECT" || word == "WITH" || word == "VALUES" || word == "TABLE") return "";
  if (word.empty()) return "no plan: the statement does not start with a keyword";
  return "no plan: " + word +
         " is not a query (only SELECT, WITH, VALUES and TABLE statements have a plan)";
}

void ExplainStatement(const ClientRequestState& req, QueryContext ctx, QueryExecMgr* exec_mgr,
                      SqliteEngine* engine, std::function<void(StatementPlanResult)> done) {
  static const std::string kEmpty;
  const std::string& statement = req.statement() ? *req.statement() : kEmpty;
  // EXECUTE runs its prepared statement: that is what is explained.
  const bool execute = FirstKeyword(statement) == "EXECUTE" && req.plan().sql;
  const std::string& sql = execute ? *req.plan().sql : statement;
  if (std::string reason = NoPlanReason(sql); !reason.empty()) {
    return done(StatementPlanResult{"", std::move(reason)});
  }
  if (req.plan().error) {
    return done(StatementPlanResult{"", "no plan: the statement failed before it ran"});
  }
  // Trino's EXPLAIN: SQLite's EXPLAIN QUERY PLAN of the statement, prepared (never stepped)
  // on an executor's read-only connection, drawn as indented text.
  ctx.statement = std::make_shared<const std::string>("EXPLAIN " + sql);
  ctx.sql = nullptr;
  ctx.parameters = execute ? req.plan().parameters : std::vector<SqlParameter>{};
  ctx.describe_output = false;
  ctx.user = req.user();
  ctx.sees_all_queries = req.session().sees_all_queries;
  if (ctx.exec_time_limit_ms <= 0 || ctx.exec_time_limit_ms > kExplainTimeLimitMs) {
    ctx.exec_time_limit_ms = kExplainTimeLimitMs;
  }
  QueryStateHandle exec;
  Status s = exec_mgr->CreateQueryState(GenerateQueryId(), std::move(ctx), &exec);
  if (!s.ok()) return done(StatementPlanResult{"", "no plan: " + s.message()});
  auto explain = std::make_shared<Explain>();
  explain->done = std::move(done);
  QueryStateHandle for_engine = exec.Clone();
  {
    MutexLock l(&explain->lock);
    explain->exec = std::move(exec);
  }
  for_engine->result_buffer()->SetOnChange([explain] { OnChange(explain); });
  for_engine->set_exec_state(QueryState::ExecState::kQueued);
  engine->Execute(std::move(for_engine));
}

}  // namespace qr
