#include "service/session-statements.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "service/client-request-state.h"

namespace qr {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

SessionInfo WithPrepared(std::string name, std::string sql) {
  SessionInfo session;
  session.prepared_statements.emplace_back(std::move(name), std::move(sql));
  return session;
}

TEST(SessionStatementsTest, OrdinaryStatementsRunAsSent) {
  const StatementPlan plan = PlanStatement("SELECT * FROM nation WHERE n = '?'", SessionInfo{});
  EXPECT_FALSE(plan.error);
  EXPECT_EQ(plan.sql, nullptr);
  EXPECT_TRUE(plan.parameters.empty());
  EXPECT_TRUE(plan.response_headers.empty());
  EXPECT_EQ(PlanStatement("DESCRIBE nation", SessionInfo{}).sql, nullptr);
  EXPECT_EQ(PlanStatement("SET x = 1", SessionInfo{}).sql, nullptr);
}

TEST(SessionStatementsTest, PrepareAnswersWithTheEncodedStatement) {
  const StatementPlan plan =
      PlanStatement("PREPARE st_1 FROM SELECT * FROM t WHERE k = ? AND s = 'a b';", {});
  ASSERT_FALSE(plan.error) << plan.error->message;
  ASSERT_NE(plan.sql, nullptr);
  EXPECT_EQ(plan.response_headers,
            (Headers{{"X-Trino-Added-Prepare",
                      "st_1=SELECT%20%2A%20FROM%20t%20WHERE%20k%20%3D%20%3F%20AND%20s%20%3D%20%27a"
                      "%20b%27"}}));
  EXPECT_EQ(PlanStatement("PREPARE st FROM", {}).error->name, "SYNTAX_ERROR");
  // Unquoted names fold to lower case, as Trino's identifiers do.
  EXPECT_EQ(PlanStatement("prepare MyStmt from select 1", {}).response_headers[0].second,
            "mystmt=select%201");
}

// The client sends every prepared statement of its session with each request: a PREPARE that
// would push those requests past the server's limits (400 beyond --max_session_properties,
// 431 beyond --max_header_bytes) fails itself, instead of every later request, the DEALLOCATE
// that would undo it included.
TEST(SessionStatementsTest, APrepareThatWouldNotFitTheClientsNextRequestsFails) {
  SessionInfo full;
  full.max_prepared_statements = 2;
  full.prepared_statements = {{"a", "SELECT 1"}, {"b", "SELECT 2"}};
  std::optional<QueryError> e = PlanStatement("PREPARE c FROM SELECT 3", full).error;
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "GENERIC_USER_ERROR");
  EXPECT_NE(e->message.find("--max_session_properties"), std::string::npos) << e->message;
  // Replacing one of them adds none.
  EXPECT_FALSE(PlanStatement("PREPARE b FROM SELECT 3", full).error);

  SessionInfo tight;
  tight.header_bytes_left = 20;  // "st=SELECT+%3F," is 14 bytes as a client encodes it
  EXPECT_FALSE(PlanStatement("PREPARE st FROM SELECT ?", tight).error);
  e = PlanStatement("PREPARE st FROM SELECT ? FROM nation", tight).error;
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("--max_header_bytes"), std::string::npos) << e->message;
  // What a replaced statement took is room again.
  tight.prepared_statements = {{"st", "SELECT 1 FROM nation, region"}};
  EXPECT_FALSE(PlanStatement("PREPARE st FROM SELECT ? FROM nation", tight).error);
}

TEST(SessionStatementsTest, ExecuteRunsThePreparedStatementWithBoundParameters) {
  const StatementPlan plan = PlanStatement(
      "EXECUTE st USING 3, 'x'' OR 1=1 --'", WithPrepared("st", "SELECT ? , ?"));
  ASSERT_FALSE(plan.error) << plan.error->message;
  ASSERT_NE(plan.sql, nullptr);
  EXPECT_EQ(*plan.sql, "SELECT ? , ?");  // the parameter never enters the SQL text
  ASSERT_EQ(plan.parameters.size(), 2u);
  EXPECT_EQ(plan.parameters[0].integer, 3);
  EXPECT_EQ(plan.parameters[1].bytes, "x' OR 1=1 --");
  EXPECT_TRUE(plan.response_headers.empty());

  const StatementPlan no_params = PlanStatement("EXECUTE st", WithPrepared("st", "SELECT 1"));
  EXPECT_FALSE(no_params.error);
  EXPECT_EQ(*no_params.sql, "SELECT 1");

  const StatementPlan missing = PlanStatement("EXECUTE other USING 1", WithPrepared("st", "x"));
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->name, "NOT_FOUND");
  EXPECT_NE(missing.error->message.find("other"), std::string::npos);
  EXPECT_EQ(PlanStatement("EXECUTE st USING ARRAY[1]", WithPrepared("st", "SELECT ?")).error->name,
            "NOT_SUPPORTED");
  EXPECT_EQ(PlanStatement("EXECUTE st 1", WithPrepared("st", "SELECT ?")).error->name,
            "SYNTAX_ERROR");
}

TEST(SessionStatementsTest, ExecuteImmediateUnquotesTheStatement) {
  const StatementPlan plan =
      PlanStatement("EXECUTE IMMEDIATE 'SELECT * FROM t WHERE s = ''a'' AND k = ?' USING 3", {});
  ASSERT_FALSE(plan.error) << plan.error->message;
  EXPECT_EQ(*plan.sql, "SELECT * FROM t WHERE s = 'a' AND k = ?");
  ASSERT_EQ(plan.parameters.size(), 1u);
  EXPECT_EQ(plan.parameters[0].integer, 3);
  // The Python client's probe.
  const StatementPlan probe = PlanStatement("EXECUTE IMMEDIATE 'SELECT 1'", {});
  EXPECT_FALSE(probe.error);
  EXPECT_EQ(*probe.sql, "SELECT 1");
  EXPECT_EQ(PlanStatement("EXECUTE IMMEDIATE SELECT 1", {}).error->name, "SYNTAX_ERROR");
}

TEST(SessionStatementsTest, DeallocateNamesTheStatement) {
  const StatementPlan plan = PlanStatement("DEALLOCATE PREPARE st", WithPrepared("st", "x"));
  ASSERT_FALSE(plan.error);
  EXPECT_EQ(plan.response_headers, (Headers{{"X-Trino-Deallocated-Prepare", "st"}}));
  EXPECT_EQ(PlanStatement("DEALLOCATE PREPARE st", {}).error->name, "NOT_FOUND");
}

TEST(SessionStatementsTest, DescribeInputListsOneRowPerPlaceholderOutputDescribesColumns) {
  const StatementPlan plan = PlanStatement(
      "DESCRIBE INPUT st", WithPrepared("st", "SELECT '?', \"?\" FROM t WHERE a = ? -- ?\n"
                                              "AND b = ? /* ? */"));
  ASSERT_FALSE(plan.error);
  EXPECT_EQ(*plan.sql,
            "SELECT column1 AS \"Position\", column2 AS \"Type\" FROM (VALUES (0,'unknown'),"
            "(1,'unknown'))");
  const StatementPlan output = PlanStatement("DESCRIBE OUTPUT st", WithPrepared("st", "x"));
  ASSERT_FALSE(output.error);
  EXPECT_TRUE(output.describe_output);
  EXPECT_EQ(*output.sql, "x");
  EXPECT_EQ(PlanStatement("DESCRIBE OUTPUT st", {}).error->name, "NOT_FOUND");
  EXPECT_EQ(CountPlaceholders("SELECT 'it''s ?', ?"), 1);
}

TEST(SessionStatementsTest, UseSetsCatalogAndSchema) {
  EXPECT_EQ(PlanStatement("USE main", {}).response_headers,
            (Headers{{"X-Trino-Set-Schema", "main"}}));
  EXPECT_EQ(PlanStatement("USE sqlite.main", {}).response_headers,
            (Headers{{"X-Trino-Set-Catalog", "sqlite"}, {"X-Trino-Set-Schema", "main"}}));
  const StatementPlan missing = PlanStatement("USE tpch.sf1", {});
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->name, "SCHEMA_NOT_FOUND");
  EXPECT_EQ(PlanStatement("USE", {}).error->name, "SYNTAX_ERROR");
}

TEST(SessionStatementsTest, SetAndResetSessionAreValidated) {
  const StatementPlan set =
      PlanStatement("SET SESSION query_max_execution_time = '1.5m'", {});
  ASSERT_FALSE(set.error) << set.error->message;
  EXPECT_EQ(set.response_headers,
            (Headers{{"X-Trino-Set-Session", "query_max_execution_time=1.5m"}}));
  const StatementPlan unknown = PlanStatement("SET SESSION join_distribution_type = 'x'", {});
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->name, "INVALID_SESSION_PROPERTY");
  EXPECT_NE(unknown.error->message.find("query_max_execution_time"), std::string::npos);
  EXPECT_EQ(PlanStatement("SET SESSION query_max_run_time = 'soon'", {}).error->name,
            "INVALID_SESSION_PROPERTY");
  EXPECT_EQ(PlanStatement("SET SESSION query_max_run_time = '0s'", {}).error->name,
            "INVALID_SESSION_PROPERTY");
  EXPECT_EQ(PlanStatement("RESET SESSION query_max_run_time", {}).response_headers,
            (Headers{{"X-Trino-Clear-Session", "query_max_run_time"}}));
  EXPECT_EQ(PlanStatement("RESET SESSION hive.foo", {}).error->name, "INVALID_SESSION_PROPERTY");
}

TEST(SessionStatementsTest, SessionPropertiesLowerTheTimeLimit) {
  SessionInfo session;
  session.properties = {{"query_max_run_time", "2s"},
                        {"query_max_execution_time", "500ms"},
                        {"some_client_property", "kept"}};
  const StatementPlan plan = PlanStatement("SELECT 1", session);
  EXPECT_FALSE(plan.error);
  EXPECT_EQ(plan.exec_time_limit_ms, 500);
  session.properties = {{"query_max_execution_time", "forever"}};
  EXPECT_EQ(PlanStatement("SELECT 1", session).error->name, "INVALID_SESSION_PROPERTY");
}

TEST(SessionStatementsTest, TransactionsAreNotSupported) {
  for (const char* sql : {"START TRANSACTION", "start transaction read only", "COMMIT",
                          "ROLLBACK"}) {
    const StatementPlan plan = PlanStatement(sql, {});
    ASSERT_TRUE(plan.error) << sql;
    EXPECT_EQ(plan.error->name, "NOT_SUPPORTED") << sql;
  }
}

TEST(SessionStatementsTest, SessionStatementsHaveTrinosUpdateTypeAndQueriesNone) {
  const SessionInfo session = WithPrepared("st", "SELECT 1");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"PREPARE x FROM SELECT 1", "PREPARE"},
      {"DEALLOCATE PREPARE st", "DEALLOCATE"},
      {"USE main", "USE"},
      {"SET SESSION query_max_execution_time = '10s'", "SET SESSION"},
      {"RESET SESSION query_max_execution_time", "RESET SESSION"},
      {"CALL system.runtime.kill_query(query_id => '20260101_000000_00000_abcde')", "CALL"},
  };
  for (const auto& [sql, type] : cases) {
    const StatementPlan plan = PlanStatement(sql, session);
    ASSERT_FALSE(plan.error) << sql << ": " << plan.error->message;
    ASSERT_NE(plan.update_type, nullptr) << sql;
    EXPECT_EQ(std::string(plan.update_type), type) << sql;
  }
  // Queries, EXECUTE (it runs a query) and DESCRIBE answer rows: no update type.
  for (const char* sql : {"SELECT 1", "EXECUTE st", "DESCRIBE OUTPUT st", "DESCRIBE nation"}) {
    EXPECT_EQ(PlanStatement(sql, session).update_type, nullptr) << sql;
  }
}

}  // namespace
}  // namespace qr
