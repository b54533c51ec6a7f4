// Resource governance seen from outside: every limit a client can run into (in-flight caps,
// fair admission, abandoned queries, session properties, listing size, shutdown of idle
// clients; the budgets are in resource-budgets-test.cc) answers with its Trino error and
// names the flag that sets it; afterwards the server still answers SELECT 1 and its
// registries drain.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "resource-limits-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;
using State = ClientRequestState::State;

// ---------------------------------------------------------------------------------------------
// In-flight caps

TEST_F(ResourceLimitsTest, InFlightCapRefusesWithQueueFullUntilAQueryLeaves) {
  CoordinatorServer::Options o = Options();
  o.coordinator.max_in_flight_queries = 3;
  Start(o);
  // Finished executing but never fetched: they stay in flight, holding their results.
  std::vector<std::unique_ptr<StatementClient>> held;
  for (int i = 0; i < 3; ++i) held.push_back(SubmitUnfetched(port_, "SELECT 1"));
  EXPECT_EQ(server_->coordinator()->registry().Count(), 3u);

  StatementResult refused = RunStatement(port_, "SELECT 1");
  ExpectFailed(refused, "QUERY_QUEUE_FULL", "INSUFFICIENT_RESOURCES", "--max_in_flight_queries");
  EXPECT_EQ(refused.error.value("errorCode", -1), 131074);
  EXPECT_EQ(MessageOf(refused).find("--max_in_flight_queries_per_user"), std::string::npos)
      << MessageOf(refused);
  EXPECT_EQ(refused.states.front(), "QUEUED");

  QueryCoordinator::Metrics m = server_->coordinator()->GetMetrics();
  EXPECT_EQ(m.rejected_in_flight, 1);
  EXPECT_EQ(m.rejected_in_flight_per_user, 0);
  EXPECT_EQ(Metric("qr_limit{flag=\"max_in_flight_queries\"}"), 3);
  EXPECT_EQ(Metric("qr_queries_rejected_total{limit=\"max_in_flight_queries\"}"), 1);
  EXPECT_EQ(Metric("qr_queries_rejected_total{limit=\"max_in_flight_queries_per_user\"}"), 0);
  EXPECT_EQ(Metric("qr_queries_in_flight"), 3);

  // One leaves: the next one is accepted and runs.
  EXPECT_EQ(held[0]->Cancel().status, 204);
  ASSERT_TRUE(WaitFor(
      [&] { return server_->coordinator()->registry().Count() == 2; }, kDeadline));
  ExpectServes();
  EXPECT_EQ(server_->coordinator()->GetMetrics().rejected_in_flight, 1);

  for (size_t i = 1; i < held.size(); ++i) EXPECT_EQ(held[i]->Cancel().status, 204);
  ExpectDrained();
  ExpectServes();
}

TEST_F(ResourceLimitsTest, PerUserInFlightCapRefusesOnlyThatUser) {
  CoordinatorServer::Options o = Options();
  o.coordinator.max_in_flight_queries_per_user = 2;
  Start(o);
  std::vector<std::unique_ptr<StatementClient>> held;
  for (int i = 0; i < 2; ++i) held.push_back(SubmitUnfetched(port_, "SELECT 1", "alice"));

  StatementOptions alice;
  alice.user = "alice";
  StatementResult refused = RunStatement(port_, "SELECT 1", alice);
  ExpectFailed(refused, "QUERY_QUEUE_FULL", "INSUFFICIENT_RESOURCES",
               "--max_in_flight_queries_per_user");
  EXPECT_EQ(refused.error.value("errorCode", -1), 131074);

  StatementOptions bob;
  bob.user = "bob";
  StatementResult other = RunStatement(port_, "SELECT 1", bob);
  EXPECT_EQ(other.final_state, "FINISHED") << other.error.dump();
  EXPECT_EQ(other.rows.size(), 1u);

  QueryCoordinator::Metrics m = server_->coordinator()->GetMetrics();
  EXPECT_EQ(m.rejected_in_flight_per_user, 1);
  EXPECT_EQ(m.rejected_in_flight, 0);
  EXPECT_EQ(Metric("qr_queries_rejected_total{limit=\"max_in_flight_queries_per_user\"}"), 1);
  EXPECT_EQ(Metric("qr_limit{flag=\"max_in_flight_queries_per_user\"}"), 2);
  // Bob's query is done; only alice has queries in flight once its slot is released.
  EXPECT_TRUE(WaitFor(
      [&] { return server_->coordinator()->GetMetrics().users_in_flight == 1; }, kDeadline));

  // Once alice's queries leave, alice is accepted again.
  for (auto& c : held) EXPECT_EQ(c->Cancel().status, 204);
  ExpectDrained();
  StatementResult again = RunStatement(port_, "SELECT 1", alice);
  EXPECT_EQ(again.final_state, "FINISHED") << again.error.dump();
  ExpectServes();
  ExpectDrained();
}

// ---------------------------------------------------------------------------------------------
// Fair admission

TEST_F(ResourceLimitsTest, QueuedQueryOfAnotherUserRunsBeforeTheBackloggedUsersNextQuery) {
  CoordinatorServer::Options o = Options();
  o.coordinator.max_running_queries = 1;
  Start(o);
  QueryCoordinator* coord = server_->coordinator();
  auto submit = [&](const std::string& user) {
    SessionInfo s;
    s.user = user;
    return coord->Submit(std::make_shared<const std::string>(kEndlessQuery), s);
  };
  // "Started" is when the executor took it: ClientRequestState::state() turns RUNNING only
  // when a client fetches, and nobody fetches here.
  auto started = [](const ClientRequestStatePtr& r) {
    return r->exec_elapsed_ms() >= 0;
  };
  std::vector<ClientRequestStatePtr> a;
  for (int i = 0; i < 5; ++i) a.push_back(submit("alice"));
  ASSERT_TRUE(WaitFor([&] { return started(a[0]); }, kDeadline));
  // Bob's query holds the slot until canceled too, so the order of admission shows in the
  // states alone: whichever of bob's and alice's second query starts first keeps the slot.
  auto b = submit("bob");
  EXPECT_EQ(coord->GetMetrics().queued, 5);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_FALSE(started(a[i])) << i;
  EXPECT_FALSE(started(b));

  ASSERT_TRUE(coord->Cancel(a[0]->query_id()).ok());
  ASSERT_TRUE(WaitFor([&] { return started(b) || started(a[1]); }, kDeadline));
  EXPECT_TRUE(started(b)) << "bob's query must get the first free slot";
  EXPECT_FALSE(started(a[1])) << "alice's backlog went first";
  EXPECT_FALSE(ClientRequestState::IsTerminal(b->state()));

  // Then alice's backlog runs in her order.
  ASSERT_TRUE(coord->Cancel(b->query_id()).ok());
  ASSERT_TRUE(coord->Cancel(a[1]->query_id()).ok());  // whichever runs now
  ASSERT_TRUE(WaitFor([&] { return started(a[2]); }, kDeadline));
  EXPECT_FALSE(started(a[3]));
  EXPECT_FALSE(started(a[4]));

  for (auto& r : a) ASSERT_TRUE(coord->Cancel(r->query_id()).ok());
  for (auto& r : a) EXPECT_TRUE(WaitTerminal(r));
  EXPECT_TRUE(WaitFor([&] { return coord->GetMetrics().running == 0; }, kDeadline));
  ExpectDrained();
  ExpectServes();
}

// ---------------------------------------------------------------------------------------------
// Abandoned queries

TEST_F(ResourceLimitsTest, QueryNeverFetchedIsAbandonedButOneFetchedOnceIsNot) {
  CoordinatorServer::Options o = Options();
  o.coordinator.abandoned_query_timeout_ms = 200;
  o.coordinator.expiration_interval_ms = kManualExpirationMs;
  Start(o);
  StatementOptions so;
  so.max_wait = "10ms";
  std::unique_ptr<StatementClient> fetched_client = SubmitAndFetchOnce(port_, so);
  ASSERT_NE(fetched_client, nullptr);
  StatementClient& fetched = *fetched_client;
  const int64_t abandoned_before = server_->coordinator()->GetMetrics().abandoned;
  // Submitted after the other's fetch: once this one is past the timeout, the fetched one
  // has been quiet for longer still, so the same rule would catch it.
  StatementClient never(port_, so);
  never.Submit(kEndlessQuery);
  auto never_req = RequestOf(never.result().id);
  auto fetched_req = RequestOf(fetched.result().id);
  ASSERT_NE(never_req, nullptr);
  ASSERT_NE(fetched_req, nullptr);
  ASSERT_TRUE(WaitQuietFor(never_req, o.coordinator.abandoned_query_timeout_ms));
  server_->coordinator()->ExpireQueries();
  ASSERT_TRUE(ClientRequestState::IsTerminal(never_req->state()));
  EXPECT_FALSE(ClientRequestState::IsTerminal(fetched_req->state()))
      << "a query whose client fetched once is only subject to the idle timeout";

  never.Advance();
  ASSERT_TRUE(never.done());
  ExpectFailed(never.result(), "ABANDONED_QUERY", "USER_ERROR", "--abandoned_query_timeout_s");
  EXPECT_EQ(server_->coordinator()->GetMetrics().abandoned, abandoned_before + 1);
  EXPECT_EQ(Metric("qr_queries_abandoned_total"), abandoned_before + 1);

  EXPECT_EQ(fetched.Cancel().status, 204);
  ExpectDrained();
  ExpectServes();
}

TEST_F(ResourceLimitsTest, RefetchingTheAnsweredTokenDoesNotKeepAQueryAlive) {
  CoordinatorServer::Options o = Options();
  o.coordinator.idle_query_timeout_ms = 300;
  o.coordinator.expiration_interval_ms = kManualExpirationMs;
  o.coordinator.max_page_retries = 0;  // retries until the timeout, however many
  Start(o);
  StatementOptions so;
  so.max_wait = "10ms";
  std::unique_ptr<StatementClient> client = SubmitAndFetchOnce(port_, so);  // token 0 answered
  ASSERT_NE(client, nullptr);
  StatementClient& c = *client;
  auto req = RequestOf(c.result().id);
  ASSERT_NE(req, nullptr);
  // Retry the answered token over and over, for longer than the idle timeout: no progress,
  // so no activity.
  const std::string again = TargetOf(c.previous_uri());
  int retries = 0;
  const bool quiet = WaitFor(
      [&] {
        TestResponse r = c.http().Get(again, c.UserHeaders());
        EXPECT_EQ(r.status, 200) << r.body;
        ++retries;
        const int64_t now = Clock::now().time_since_epoch().count();
        return retries >= 3 &&
               now - req->last_activity_ns() > o.coordinator.idle_query_timeout_ms * 1000000;
      },
      kDeadline);
  ASSERT_TRUE(quiet) << "the retries kept the query active";
  server_->coordinator()->ExpireQueries();
  ASSERT_TRUE(ClientRequestState::IsTerminal(req->state()))
      << "still alive after " << retries << " retries of the answered token";
  c.Advance();
  ASSERT_TRUE(c.done());
  ExpectFailed(c.result(), "ABANDONED_QUERY", "USER_ERROR", "--idle_query_timeout_s");
  ExpectDrained();
  ExpectServes();
}

/// Runs a lineitem scan on 'c' up to its first page of rows ('*first'); '*again' is the target
/// of the nextUri that answered it, which a retry GETs again.
void FetchFirstPage(StatementClient* c, TestResponse* first, std::string* again) {
  c->Submit("SELECT l_orderkey, l_linenumber FROM lineitem");
  *first = c->AdvanceToData();
  ASSERT_TRUE(first->Json().contains("data")) << first->body;
  *again = TargetOf(c->previous_uri());
}

TEST_F(ResourceLimitsTest, RetriesOfAnAnsweredPageAreBounded) {
  CoordinatorServer::Options o = Options();
  o.coordinator.max_page_retries = 3;
  Start(o);
  StatementClient c(port_);
  TestResponse first;
  std::string again;
  ASSERT_NO_FATAL_FAILURE(FetchFirstPage(&c, &first, &again));
  for (int retry = 0; retry < 3; ++retry) {
    TestResponse r = c.http().Get(again, c.UserHeaders());
    ASSERT_EQ(r.status, 200) << "retry " << retry << ": " << r.body;
    EXPECT_EQ(r.Json()["data"], first.Json()["data"]);
  }
  for (int refused = 0; refused < 2; ++refused) {
    TestResponse r = c.http().Get(again, c.UserHeaders());
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_NE(r.body.find("--max_page_retries"), std::string::npos) << r.body;
    EXPECT_EQ(r.Header("Retry-After"), "1");
  }
  EXPECT_EQ(server_->coordinator()->GetMetrics().page_retries_refused, 2);
  // The query goes on: its next page, and every row, reach the client.
  StatementResult& result = c.result();
  while (!c.done() && result.failure.empty()) c.Advance();
  EXPECT_TRUE(result.failure.empty()) << result.failure;
  StatementResult count = RunStatement(port_, "SELECT count(*) FROM lineitem");
  ASSERT_EQ(count.rows.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(result.rows.size()), count.rows[0][0].get<int64_t>());
  ExpectDrained();
  ExpectServes();
}

// A refused retry is answered only after ProtocolOptions::throttled_answer_delay, so a client
// retrying in a loop makes one request per delay; meanwhile the daemon serves everyone else.
TEST_F(ResourceLimitsTest, RefusedPageRetriesAreAnsweredAfterTheDelay) {
  CoordinatorServer::Options o = Options();
  o.coordinator.max_page_retries = 1;
  o.protocol.throttled_answer_delay = std::chrono::hours(1);
  Start(o);
  StatementClient c(port_);
  TestResponse first;
  std::string again;
  ASSERT_NO_FATAL_FAILURE(FetchFirstPage(&c, &first, &again));
  ASSERT_EQ(c.http().Get(again, c.UserHeaders()).status, 200);
  // Refused (counted at once), but not answered: the client gives up after 2 s, long before
  // the hour.
  int refused_status = -1;
  std::thread retry([&, headers = c.UserHeaders()] {
    refused_status = TestHttpClient(port_, std::chrono::seconds(2)).Get(again, headers).status;
  });
  ASSERT_TRUE(
      WaitFor([&] { return server_->coordinator()->GetMetrics().page_retries_refused == 1; }));
  ExpectServes();
  retry.join();
  EXPECT_NE(refused_status, 429) << "the refusal was answered before its delay";
  // The query goes on.
  StatementResult& result = c.result();
  while (!c.done() && result.failure.empty()) c.Advance();
  EXPECT_TRUE(result.failure.empty()) << result.failure;
  ExpectDrained();
}

// ---------------------------------------------------------------------------------------------
// Protocol

/// "p0=v0,p1=v1,...": 'n' session properties starting at 'first'.
std::string SessionProperties(int first, int n) {
  std::string out;
  for (int i = first; i < first + n; ++i) {
    if (!out.empty()) out += ',';
    out += "p" + std::to_string(i) + "=v" + std::to_string(i);
  }
  return out;
}

TEST_F(ResourceLimitsTest, MoreThanMaxSessionPropertiesIsRefusedWith400) {
  Start(Options());
  {
    StatementOptions so;
    so.post_headers = {{"X-Trino-Session", SessionProperties(0, 101)}};
    StatementClient c(port_, so);
    TestResponse r = c.Submit("SELECT 1");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("--max_session_properties"), std::string::npos) << r.body;
  }
  {
    // Counted over all the headers together.
    StatementOptions so;
    so.post_headers = {{"X-Trino-Session", SessionProperties(0, 60)},
                       {"X-Trino-Session", SessionProperties(60, 41)}};
    StatementClient c(port_, so);
    TestResponse r = c.Submit("SELECT 1");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("--max_session_properties"), std::string::npos) << r.body;
  }
  {
    // Client tags are bounded by the same flag.
    std::string tags;
    for (int i = 0; i < 101; ++i) tags += "t" + std::to_string(i) + ",";
    StatementOptions so;
    so.post_headers = {{"X-Trino-Client-Tags", tags}};
    StatementClient c(port_, so);
    TestResponse r = c.Submit("SELECT 1");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("Client-Tags"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("--max_session_properties"), std::string::npos) << r.body;
  }
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0) << "refused before submission";
  StatementOptions so;
  so.post_headers = {{"X-Trino-Session", SessionProperties(0, 100)}};
  StatementResult ok = RunStatement(port_, "SELECT 1", so);
  EXPECT_EQ(ok.post_status, 200);
  EXPECT_EQ(ok.final_state, "FINISHED") << ok.error.dump();
  ExpectServes();
  ExpectDrained();
}

TEST_F(ResourceLimitsTest, QueryListingCutsLongStatementsButQueryInfoHasThemWhole) {
  Start(Options());
  const std::string stmt = "SELECT '" + std::string(9991, 'x') + "'";
  ASSERT_EQ(stmt.size(), 10000u);
  StatementResult big = RunStatement(port_, stmt);
  ASSERT_EQ(big.final_state, "FINISHED") << big.error.dump();
  StatementResult small = RunStatement(port_, "SELECT 'short'");
  ASSERT_EQ(small.final_state, "FINISHED") << small.error.dump();

  TestHttpClient http(port_);
  TestResponse list = http.Get("/v1/query");
  ASSERT_EQ(list.status, 200);
  json arr = list.Json();
  ASSERT_TRUE(arr.is_array()) << list.body.substr(0, 500);
  bool saw_big = false, saw_small = false;
  for (const json& q : arr) {
    if (q.value("queryId", "") == big.id) {
      saw_big = true;
      EXPECT_EQ(q.value("query", ""), stmt.substr(0, 250));
      EXPECT_EQ(q.value("queryTruncated", false), true) << q.dump().substr(0, 500);
    } else if (q.value("queryId", "") == small.id) {
      saw_small = true;
      EXPECT_EQ(q.value("query", ""), "SELECT 'short'");
      ASSERT_TRUE(q.contains("queryTruncated"));
      EXPECT_EQ(q["queryTruncated"], false);
    }
  }
  EXPECT_TRUE(saw_big);
  EXPECT_TRUE(saw_small);
  EXPECT_EQ(list.body.find(std::string(300, 'x')), std::string::npos)
      << "the listing carries the whole statement";

  TestResponse one = http.Get("/v1/query/" + big.id);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.Json().value("query", ""), stmt);
  ExpectServes();
  ExpectDrained();
}

// ---------------------------------------------------------------------------------------------
// Shutdown

TEST_F(ResourceLimitsTest, ShutdownCancelsQueriesWhoseClientsAreNotFetching) {
  CoordinatorServer::Options o = Options();
  o.coordinator.shutdown_client_idle_ms = 100;
  Start(o);
  StatementClient c(port_);
  c.Submit("SELECT * FROM nation");
  auto req = RequestOf(c.result().id);
  ASSERT_NE(req, nullptr);
  ASSERT_TRUE(WaitFor([&] { return req->execution_done(); }, kDeadline));
  // Nobody fetches: the grace period (60 s) is not waited for. Had it been, the query (done
  // executing) would not be canceled at its end, and the count would be 0.
  EXPECT_EQ(server_->Shutdown(60000), 1);
  ClientRequestState::Info info = req->GetInfo();
  EXPECT_EQ(info.state, State::kFailed);
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "SERVER_SHUTTING_DOWN");
  EXPECT_NE(info.error->message.find("not fetching"), std::string::npos) << info.error->message;
  EXPECT_EQ(server_->exec_mgr()->num_live(), 0);
}

}  // namespace
}  // namespace qr::testing
