// Integration tests of prepared statements and session statements through HTTP against an
// in-process CoordinatorServer (docs/protocol.md, "Prepared statements and parameters" and
// "Sessions"): the request and response headers, values bound rather than pasted, the
// session's time limit. The planning itself: session-statements-test.cc.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class ProtocolSessionTest : public DefaultServerTest {
 protected:
  /// Runs 'sql' with 'o'; returns the POST's response (its headers) and fills '*result'.
  TestResponse Run(const std::string& sql, const StatementOptions& o, StatementResult* result) {
    StatementClient client(port_, o);
    TestResponse post = client.Submit(sql);
    while (!client.done() && client.result().failure.empty()) client.Advance();
    *result = client.result();
    return post;
  }
};

TEST_F(ProtocolSessionTest, PrepareAnswersTheStatementInAHeaderOfThePost) {
  StatementResult r;
  TestResponse post =
      Run("PREPARE st FROM SELECT n_name FROM nation WHERE n_nationkey = ?", {}, &r);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(post.Header("X-Trino-Added-Prepare"),
            "st=SELECT%20n_name%20FROM%20nation%20WHERE%20n_nationkey%20%3D%20%3F");
}

TEST_F(ProtocolSessionTest, APrestoClientGetsTheSessionHeadersOfItsFamily) {
  // presto-python-client reads X-Presto-Added-Prepare only: answered X-Trino-*, its
  // cursor.execute(sql, params) failed with "prepared statement not found".
  StatementOptions presto;
  presto.header_prefix = "X-Presto-";
  StatementResult r;
  TestResponse post = Run("PREPARE st FROM SELECT ?", presto, &r);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(post.Header("X-Presto-Added-Prepare"), "st=SELECT%20%3F");
  EXPECT_EQ(post.Header("X-Trino-Added-Prepare"), "");
  post = Run("SET SESSION query_max_run_time = '1h'", presto, &r);
  EXPECT_EQ(post.Header("X-Presto-Set-Session"), "query_max_run_time=1h");
  EXPECT_EQ(post.Header("X-Trino-Set-Session"), "");
  // A request with headers of both families is a Trino client's.
  StatementOptions both = presto;
  both.post_headers = {{"X-Trino-Source", "mixed"}};
  post = Run("PREPARE st FROM SELECT ?", both, &r);
  EXPECT_EQ(post.Header("X-Trino-Added-Prepare"), "st=SELECT%20%3F");
  EXPECT_EQ(post.Header("X-Presto-Added-Prepare"), "");
}

TEST_F(ProtocolSessionTest, ExecuteRunsThePreparedStatementFromTheHeader) {
  const StatementResult expected =
      RunStatement(port_, "SELECT n_name FROM nation WHERE n_nationkey = 3");
  ASSERT_EQ(expected.rows.size(), 1u);
  for (const std::string& prefix : std::vector<std::string>{"X-Trino-", "X-Presto-"}) {
    StatementOptions o;
    o.header_prefix = prefix;
    // As the Python client encodes it: name=quote_plus(sql), several joined by commas.
    o.post_headers = {{prefix + "Prepared-Statement",
                       "other=SELECT+1,st=SELECT+n_name+FROM+nation+WHERE+n_nationkey+%3D+%3F"}};
    StatementResult r;
    Run("EXECUTE st USING 3", o, &r);
    ASSERT_TRUE(r.failure.empty()) << prefix << ": " << r.failure;
    EXPECT_EQ(r.final_state, "FINISHED") << r.error.dump();
    EXPECT_EQ(r.rows, expected.rows) << prefix;
  }
  StatementResult missing;
  Run("EXECUTE st USING 3", {}, &missing);
  EXPECT_EQ(missing.error_name(), "NOT_FOUND");
}

TEST_F(ProtocolSessionTest, AnErrorInAPreparedStatementHasNoLocationInTheExecute) {
  // The location SQLite gives points into the prepared SQL, not into "EXECUTE st": the Trino
  // CLI showed line 3 of a one-line statement (and failed on it).
  const std::string sql = "SELECT 1,\n  2 FROM\n  nation WHER x = 1";
  StatementResult direct;
  Run(sql, {}, &direct);
  ASSERT_TRUE(direct.error.contains("errorLocation")) << direct.error.dump();
  StatementOptions o;
  o.post_headers = {{"X-Trino-Prepared-Statement",
                     "st=SELECT+1%2C%0A++2+FROM%0A++nation+WHER+x+%3D+1"}};
  StatementResult r;
  Run("EXECUTE st", o, &r);
  EXPECT_EQ(r.error_name(), "SYNTAX_ERROR") << r.error.dump();
  EXPECT_FALSE(r.error.contains("errorLocation")) << r.error.dump();
}

TEST_F(ProtocolSessionTest, AnInjectionAttemptInAParameterStaysAValue) {
  StatementResult count = RunStatement(
      port_, "EXECUTE IMMEDIATE 'SELECT count(*) FROM nation WHERE n_name = ?' "
             "USING 'x'' OR 1=1 --'");
  ASSERT_TRUE(count.failure.empty()) << count.failure;
  EXPECT_EQ(count.rows, std::vector<json>{json::array({0})});
  StatementResult echo =
      RunStatement(port_, "EXECUTE IMMEDIATE 'SELECT ?' USING 'x'' OR 1=1 --'");
  EXPECT_EQ(echo.rows, std::vector<json>{json::array({"x' OR 1=1 --"})});
}

TEST_F(ProtocolSessionTest, DescribeInputAndOutputOfAPreparedStatement) {
  StatementOptions o;
  // SELECT n_name, n_nationkey + 1 AS k FROM nation WHERE n_regionkey = ? AND n_name <> ?
  o.post_headers = {{"X-Trino-Prepared-Statement",
                     "st=SELECT+n_name%2C+n_nationkey+%2B+1+AS+k+FROM+nation+WHERE+"
                     "n_regionkey+%3D+%3F+AND+n_name+%3C%3E+%3F"}};
  StatementResult input;
  Run("DESCRIBE INPUT st", o, &input);
  ASSERT_TRUE(input.failure.empty()) << input.failure;
  EXPECT_EQ(input.columns[0]["name"], "Position");
  EXPECT_EQ(input.rows, (std::vector<json>{json::array({0, "unknown"}),
                                           json::array({1, "unknown"})}));
  StatementResult output;
  Run("DESCRIBE OUTPUT st", o, &output);
  ASSERT_TRUE(output.failure.empty()) << output.failure;
  EXPECT_EQ(output.final_state, "FINISHED") << output.error.dump();
  ASSERT_EQ(output.columns.size(), 7u);
  EXPECT_EQ(output.columns[0]["name"], "Column Name");
  EXPECT_EQ(output.rows,
            (std::vector<json>{json::array({"n_name", "", "main", "nation", "varchar", 0, 0}),
                               json::array({"k", "", nullptr, nullptr, "unknown", 0, 1})}));
  StatementResult broken;
  o.post_headers = {{"X-Trino-Prepared-Statement", "bad=SELECT+nope+FROM+nation"}};
  Run("DESCRIBE OUTPUT bad", o, &broken);
  EXPECT_EQ(broken.error_name(), "COLUMN_NOT_FOUND");
}

TEST_F(ProtocolSessionTest, SessionStatementsAnswerWithTheirHeaders) {
  StatementResult r;
  EXPECT_EQ(Run("USE sqlite.main", {}, &r).Header("X-Trino-Set-Catalog"), "sqlite");
  EXPECT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(Run("SET SESSION query_max_run_time = '5m'", {}, &r).Header("X-Trino-Set-Session"),
            "query_max_run_time=5m");
  EXPECT_EQ(Run("RESET SESSION query_max_run_time", {}, &r).Header("X-Trino-Clear-Session"),
            "query_max_run_time");
  StatementOptions o;
  o.post_headers = {{"X-Trino-Prepared-Statement", "st=SELECT+1"}};
  EXPECT_EQ(Run("DEALLOCATE PREPARE st", o, &r).Header("X-Trino-Deallocated-Prepare"), "st");
  // A failed session statement changes nothing.
  TestResponse refused = Run("SET SESSION no_such_property = '1'", {}, &r);
  EXPECT_EQ(r.error_name(), "INVALID_SESSION_PROPERTY");
  EXPECT_FALSE(refused.HasHeader("X-Trino-Set-Session"));
}

TEST_F(ProtocolSessionTest, ShowSessionListsThePropertiesWithTheSessionsValues) {
  StatementOptions o;
  o.post_headers = {{"X-Trino-Session", "query_max_run_time=5m,other_client_property=x"}};
  StatementResult r;
  TestResponse post = Run("SHOW SESSION", o, &r);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.final_state, "FINISHED") << r.error.dump();
  EXPECT_FALSE(post.HasHeader("X-Trino-Set-Session"));
  ASSERT_EQ(r.columns.size(), 5u);
  EXPECT_EQ(r.columns[0]["name"], "Name");
  EXPECT_EQ(r.columns[4]["name"], "Description");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0][0], "query_max_execution_time");
  EXPECT_EQ(r.rows[0][1], "");
  EXPECT_EQ(r.rows[1][0], "query_max_run_time");
  EXPECT_EQ(r.rows[1][1], "5m");
  EXPECT_EQ(r.rows[1][3], "varchar");
  Run("SHOW SESSION LIKE '%run%';", o, &r);
  ASSERT_EQ(r.rows.size(), 1u) << r.error.dump();
  EXPECT_EQ(r.rows[0][0], "query_max_run_time");
  Run("SHOW SESSION LIKE 'query\\_max\\_e%' ESCAPE '\\'", o, &r);
  ASSERT_EQ(r.rows.size(), 1u) << r.error.dump();
  EXPECT_EQ(r.rows[0][0], "query_max_execution_time");
  // A value that is not text stays a value: quoted, never pasted into the SQL.
  o.post_headers = {{"X-Trino-Session", "query_max_run_time=1m%27)%3B--"}};
  Run("SHOW SESSION", o, &r);
  EXPECT_EQ(r.error_name(), "INVALID_SESSION_PROPERTY");
  Run("SHOW SESSION LIKE", {}, &r);
  EXPECT_EQ(r.error_name(), "SYNTAX_ERROR");
}

TEST_F(ProtocolSessionTest, SessionValuesDecodeAndParseAsTrinosDo) {
  // The JDBC driver encodes values with URLEncoder ('+' for a space), and Trino parses
  // durations with Airlift's Duration. A value SET SESSION accepted (' 30s') came back from
  // JDBC as '+30s' and failed every later statement of the connection.
  for (const char* value : {"+30s", "%2030s", "30+s", "2d", "1.5h", "+1.5+h+"}) {
    StatementOptions o;
    o.post_headers = {{"X-Trino-Session", std::string("query_max_run_time=") + value}};
    StatementResult r;
    Run("SELECT 1", o, &r);
    EXPECT_EQ(r.final_state, "FINISHED") << value << ": " << r.error.dump();
  }
  for (const char* value : {"1e3s", "-1s", ".5s", "1.s", "30", "s", "1%2Bs"}) {
    StatementOptions o;
    o.post_headers = {{"X-Trino-Session", std::string("query_max_run_time=") + value}};
    StatementResult r;
    Run("SELECT 1", o, &r);
    EXPECT_EQ(r.error_name(), "INVALID_SESSION_PROPERTY") << value;
  }
  StatementResult r;
  TestResponse post = Run("SET SESSION query_max_run_time = ' 2 d '", {}, &r);
  EXPECT_EQ(r.final_state, "FINISHED") << r.error.dump();
  EXPECT_EQ(post.Header("X-Trino-Set-Session"), "query_max_run_time=%202%20d%20");
}

TEST_F(ProtocolSessionTest, TheSessionsTimeLimitEndsAQuery) {
  StatementOptions o;
  o.post_headers = {{"X-Trino-Session", "query_max_execution_time=200ms"}};
  StatementResult r;
  Run(kEndlessQuery, o, &r);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.error_name(), "EXCEEDED_TIME_LIMIT");
}

}  // namespace
}  // namespace qr::testing
