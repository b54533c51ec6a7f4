// The per-user budget of failed queries (--max_failed_queries_per_user_per_s): the token
// bucket alone, then through the server: a user whose statements keep failing is answered
// 429 (QUERY_QUEUE_FULL, naming the flag) while another user has queries in flight, not
// while it is alone, and the other user is never refused.

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "resource-limits-test-util.h"
#include "service/failure-throttle.h"

namespace qr::testing {
namespace {

using namespace std::chrono_literals;
using TClock = FailureThrottle::Clock;

TEST(FailureThrottleTest, BucketEmptiesWithFailuresAndRefillsAtTheRate) {
  FailureThrottle throttle(4);
  const TClock::time_point t0 = TClock::now();
  EXPECT_FALSE(throttle.Throttled("u", t0));
  for (int i = 0; i < 3; ++i) throttle.OnFailure("u", t0);
  EXPECT_FALSE(throttle.Throttled("u", t0));  // one failure left
  throttle.OnFailure("u", t0);
  EXPECT_TRUE(throttle.Throttled("u", t0));
  EXPECT_TRUE(throttle.Throttled("u", t0 + 200ms));  // 0.8 of a failure refilled
  EXPECT_FALSE(throttle.Throttled("u", t0 + 260ms));
  // Another user's budget is its own.
  EXPECT_FALSE(throttle.Throttled("v", t0));
  EXPECT_EQ(throttle.num_users_tracked(), 1);
}

TEST(FailureThrottleTest, DebtIsBoundedToOneSecondOfFailures) {
  FailureThrottle throttle(10);
  const TClock::time_point t0 = TClock::now();
  for (int i = 0; i < 1000; ++i) throttle.OnFailure("u", t0);
  // The debt stops at -10: after 1.05 s the bucket holds 0.5, after 1.15 s 1.5.
  EXPECT_TRUE(throttle.Throttled("u", t0 + 1050ms));
  EXPECT_FALSE(throttle.Throttled("u", t0 + 1150ms));
}

TEST(FailureThrottleTest, ZeroRateNeverThrottles) {
  FailureThrottle throttle(0);
  EXPECT_FALSE(throttle.enabled());
  const TClock::time_point t0 = TClock::now();
  for (int i = 0; i < 100; ++i) throttle.OnFailure("u", t0);
  EXPECT_FALSE(throttle.Throttled("u", t0));
}

class FailureThrottleServerTest : public ResourceLimitsTest {
 protected:
  static constexpr int kRate = 2;
  void SetUp() override {
    ResourceLimitsTest::SetUp();
    CoordinatorServer::Options o = Options();
    o.coordinator.max_failed_queries_per_user_per_s = kRate;
    o.protocol.throttled_answer_delay = 20ms;
    Start(o);
  }

  bool Throttled(const std::string& user) {
    return server_->coordinator()->failure_throttle().Throttled(user);
  }

  /// Fails statements of 'user' until its budget is empty (and, with the debt, stays empty
  /// for about a second).
  void DrainBudget(const std::string& user) {
    StatementOptions so;
    so.user = user;
    for (int i = 0; i < 2 * kRate; ++i) {
      StatementResult r = RunStatement(port_, "SELECT * FROM no_such_table", so);
      if (r.post_status == 429) continue;  // already throttled
      EXPECT_EQ(r.final_state, "FAILED") << r.error.dump();
    }
    ASSERT_TRUE(WaitFor([&] { return Throttled(user); }, kDeadline));
  }

  /// POSTs SELECT 1 as 'user'. The answer is conclusive when the user was throttled at the
  /// time (a bucket only refills between failures: throttled after the answer means
  /// throttled before it); '*conclusive' says so.
  TestResponse PostAs(const std::string& user, bool* conclusive) {
    TestResponse r = TestHttpClient(port_, 30s).Post("/v1/statement", "SELECT 1",
                                                     {{"X-Trino-User", user}});
    *conclusive = Throttled(user);
    return r;
  }
};

TEST_F(FailureThrottleServerTest, FailingUserIsRefusedWhileAnotherUserHasQueriesInFlight) {
  // Another user's query in flight (submitted, not fetched).
  std::unique_ptr<StatementClient> good = SubmitUnfetched(port_, "SELECT 1", "good");
  TestResponse refused;
  bool conclusive = false;
  for (int attempt = 0; attempt < 20 && !conclusive; ++attempt) {
    DrainBudget("bad");
    refused = PostAs("bad", &conclusive);
  }
  ASSERT_TRUE(conclusive) << "the budget refilled before every answer (machine too slow?)";
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.Header("Retry-After"), "1");
  nlohmann::json body = refused.Json();
  ASSERT_TRUE(body.is_object()) << refused.body;
  EXPECT_EQ(body["stats"]["state"], "FAILED");
  EXPECT_EQ(body["error"]["errorName"], "QUERY_QUEUE_FULL") << refused.body;
  EXPECT_EQ(body["error"]["errorType"], "INSUFFICIENT_RESOURCES");
  EXPECT_NE(body["error"]["message"].get<std::string>().find(
                "--max_failed_queries_per_user_per_s=2"),
            std::string::npos)
      << refused.body;
  EXPECT_GE(Metric("qr_queries_rejected_total{limit=\"max_failed_queries_per_user_per_s\"}"), 1);
  EXPECT_EQ(Metric("qr_limit{flag=\"max_failed_queries_per_user_per_s\"}"), kRate);
  // The other user is never refused: its query completes, a new one runs.
  while (!good->done()) good->Advance();
  EXPECT_EQ(good->result().final_state, "FINISHED") << good->result().error.dump();
  StatementOptions so;
  so.user = "good";
  StatementResult again = RunStatement(port_, "SELECT 1", so);
  EXPECT_EQ(again.final_state, "FINISHED") << again.error.dump();
  ExpectDrained();
  ExpectServes();
}

TEST_F(FailureThrottleServerTest, FailingUserAloneIsNotRefused) {
  TestResponse accepted;
  bool conclusive = false;
  for (int attempt = 0; attempt < 20 && !conclusive; ++attempt) {
    DrainBudget("bad");
    accepted = PostAs("bad", &conclusive);
  }
  ASSERT_TRUE(conclusive) << "the budget refilled before every answer (machine too slow?)";
  EXPECT_EQ(accepted.status, 200) << accepted.body;
  EXPECT_EQ(Metric("qr_queries_rejected_total{limit=\"max_failed_queries_per_user_per_s\"}"), 0);
}

}  // namespace
}  // namespace qr::testing
