// The coordinator's limits and lifecycle seen through the protocol: execution time limit,
// admission (queueing and QUERY_QUEUE_FULL), abandoned queries, and graceful shutdown.

#include <future>
#include <string>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class CoordinatorLimitsTest : public ServiceTest {
 protected:
  void Start(CoordinatorServer::Options o) {
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }

  /// The state /v1/query/{id} reports ("" if it does not answer 200).
  std::string QueryState(const std::string& id) {
    TestHttpClient http(port_, 10s);
    TestResponse r = http.Get("/v1/query/" + id);
    return r.status == 200 ? r.Json().value("state", "") : "";
  }

  /// Submits `SELECT * FROM lineitem` with `c`, fetches up to the first data page, waits
  /// until the executor, blocked on this client that does not fetch, has ended, and fetches
  /// the next answer: the query's failure, if a limit ended it.
  void RunToDataThenWaitForExecutionEnd(StatementClient* c) {
    c->Submit("SELECT * FROM lineitem");
    c->AdvanceToData();
    ASSERT_FALSE(c->done());
    UniqueId id;
    ASSERT_TRUE(ParseId(c->result().id, &id).ok());
    ClientRequestStatePtr req = server_->coordinator()->Find(id);
    ASSERT_NE(req, nullptr);
    EXPECT_TRUE(WaitFor([&] { return req->execution_done(); }, 60s));
    c->Advance();  // the buffered pages were dropped: the next answer is the failure
    EXPECT_TRUE(c->done());
  }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

void ExpectFailedWith(const StatementResult& r, const std::string& name, int code,
                      const std::string& type) {
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.post_status, 200);
  EXPECT_EQ(r.final_state, "FAILED");
  EXPECT_EQ(r.error_name(), name) << r.error.dump();
  EXPECT_EQ(r.error.value("errorCode", -1), code);
  EXPECT_EQ(r.error.value("errorType", ""), type);
  EXPECT_TRUE(r.error.contains("failureInfo"));
}

TEST_F(CoordinatorLimitsTest, ExecutionTimeLimitFailsWithExceededTimeLimit) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.exec_time_limit_ms = 300;
  Start(o);
  auto start = Clock::now();
  StatementResult r = RunStatement(port_, kEndlessQuery);
  ExpectFailedWith(r, "EXCEEDED_TIME_LIMIT", 131075, "INSUFFICIENT_RESOURCES");
  EXPECT_GE(Clock::now() - start, 250ms);
  // Short queries are unaffected.
  StatementResult ok = RunStatement(port_, "SELECT * FROM nation");
  EXPECT_EQ(ok.final_state, "FINISHED");
  EXPECT_EQ(ok.rows.size(), static_cast<size_t>(kNationRows));
}

TEST_F(CoordinatorLimitsTest, TimeLimitAlsoEndsAQueryBlockedOnAClientThatStoppedFetching) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.exec_time_limit_ms = 300;
  // A spool quota far below the result (~10 MB): the executor waits for the client.
  o.query_max_spill_bytes = 256 << 10;
  Start(o);
  StatementClient c(port_);
  // The executor fills the memory buffer and the spool quota and blocks on the client; the
  // coordinator's expiration thread fails it. (A slow executor, e.g. under TSan, may instead
  // still be stepping SQLite at the limit: then the engine's own check fails it. Same answer.)
  RunToDataThenWaitForExecutionEnd(&c);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(c.result().failure.empty()) << c.result().failure;
  EXPECT_EQ(c.result().error_name(), "EXCEEDED_TIME_LIMIT");
}

TEST_F(CoordinatorLimitsTest, ASessionsLowerTimeLimitAlsoEndsAQueryBlockedOnItsClient) {
  // No server limit; the session asks for 300 ms. The backstop must apply the session's
  // limit too: the engine's check cannot act while the executor waits for the client.
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.exec_time_limit_ms = 0;
  o.query_max_spill_bytes = 256 << 10;
  Start(o);
  StatementOptions so;
  so.post_headers = {{"X-Trino-Session", "query_max_execution_time=300ms"}};
  StatementClient c(port_, so);
  RunToDataThenWaitForExecutionEnd(&c);
  if (HasFatalFailure()) return;
  EXPECT_EQ(c.result().error_name(), "EXCEEDED_TIME_LIMIT");
  const std::string message = c.result().error.value("message", "");
  // Whichever check came first names the limit of 300 ms.
  EXPECT_TRUE(message.find("300") != std::string::npos) << message;
}

TEST_F(CoordinatorLimitsTest, AQueryWaitingOnAFullSpillQuotaSaysWhichInItsInfo) {
  CoordinatorServer::Options o = DefaultOptions();
  o.query_max_spill_bytes = 256 << 10;
  Start(o);
  StatementClient c(port_);
  c.Submit("SELECT * FROM lineitem");
  c.AdvanceToData();
  ASSERT_FALSE(c.done());
  TestHttpClient http(port_);
  std::string reason;
  EXPECT_TRUE(WaitFor(
      [&] {
        TestResponse info = http.Get("/v1/query/" + c.result().id, c.UserHeaders());
        reason = info.status == 200 ? info.Json().value("blockedReason", "") : "";
        return !reason.empty();
      },
      60s));
  EXPECT_NE(reason.find("--query_max_spill_mb"), std::string::npos) << reason;
  EXPECT_EQ(c.Cancel().status, 204);
}

TEST_F(CoordinatorLimitsTest, ResultsSpoolSoTheExecutorFinishesWithoutTheClient) {
  Start(DefaultOptions());
  StatementClient c(port_);
  c.Submit("SELECT l_orderkey, l_linenumber, l_comment FROM lineitem");
  c.AdvanceToData();
  ASSERT_FALSE(c.done());
  UniqueId id;
  ASSERT_TRUE(ParseId(c.result().id, &id).ok());
  ClientRequestStatePtr req = server_->coordinator()->Find(id);
  ASSERT_NE(req, nullptr);
  // ~6 MB of rows, far more than the 1 MiB buffer: the executor finishes anyway and frees
  // its running slot while the client has read one page.
  EXPECT_TRUE(WaitFor([&] { return req->execution_done(); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().running == 0; }));
  EXPECT_GT(server_->spill_budget()->used_bytes(), 1 << 20) << "the rest is in the spool";
  while (!c.done() && c.result().failure.empty()) c.Advance();
  const StatementResult& r = c.result();
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED");
  ASSERT_EQ(r.rows.size(), static_cast<size_t>(kLineitemRows));
  // In order: the spool hands pages back as they were produced (the table's rowid order).
  for (size_t i = 1; i < r.rows.size(); ++i) {
    const auto prev = std::make_pair(r.rows[i - 1][0].get<int64_t>(), r.rows[i - 1][1].get<int64_t>());
    const auto cur = std::make_pair(r.rows[i][0].get<int64_t>(), r.rows[i][1].get<int64_t>());
    ASSERT_LT(prev, cur) << "row " << i;
  }
  EXPECT_TRUE(WaitFor([&] { return server_->spill_budget()->used_bytes() == 0; }))
      << "the spool's quota is given back once the query is done";
  EXPECT_TRUE(WaitFor([&] { return server_->result_memory()->used_bytes() == 0; }));
}

TEST_F(CoordinatorLimitsTest, AdmissionQueuesThenRejectsWithQueueFull) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.max_running_queries = 1;
  o.coordinator.max_queued_queries = 1;
  Start(o);
  StatementOptions so;
  so.max_wait = "100ms";
  StatementClient running(port_, so), queued(port_, so);
  running.Submit(kEndlessQuery);
  queued.Submit(kEndlessQuery);
  // A third one is over both limits: the POST still answers 200 QUEUED (never 503); the
  // failure comes on the first GET.
  StatementResult full = RunStatement(port_, "SELECT 1", so);
  ExpectFailedWith(full, "QUERY_QUEUE_FULL", 131074, "INSUFFICIENT_RESOURCES");
  EXPECT_EQ(full.states.front(), "QUEUED");

  // The queued one stays QUEUED, with a "queued" nextUri, while the slot is taken.
  TestResponse r = queued.Advance();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(queued.result().final_state, "QUEUED");
  EXPECT_NE(queued.next_uri().find("/v1/statement/queued/"), std::string::npos);
  EXPECT_FALSE(r.Json().contains("data"));

  // Freeing the slot admits it.
  EXPECT_EQ(running.Cancel().status, 204);
  for (int i = 0; i < 200 && queued.result().final_state == "QUEUED"; ++i) queued.Advance();
  EXPECT_EQ(queued.result().final_state, "RUNNING");
  EXPECT_NE(queued.next_uri().find("/v1/statement/executing/"), std::string::npos);
  EXPECT_EQ(queued.Cancel().status, 204);

  // And once both are gone, queries run again.
  StatementResult after = RunStatement(port_, "SELECT 1");
  EXPECT_EQ(after.final_state, "FINISHED");
}

TEST_F(CoordinatorLimitsTest, QueryWhoseClientStopsPollingIsAbandoned) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.idle_query_timeout_ms = 300;
  Start(o);
  StatementClient c(port_);
  c.Submit(kEndlessQuery);
  auto start = Clock::now();
  EXPECT_TRUE(WaitFor([&] { return QueryState(c.result().id) == "FAILED"; }, 60s));
  EXPECT_GE(Clock::now() - start, 250ms);
  c.Advance();
  StatementResult& r = c.result();
  ExpectFailedWith(r, "ABANDONED_QUERY", 2, "USER_ERROR");
  EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }));
}

TEST_F(CoordinatorLimitsTest, ClientThatKeepsPollingIsNotAbandoned) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.idle_query_timeout_ms = 300;
  Start(o);
  // Short polls, then long polls (each parked longer than the idle timeout): a client waiting
  // on a GET is polling.
  for (const char* wait : {"50ms", "1s"}) {
    StatementOptions so;
    so.max_wait = wait;
    StatementClient c(port_, so);
    c.Submit(kEndlessQuery);
    auto until = Clock::now() + 1500ms;
    while (Clock::now() < until && !c.done()) c.Advance();
    EXPECT_FALSE(c.done()) << wait << ": " << c.result().error.dump();
    EXPECT_EQ(c.result().final_state, "RUNNING") << wait;
    EXPECT_EQ(c.Cancel().status, 204);
  }
}

// ---------------------------------------------------------------------------------------------
// Graceful shutdown

/// Every row arrived, then the final answer: the coordinator's shutdown ends once that answer
/// is handed to the webserver, which drains it to the client before it stops (see
/// docs/protocol.md, "Graceful shutdown").
void ExpectAllRowsThenFinished(const StatementResult& r, size_t rows) {
  EXPECT_EQ(r.rows.size(), rows);
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(r.final_state, "FINISHED");
}

class CoordinatorShutdownTest : public CoordinatorLimitsTest {
 protected:
  /// Starts server_->Shutdown('grace') on another thread; returns once the server says so.
  std::future<int> BeginShutdown(std::chrono::milliseconds grace) {
    auto done = std::async(std::launch::async,
                           [this, grace] { return server_->Shutdown(grace.count()); });
    EXPECT_TRUE(WaitFor([&] {
      TestHttpClient http(port_, 10s);
      return http.Get("/v1/info/state").Json() == "SHUTTING_DOWN";
    }));
    return done;
  }
};

TEST_F(CoordinatorShutdownTest, RunningQueryIsCanceledAfterTheGracePeriod) {
  Start(DefaultOptions());
  StatementOptions so;
  so.max_wait = "50ms";
  StatementClient c(port_, so);
  c.Submit(kEndlessQuery);
  c.Advance();
  UniqueId id;
  ASSERT_TRUE(ParseId(c.result().id, &id).ok());
  ClientRequestStatePtr req = server_->coordinator()->Find(id);
  ASSERT_NE(req, nullptr);
  auto start = Clock::now();
  std::future<int> shutdown = BeginShutdown(500ms);
  EXPECT_EQ(shutdown.get(), 1);
  EXPECT_GE(Clock::now() - start, 450ms);
  ClientRequestState::Info info = req->GetInfo();
  EXPECT_EQ(info.state, ClientRequestState::State::kFailed);
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "SERVER_SHUTTING_DOWN");
  EXPECT_EQ(server_->exec_mgr()->num_live(), 0);
}

TEST_F(CoordinatorShutdownTest, ShutdownWhileQueriesExecuteIsClean) {
  // Canceled at shutdown, executors still call back into the coordinator (the result
  // buffer's change callback) until they notice: the coordinator must outlive them. Run
  // under ASan/TSan; repeated to catch an executor that is slow to notice.
  for (int i = 0; i < 10; ++i) {
    Start(DefaultOptions());
    StatementOptions so;
    so.max_wait = "10ms";
    StatementClient a(port_, so), b(port_, so);
    a.Submit(kEndlessQuery);
    // Each step is one long SQLite call: the executor notices a cancel only between steps.
    b.Submit("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
             "SELECT length(hex(zeroblob(1000000))) FROM c");
    a.Advance();
    b.Advance();
    // References that outlive the coordinator, as a parked long poll's has in the daemon.
    std::vector<ClientRequestStatePtr> held = server_->coordinator()->InFlight();
    EXPECT_EQ(held.size(), 2u);
    EXPECT_EQ(server_->Shutdown(0), 2) << "iteration " << i;
    EXPECT_EQ(server_->exec_mgr()->num_live(), 0);
    server_.reset();
  }
}

TEST_F(CoordinatorShutdownTest, NewStatementsFailWhileRunningOnesFinishWithinTheGracePeriod) {
  Start(DefaultOptions());
  // A multi-page query whose client has read only its first page: the executor is blocked on
  // the client, so the query is still running when the shutdown begins.
  StatementClient c(port_);
  c.Submit("SELECT l_orderkey, l_quantity FROM lineitem");
  c.AdvanceToData();
  ASSERT_FALSE(c.done());

  auto start = Clock::now();
  std::future<int> shutdown = BeginShutdown(60s);

  TestHttpClient http(port_, 10s);
  EXPECT_EQ(http.Get("/v1/info/state").Json(), "SHUTTING_DOWN");
  // New statements: POST 200 QUEUED, then FAILED with SERVER_SHUTTING_DOWN.
  StatementResult refused = RunStatement(port_, "SELECT 1");
  ExpectFailedWith(refused, "SERVER_SHUTTING_DOWN", 65545, "INTERNAL_ERROR");
  EXPECT_EQ(refused.states.front(), "QUEUED");

  // The running query finishes for its client: every row is delivered during the grace.
  while (!c.done() && c.result().failure.empty()) c.Advance();
  ExpectAllRowsThenFinished(c.result(), kLineitemRows);

  // Then the shutdown completes early, canceling nothing.
  EXPECT_EQ(shutdown.get(), 0);
  EXPECT_LT(Clock::now() - start, 50s);
}

TEST_F(CoordinatorShutdownTest, QueryThatFinishedExecutingStillDeliversItsRows) {
  // SELECT 1 is done executing at once, but its client has not fetched the row yet.
  Start(DefaultOptions());
  StatementClient c(port_);
  c.Submit("SELECT * FROM nation");
  ASSERT_TRUE(WaitFor([&] {
    auto all = server_->coordinator()->InFlight();
    return all.size() == 1 && all[0]->execution_done();
  }));
  std::future<int> shutdown = BeginShutdown(30s);
  while (!c.done() && c.result().failure.empty()) c.Advance();
  ExpectAllRowsThenFinished(c.result(), kNationRows);
  EXPECT_EQ(shutdown.get(), 0);
}

TEST_F(CoordinatorShutdownTest, QueuedQueriesFailAtShutdown) {
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.max_running_queries = 1;
  Start(o);
  StatementOptions so;
  so.max_wait = "50ms";
  StatementClient running(port_, so), queued(port_, so);
  running.Submit(kEndlessQuery);
  queued.Submit("SELECT 1");
  queued.Advance();
  ASSERT_EQ(queued.result().final_state, "QUEUED");
  std::future<int> shutdown = BeginShutdown(3s);
  queued.Advance();
  EXPECT_EQ(queued.result().final_state, "FAILED");
  EXPECT_EQ(queued.result().error_name(), "SERVER_SHUTTING_DOWN");
  EXPECT_EQ(shutdown.get(), 1);  // the running one, after the grace period
}

}  // namespace
}  // namespace qr::testing
