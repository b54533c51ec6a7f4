// Integration tests of failed statements and of cancel in the Trino client protocol
// (docs/protocol.md, "Errors" and "Cancel"), through HTTP against an in-process CoordinatorServer.

#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class ProtocolErrorsTest : public DefaultServerTest {};

/// Checks the error object of a FAILED answer: every field docs/protocol.md requires, with the
/// expected name and code, and an errorLocation (if any) inside 'sql'.
void ExpectError(const StatementResult& r, const std::string& sql, const std::string& name,
                 int code, const std::string& type) {
  SCOPED_TRACE(sql);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.post_status, 200);
  EXPECT_EQ(r.final_state, "FAILED");
  ASSERT_TRUE(r.error.is_object());
  const json& e = r.error;
  EXPECT_EQ(e["errorName"], name) << e.dump();
  EXPECT_EQ(e["errorCode"], code);
  EXPECT_EQ(e["errorType"], type);
  ASSERT_TRUE(e["message"].is_string());
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  ASSERT_TRUE(e["failureInfo"].is_object());
  EXPECT_TRUE(e["failureInfo"]["type"].is_string());
  EXPECT_EQ(e["failureInfo"]["message"], e["message"]);
  EXPECT_EQ(e["failureInfo"]["suppressed"], json::array());
  EXPECT_EQ(e["failureInfo"]["stack"], json::array());
  if (e.contains("errorLocation")) {
    // 1-based line and column, inside the statement text (columns count characters).
    int line = e["errorLocation"]["lineNumber"];
    int column = e["errorLocation"]["columnNumber"];
    std::vector<std::u32string::size_type> line_lengths{0};
    for (size_t i = 0; i < sql.size(); ++i) {
      if (sql[i] == '\n') {
        line_lengths.push_back(0);
      } else if ((static_cast<unsigned char>(sql[i]) & 0xC0) != 0x80 && sql[i] != '\r') {
        ++line_lengths.back();
      }
    }
    ASSERT_GE(line, 1);
    ASSERT_LE(line, static_cast<int>(line_lengths.size())) << e.dump();
    EXPECT_GE(column, 1);
    EXPECT_LE(column, static_cast<int>(line_lengths[line - 1])) << e.dump();
  }
}

TEST_F(ProtocolErrorsTest, SyntaxErrorsCarryALocationInsideTheStatement) {
  const std::vector<std::string> statements = {
      "SELEC 1",
      "SELECT * FROM nation WHERE",
      "SELECT * FROM nation WHERE\n\n",
      "SELECT (",
      "SELECT 'unterminated",
      "SELECT 1,\n  2 FROM\n  nation WHER x = 1",
      "\n\nSELECT * FROM nation WHERE -- dangling",
      "SELECT '\xc3\xa9\xc3\xa9', 1 FROM nation WHERE )",
      "SELECT 1\r\nFROM nation WHERE",
  };
  for (const std::string& sql : statements) {
    StatementResult r = RunStatement(port_, sql);
    ExpectError(r, sql, "SYNTAX_ERROR", 1, "USER_ERROR");
    EXPECT_TRUE(r.error.contains("errorLocation")) << sql << ": " << r.error.dump();
  }
  // The location points at the offending token.
  StatementResult r = RunStatement(port_, "SELECT 1,\n  2 FROM\n  nation WHER x = 1");
  ASSERT_TRUE(r.error.contains("errorLocation"));
  EXPECT_EQ(r.error["errorLocation"]["lineNumber"], 3);
  EXPECT_EQ(r.error["errorLocation"]["columnNumber"], 15);
}

TEST_F(ProtocolErrorsTest, UnknownTableAndColumn) {
  for (const std::string& sql :
       std::vector<std::string>{"SELECT * FROM no_such_table", "SELECT 1 FROM nation, nosuch"}) {
    ExpectError(RunStatement(port_, sql), sql, "TABLE_NOT_FOUND", 46, "USER_ERROR");
  }
  for (const std::string& sql : std::vector<std::string>{
           "SELECT no_such_column FROM nation", "SELECT n_name FROM nation WHERE n_bogus = 1"}) {
    ExpectError(RunStatement(port_, sql), sql, "COLUMN_NOT_FOUND", 47, "USER_ERROR");
  }
}

TEST_F(ProtocolErrorsTest, WritesArePermissionDenied) {
  for (const std::string& sql : std::vector<std::string>{
           "INSERT INTO nation VALUES (99, 'X', 1, 'y')", "DELETE FROM nation",
        "UPDATE nation SET n_name = 'x'", "CREATE TABLE t (x)", "CREATE TEMP TABLE t (x)",
        "DROP TABLE nation", "ATTACH '/tmp/qr-attach-test.db' AS other",
        "PRAGMA user_version = 3", "SELECT load_extension('libx')"}) {
    ExpectError(RunStatement(port_, sql), sql, "PERMISSION_DENIED", 4, "USER_ERROR");
  }
  // And nothing was written.
  StatementResult r = RunStatement(port_, "SELECT count(*) FROM nation");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], kNationRows);
}

TEST_F(ProtocolErrorsTest, MoreThanOneStatementIsNotSupported) {
  const std::string sql = "SELECT 1; SELECT 2";
  ExpectError(RunStatement(port_, sql), sql, "NOT_SUPPORTED", 13, "USER_ERROR");
}

TEST_F(ProtocolErrorsTest, RuntimeErrorAfterColumnsIsAFailedAnswer) {
  const std::string sql = "SELECT abs(-9223372036854775808)";
  ExpectError(RunStatement(port_, sql), sql, "GENERIC_USER_ERROR", 0, "USER_ERROR");
}

TEST_F(ProtocolErrorsTest, FailedAnswerCanBeFetchedAgainAndHasNoNextUri) {
  StatementClient c(port_);
  StatementResult& r = c.RunToCompletion("SELECT * FROM no_such_table");
  ASSERT_EQ(r.final_state, "FAILED");
  TestResponse again = c.http().Get(TargetOf(c.previous_uri()));
  ASSERT_EQ(again.status, 200);
  json j = again.Json();
  EXPECT_EQ(j["stats"]["state"], "FAILED");
  EXPECT_EQ(j["error"]["errorName"], "TABLE_NOT_FOUND");
  EXPECT_FALSE(j.contains("nextUri"));
  EXPECT_FALSE(j.contains("data"));
}

// ---------------------------------------------------------------------------------------------
// Cancel

void ExpectCanceled(StatementClient& c) {
  ASSERT_FALSE(c.done());
  c.Advance();  // the next GET after the cancel
  StatementResult& r = c.result();
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  EXPECT_TRUE(c.done());
  EXPECT_EQ(r.error_name(), "USER_CANCELED") << r.error.dump();
  EXPECT_EQ(r.error["errorCode"], 3);
  EXPECT_EQ(r.error["errorType"], "USER_ERROR");
  EXPECT_EQ(r.error["message"], "Query was canceled");
}

TEST_F(ProtocolErrorsTest, DeleteOfNextUriCancelsARunningQuery) {
  StatementOptions o;
  o.max_wait = "100ms";
  StatementClient c(port_, o);
  c.Submit(kEndlessQuery);
  c.Advance();
  ASSERT_FALSE(c.done());
  TestResponse d = c.Cancel();
  EXPECT_EQ(d.status, 204);
  EXPECT_TRUE(d.body.empty());
  ExpectCanceled(c);
  // The executor really stopped: the server drains to no live query.
  EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }));
}

TEST_F(ProtocolErrorsTest, DeleteOfAQueuedQueryCancelsIt) {
  StatementClient c(port_);
  c.Submit(kEndlessQuery);  // the POST's nextUri is a "queued" one
  EXPECT_EQ(c.Cancel().status, 204);
  ExpectCanceled(c);
}

TEST_F(ProtocolErrorsTest, DeleteOfAFinishedQueryIs204) {
  StatementClient c(port_);
  StatementResult& r = c.RunToCompletion("SELECT 1");
  ASSERT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(c.Cancel().status, 204);  // DELETE of the last nextUri it was given
  // Still FINISHED for everyone who looks.
  TestResponse again = c.http().Get(TargetOf(c.previous_uri()));
  EXPECT_EQ(again.Json()["stats"]["state"], "FINISHED");
  EXPECT_EQ(c.http().Get("/v1/query/" + r.id).Json()["state"], "FINISHED");
  EXPECT_EQ(c.http().Delete("/v1/query/" + r.id).status, 204);
}

TEST_F(ProtocolErrorsTest, DeleteOfV1QueryCancels) {
  StatementOptions o;
  o.max_wait = "100ms";
  StatementClient c(port_, o);
  c.Submit(kEndlessQuery);
  c.Advance();
  TestResponse d = c.http().Delete("/v1/query/" + c.result().id);
  EXPECT_EQ(d.status, 204);
  ExpectCanceled(c);
  EXPECT_EQ(c.http().Get("/v1/query/" + c.result().id).Json()["state"], "FAILED");
  // Unknown ids are not an error for DELETE either.
  EXPECT_EQ(c.http().Delete("/v1/query/0123456789abcdef:0123456700000000").status, 204);
}

TEST_F(ProtocolErrorsTest, DeleteWithAbsoluteFormTargetCancels) {
  StatementOptions o;
  o.max_wait = "100ms";
  StatementClient c(port_, o);
  c.Submit(kEndlessQuery);
  c.Advance();
  ASSERT_FALSE(c.done());
  // presto-client sends the absolute URL as the request target.
  TestHttpClient raw(port_);
  ASSERT_TRUE(raw.Connect());
  ASSERT_TRUE(raw.SendRaw("DELETE " + c.next_uri() + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                          std::to_string(port_) + "\r\nX-Presto-User: test\r\n\r\n"));
  TestResponse d = raw.ReadResponse();
  EXPECT_EQ(d.status, 204) << d.body;
  ExpectCanceled(c);
}

TEST_F(ProtocolErrorsTest, CancelWakesAParkedLongPoll) {
  StatementClient c(port_);
  c.Submit(kEndlessQuery);
  c.Advance();
  ASSERT_FALSE(c.done());
  const std::string uri = TargetOf(c.next_uri()) + "?maxWait=10s";
  auto start = Clock::now();
  auto poll = std::async(std::launch::async, [&] {
    TestHttpClient http(port_);
    return http.Get(uri);
  });
  // Whether the DELETE lands before or after the GET parks, the GET answers at once.
  TestHttpClient http(port_);
  EXPECT_EQ(http.Delete("/v1/query/" + c.result().id).status, 204);
  TestResponse r = poll.get();
  EXPECT_LT(Clock::now() - start, 8s);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["stats"]["state"], "FAILED");
  EXPECT_EQ(j["error"]["errorName"], "USER_CANCELED");
  EXPECT_FALSE(j.contains("nextUri"));
}

TEST_F(ProtocolErrorsTest, CancelDuringAMultiPageResultStopsIt) {
  StatementClient c(port_);
  c.Submit("SELECT * FROM lineitem");
  int pages = 0;
  while (!c.done() && c.result().data_pages < 2 && pages++ < 200) c.Advance();
  ASSERT_EQ(c.result().data_pages, 2);
  ASSERT_FALSE(c.done());
  EXPECT_EQ(c.Cancel().status, 204);
  ExpectCanceled(c);
  EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }));
}

}  // namespace
}  // namespace qr::testing
