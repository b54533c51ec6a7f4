// Resource governance seen from outside: every limit a client can run into (in-flight caps,
// fair admission, abandoned queries, result memory, SQLite's heap, spill, CPU-bounded
// functions, session properties, listing size, shutdown of idle clients) answers with its
// Trino error and names the flag that sets it; afterwards the server still answers SELECT 1
// and its registries drain.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;
using State = ClientRequestState::State;

constexpr auto kDeadline = 60s;

class ResourceLimitsTest : public ServiceTest {
 protected:
  /// Defaults for every test here: no abandonment unless a test asks for it, so that queries
  /// a test holds unfetched on purpose stay in flight however slow the machine is.
  static CoordinatorServer::Options Options() {
    CoordinatorServer::Options o = DefaultOptions();
    o.coordinator.abandoned_query_timeout_ms = 0;
    return o;
  }

  void Start(CoordinatorServer::Options o) {
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
    server_.reset();
  }

  /// The coordinator's request behind a statement client (null if unknown).
  std::shared_ptr<ClientRequestState> RequestOf(const std::string& id) {
    UniqueId uid;
    if (!ParseId(id, &uid).ok()) return nullptr;
    return server_->coordinator()->Find(uid);
  }

  /// Waits until 'req' is terminal; false at the deadline.
  static bool WaitTerminal(const std::shared_ptr<ClientRequestState>& req) {
    return WaitUntil([&] { return ClientRequestState::IsTerminal(req->state()); }, kDeadline);
  }

  /// SELECT 1 runs to FINISHED with its one row.
  void ExpectServes() {
    StatementResult r = RunStatement(port_, "SELECT 1");
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_EQ(r.final_state, "FINISHED") << r.error.dump();
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0][0], 1);
  }

  /// The registries drain: no request in the coordinator's registry, none in flight by the
  /// admission counters or /metrics, no executor-side query state left.
  void ExpectDrained() {
    QueryCoordinator* c = server_->coordinator();
    EXPECT_TRUE(WaitUntil([&] { return c->registry().Count() == 0; }, kDeadline))
        << c->registry().Count() << " requests in the registry";
    EXPECT_TRUE(WaitUntil([&] { return server_->exec_mgr()->num_live() == 0; }, kDeadline))
        << server_->exec_mgr()->num_live() << " executor query states live";
    EXPECT_TRUE(WaitUntil([&] { return c->GetMetrics().users_in_flight == 0; }, kDeadline));
    QueryCoordinator::Metrics m = c->GetMetrics();
    EXPECT_EQ(m.in_flight, 0);
    EXPECT_EQ(m.queued, 0);
    EXPECT_EQ(Metric("qr_queries_in_flight"), 0);
  }

  /// The value of one sample ("name" or "name{labels}") on /metrics; -1 if absent.
  double Metric(const std::string& series) {
    TestResponse r = TestHttpClient(port_, 10s).Get("/metrics");
    EXPECT_EQ(r.status, 200);
    size_t pos = 0;
    while (pos < r.body.size()) {
      size_t end = r.body.find('\n', pos);
      if (end == std::string::npos) end = r.body.size();
      std::string_view line(r.body.data() + pos, end - pos);
      if (line.size() > series.size() && line.starts_with(series) &&
          line[series.size()] == ' ') {
        return std::stod(std::string(line.substr(series.size() + 1)));
      }
      pos = end + 1;
    }
    ADD_FAILURE() << "no sample " << series << " on /metrics";
    return -1;
  }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

/// 'r' ended FAILED with 'name' (of type 'type'), its message naming 'flag'.
void ExpectFailed(const StatementResult& r, const std::string& name, const std::string& type,
                  const std::string& flag) {
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  EXPECT_EQ(r.error_name(), name) << r.error.dump();
  EXPECT_EQ(r.error.value("errorType", ""), type) << r.error.dump();
  EXPECT_NE(r.error.value("message", "").find(flag), std::string::npos)
      << "the message should name " << flag << ": " << r.error.dump();
}

std::string MessageOf(const StatementResult& r) { return r.error.value("message", ""); }

/// Submits 'sql' for 'user' and never fetches it.
std::unique_ptr<StatementClient> SubmitUnfetched(int port, const std::string& sql,
                                                 const std::string& user = "test") {
  StatementOptions so;
  so.user = user;
  auto c = std::make_unique<StatementClient>(port, so);
  TestResponse r = c->Submit(sql);
  EXPECT_EQ(r.status, 200) << r.body;
  return c;
}

/// Submits the endless query and fetches its first answer. The tests that use it expire
/// queries by calling ExpireQueries() themselves (the background pass is an hour apart), so
/// no timeout can fire between the two, however slow the machine.
std::unique_ptr<StatementClient> SubmitAndFetchOnce(int port, const StatementOptions& so) {
  auto c = std::make_unique<StatementClient>(port, so);
  c->Submit(kEndlessQuery);
  c->Advance();
  EXPECT_FALSE(c->done()) << c->result().error.dump();
  return c;
}

/// The background expiration pass never runs during a test (an hour apart).
constexpr int64_t kManualExpirationMs = 3600 * 1000;

/// Waits until 'req' has had no client activity for more than 'timeout_ms'.
bool WaitQuietFor(const std::shared_ptr<ClientRequestState>& req, int64_t timeout_ms) {
  return WaitUntil(
      [&] {
        const int64_t now = Clock::now().time_since_epoch().count();
        return now - req->last_activity_ns() > timeout_ms * 1000000;
      },
      kDeadline);
}

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
  ASSERT_TRUE(WaitUntil(
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
  EXPECT_TRUE(WaitUntil(
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
  auto started = [](const std::shared_ptr<ClientRequestState>& r) {
    return r->exec_elapsed_ms() >= 0;
  };
  std::vector<std::shared_ptr<ClientRequestState>> a;
  for (int i = 0; i < 5; ++i) a.push_back(submit("alice"));
  ASSERT_TRUE(WaitUntil([&] { return started(a[0]); }, kDeadline));
  // Bob's query holds the slot until canceled too, so the order of admission shows in the
  // states alone: whichever of bob's and alice's second query starts first keeps the slot.
  auto b = submit("bob");
  EXPECT_EQ(coord->GetMetrics().queued, 5);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_FALSE(started(a[i])) << i;
  EXPECT_FALSE(started(b));

  ASSERT_TRUE(coord->Cancel(a[0]->query_id()).ok());
  ASSERT_TRUE(WaitUntil([&] { return started(b) || started(a[1]); }, kDeadline));
  EXPECT_TRUE(started(b)) << "bob's query must get the first free slot";
  EXPECT_FALSE(started(a[1])) << "alice's backlog went first";
  EXPECT_FALSE(ClientRequestState::IsTerminal(b->state()));

  // Then alice's backlog runs in her order.
  ASSERT_TRUE(coord->Cancel(b->query_id()).ok());
  ASSERT_TRUE(coord->Cancel(a[1]->query_id()).ok());  // whichever runs now
  ASSERT_TRUE(WaitUntil([&] { return started(a[2]); }, kDeadline));
  EXPECT_FALSE(started(a[3]));
  EXPECT_FALSE(started(a[4]));

  for (auto& r : a) ASSERT_TRUE(coord->Cancel(r->query_id()).ok());
  for (auto& r : a) EXPECT_TRUE(WaitTerminal(r));
  EXPECT_TRUE(WaitUntil([&] { return coord->GetMetrics().running == 0; }, kDeadline));
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
  const bool quiet = WaitUntil(
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

// ---------------------------------------------------------------------------------------------
// Memory

TEST_F(ResourceLimitsTest, WideRowFailsItsQueryNotTheServer) {
  CoordinatorServer::Options o = Options();
  o.query_max_memory_bytes = int64_t{64} << 20;
  Start(o);
  // 60 values of 16 MB each: one row of ~1 GB (far more once base64-encoded).
  std::string sql = "SELECT ";
  for (int i = 0; i < 60; ++i) {
    if (i > 0) sql += ", ";
    sql += "zeroblob(16000000) c" + std::to_string(i);
  }
  StatementResult r = RunStatement(port_, sql);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  const std::string name = r.error_name();
  EXPECT_TRUE(name == "EXCEEDED_LOCAL_MEMORY_LIMIT" || name == "EXCEEDED_GLOBAL_MEMORY_LIMIT")
      << r.error.dump();
  EXPECT_EQ(r.error.value("errorType", ""), "INSUFFICIENT_RESOURCES") << r.error.dump();
  const std::string message = MessageOf(r);
  EXPECT_TRUE(message.find("--query_max_memory_mb") != std::string::npos ||
              message.find("--sqlite_heap_limit_mb") != std::string::npos ||
              message.find("--max_result_memory_mb") != std::string::npos)
      << message;
  EXPECT_TRUE(WaitUntil([&] { return server_->result_memory()->used_bytes() == 0; }, kDeadline))
      << server_->result_memory()->used_bytes() << " bytes still reserved";
  ExpectServes();
  ExpectDrained();
  EXPECT_TRUE(WaitUntil([&] { return server_->result_memory()->used_bytes() == 0; }, kDeadline))
      << server_->result_memory()->used_bytes() << " bytes still reserved after SELECT 1";
}

TEST_F(ResourceLimitsTest, UnfetchedResultsHitTheGlobalResultBudget) {
  CoordinatorServer::Options o = Options();
  o.max_result_memory_bytes = int64_t{2} << 20;
  Start(o);
  // One ~1.2 MiB page each (900 KB of blob, base64-encoded): a page of its own is held in
  // memory even though it is larger than the result buffer (never spooled), so every
  // unfetched one holds its bytes of the budget until its client fetches or cancels it.
  const std::string sql = "SELECT zeroblob(900000) AS b";
  std::vector<std::unique_ptr<StatementClient>> held;
  std::vector<std::shared_ptr<ClientRequestState>> reqs;
  for (int i = 0; i < 3; ++i) {
    held.push_back(SubmitUnfetched(port_, sql));
    reqs.push_back(RequestOf(held.back()->result().id));
    ASSERT_NE(reqs.back(), nullptr);
    // One at a time, so that it is always a later one that finds the budget taken.
    ASSERT_TRUE(WaitUntil([&] { return reqs.back()->execution_done(); }, kDeadline));
  }
  const MemoryBudget* budget = server_->result_memory();
  EXPECT_LE(budget->peak_bytes(), int64_t{2} << 20);
  EXPECT_GT(budget->refusals(), 0);
  EXPECT_GT(budget->used_bytes(), int64_t{1} << 20) << "the first query's page";
  EXPECT_FALSE(ClientRequestState::IsTerminal(reqs[0]->state()))
      << reqs[0]->GetInfo().error.value_or(QueryError{}).message;
  // The later ones failed in their executors; their clients learn why from the protocol.
  for (size_t i = 1; i < reqs.size(); ++i) {
    StatementClient& c = *held[i];
    while (!c.done() && c.result().failure.empty()) c.Advance();
    ExpectFailed(c.result(), "EXCEEDED_GLOBAL_MEMORY_LIMIT", "INSUFFICIENT_RESOURCES",
                 "--max_result_memory_mb");
    EXPECT_EQ(c.result().error.value("errorCode", -1), 131073);
  }
  EXPECT_EQ(held[0]->Cancel().status, 204);
  EXPECT_TRUE(WaitUntil([&] { return budget->used_bytes() == 0; }, kDeadline))
      << budget->used_bytes() << " bytes still reserved";
  ExpectDrained();
  ExpectServes();
  // With the budget free again, the same query runs and delivers its row.
  StatementResult again = RunStatement(port_, sql);
  EXPECT_EQ(again.final_state, "FINISHED") << again.error.dump();
  EXPECT_EQ(again.rows.size(), 1u);
  ExpectDrained();
  EXPECT_TRUE(WaitUntil([&] { return budget->used_bytes() == 0; }, kDeadline))
      << budget->used_bytes() << " bytes still reserved after the queries were fetched";
}

// ---------------------------------------------------------------------------------------------
// Spill

constexpr char kSpillingSort[] = "SELECT * FROM lineitem ORDER BY l_comment";

TEST_F(ResourceLimitsTest, SortThatSpillsPastTheQueryLimitFailsWithExceededSpillLimit) {
  // First, with the default limits: the sort spills (or this test proves nothing). Its
  // first page comes only once the whole sort is done.
  Start(Options());
  {
    StatementClient c(port_);
    c.Submit(kSpillingSort);
    while (!c.done() && c.result().data_pages == 0) c.Advance();
    ASSERT_FALSE(c.done()) << c.result().error.dump();
    EXPECT_GT(server_->spill_budget()->peak_bytes(), 0) << "the sort did not spill";
    EXPECT_EQ(c.Cancel().status, 204);
    ExpectDrained();
    EXPECT_TRUE(WaitUntil([&] { return server_->spill_budget()->used_bytes() == 0; }, kDeadline));
  }
  server_->Shutdown(0);
  server_.reset();

  CoordinatorServer::Options o = Options();
  o.query_max_spill_bytes = int64_t{1} << 20;
  Start(o);
  StatementResult r = RunStatement(port_, kSpillingSort);
  ExpectFailed(r, "EXCEEDED_SPILL_LIMIT", "INSUFFICIENT_RESOURCES", "--query_max_spill_mb");
  EXPECT_EQ(r.error.value("errorCode", -1), 131078);
  EXPECT_GT(server_->spill_budget()->query_refusals(), 0);
  EXPECT_EQ(Metric("qr_spill_refusals_total{limit=\"query_max_spill_mb\"}"),
            server_->spill_budget()->query_refusals());
  EXPECT_TRUE(WaitUntil([&] { return server_->spill_budget()->used_bytes() == 0; }, kDeadline))
      << server_->spill_budget()->used_bytes() << " spill bytes still charged";
  ExpectDrained();
  ExpectServes();
}

// ---------------------------------------------------------------------------------------------
// CPU

TEST_F(ResourceLimitsTest, InstrOnLongStringsIsLinearAndARecursiveQueryStillCancels) {
  Start(Options());
  // Quadratic in the built-in instr (minutes); the test's own timeout catches a regression.
  StatementResult r = RunStatement(
      port_,
      "SELECT instr(x || 'b', substr(x, 1, 4000000) || 'b') "
      "FROM (SELECT printf('%.*c', 8000000, 'a') AS x)");
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED") << r.error.dump();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], 4000001);

  StatementOptions so;
  so.max_wait = "10ms";
  StatementClient c(port_, so);
  c.Submit(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
      "SELECT count(*) FROM c WHERE instr(printf('%.*c', 100000, 'a') || x, 'a' || x) > 0");
  auto req = RequestOf(c.result().id);
  ASSERT_NE(req, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return req->exec_elapsed_ms() >= 0; }, kDeadline));
  EXPECT_EQ(c.Cancel().status, 204);
  EXPECT_TRUE(WaitUntil([&] { return req->execution_done(); }, kDeadline));
  ClientRequestState::Info info = req->GetInfo();
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "USER_CANCELED");
  ExpectDrained();
  ExpectServes();
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
  ASSERT_TRUE(WaitUntil([&] { return req->execution_done(); }, kDeadline));
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
