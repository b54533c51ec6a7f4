// EXPLAIN from the per-query page (/query_plan) goes through admission like any statement:
// it waits for a running slot, counts against the user's caps and is refused with the same
// errors when they are reached; --query_plan_timeout_ms bounds its wait.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "service-test-util.h"
#include "test-client.h"
#include "testutil/wait.h"

namespace qr::testing {
namespace {

class QueryPlanAdmissionTest : public ServiceTest {
 protected:
  void TearDown() override {
    if (server_) server_->Shutdown(0);
    server_.reset();
  }
  void Start(int max_running, int max_in_flight_per_user,
             std::chrono::milliseconds plan_timeout = std::chrono::milliseconds(10000)) {
    CoordinatorServer::Options o = DefaultOptions();
    o.coordinator.max_running_queries = max_running;
    o.coordinator.max_in_flight_queries_per_user = max_in_flight_per_user;
    o.query_plan_timeout = plan_timeout;
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
  }
  /// alice's endless query, submitted and holding a running slot.
  std::unique_ptr<StatementClient> StartEndless() {
    StatementOptions options;
    options.user = "alice";
    auto client = std::make_unique<StatementClient>(server_->port(), options);
    EXPECT_EQ(client->Submit(kEndlessQuery).status, 200);
    EXPECT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().running == 1; }));
    return client;
  }
  void Cancel(const std::string& id) {
    Headers headers = {{"X-Trino-User", "alice"}};
    EXPECT_EQ(TestHttpClient(server_->port())
                  .Post("/cancel_query?query_id=" + id, "", headers)
                  .status,
              200);
  }

  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(QueryPlanAdmissionTest, ExplainWaitsForARunningSlotLikeAnyStatement) {
  Start(/*max_running=*/1, /*max_in_flight_per_user=*/10);
  std::unique_ptr<StatementClient> endless = StartEndless();
  const std::string id = endless->result().id;
  std::atomic<bool> answered{false};
  nlohmann::json plan;
  std::thread page([&] {
    TestResponse r = TestHttpClient(server_->port()).Get("/query_plan?query_id=" + id);
    EXPECT_EQ(r.status, 200) << r.body;
    plan = r.Json();
    answered.store(true);
  });
  // The EXPLAIN is queued behind the one running slot, as a statement would be.
  ASSERT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().queued == 1; }));
  EXPECT_FALSE(answered.load());
  EXPECT_EQ(server_->coordinator()->GetMetrics().running, 1);
  // The slot frees: the EXPLAIN runs and the page gets its plan.
  Cancel(id);
  page.join();
  ASSERT_TRUE(plan["plan"].is_string()) << plan;
  EXPECT_TRUE(plan["error"].is_null());
  EXPECT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().in_flight == 0; }));
  EXPECT_EQ(server_->query_plan_timeouts(), 0);
}

TEST_F(QueryPlanAdmissionTest, ExplainWaitingPastTheBoundFailsWithExceededTimeLimit) {
  Start(/*max_running=*/1, /*max_in_flight_per_user=*/10, std::chrono::milliseconds(200));
  std::unique_ptr<StatementClient> endless = StartEndless();
  const std::string id = endless->result().id;
  const int64_t failed = server_->coordinator()->GetMetrics().failed;
  // The EXPLAIN queues behind the endless query, which never frees the slot: the bound fails
  // it and the page answers with that error.
  TestResponse r = TestHttpClient(server_->port()).Get("/query_plan?query_id=" + id);
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json plan = r.Json();
  EXPECT_TRUE(plan["plan"].is_null());
  ASSERT_TRUE(plan["error"].is_object()) << plan;
  EXPECT_EQ(plan["error"]["name"], "EXCEEDED_TIME_LIMIT");
  EXPECT_EQ(plan["error"]["type"], "INSUFFICIENT_RESOURCES");
  EXPECT_NE(plan["error"]["message"].get<std::string>().find("--query_plan_timeout_ms=200 ms"),
            std::string::npos)
      << plan;
  // The page may be answered (from inside the failing call) before the counters move.
  EXPECT_TRUE(WaitFor([&] { return server_->query_plan_timeouts() == 1; }));
  TestResponse metrics = TestHttpClient(server_->port()).Get("/metrics");
  EXPECT_NE(metrics.body.find("\nqr_query_plan_timeouts_total 1\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nqr_limit{flag=\"query_plan_timeout_ms\"} 200\n"),
            std::string::npos);
  // Only the EXPLAIN ended, as a failed query out of the queue: the endless one runs on.
  EXPECT_TRUE(WaitFor([&] {
    QueryCoordinator::Metrics m = server_->coordinator()->GetMetrics();
    return m.failed == failed + 1 && m.queued == 0;
  }));
  EXPECT_EQ(server_->coordinator()->GetMetrics().running, 1);
  EXPECT_EQ(server_->query_plan_timeouts(), 1);
  Cancel(id);
  EXPECT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().in_flight == 0; }));
}

TEST_F(QueryPlanAdmissionTest, ExplainIsRefusedByTheUsersCapWithTheStatementsError) {
  Start(/*max_running=*/4, /*max_in_flight_per_user=*/1);
  std::unique_ptr<StatementClient> endless = StartEndless();
  const std::string id = endless->result().id;
  // alice is at her in-flight cap: a statement of hers is refused...
  StatementOptions alice;
  alice.user = "alice";
  StatementResult refused = RunStatement(server_->port(), "SELECT 1", alice);
  ASSERT_EQ(refused.final_state, "FAILED");
  EXPECT_EQ(refused.error_name(), "QUERY_QUEUE_FULL");
  const int64_t rejected = server_->coordinator()->GetMetrics().rejected_in_flight_per_user;
  // ...and so is the EXPLAIN of her query, with the same error, counted the same way.
  TestResponse r = TestHttpClient(server_->port()).Get("/query_plan?query_id=" + id);
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json plan = r.Json();
  EXPECT_TRUE(plan["plan"].is_null());
  ASSERT_TRUE(plan["error"].is_object()) << plan;
  EXPECT_EQ(plan["error"]["name"], "QUERY_QUEUE_FULL");
  EXPECT_EQ(plan["error"]["message"], refused.error.value("message", std::string()));
  EXPECT_EQ(server_->coordinator()->GetMetrics().rejected_in_flight_per_user, rejected + 1);
  // Another user is not held back by alice's cap.
  StatementOptions as_bob;
  as_bob.user = "bob";
  StatementResult bob = RunStatement(server_->port(), "SELECT 1", as_bob);
  EXPECT_EQ(bob.final_state, "FINISHED") << bob.failure;
  Cancel(id);
}

}  // namespace
}  // namespace qr::testing
