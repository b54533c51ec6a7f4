#pragma once

// The fixture and helpers of the resource-limit tests (resource-limits-test.cc: caps,
// fairness, abandonment, protocol limits, shutdown; resource-budgets-test.cc: memory, spill,
// CPU).

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {

inline constexpr auto kDeadline = 60s;

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
  ClientRequestStatePtr RequestOf(const std::string& id) {
    UniqueId uid;
    if (!ParseId(id, &uid).ok()) return nullptr;
    return server_->coordinator()->Find(uid);
  }

  /// Waits until 'req' is terminal; false at the deadline.
  static bool WaitTerminal(const ClientRequestStatePtr& req) {
    return WaitFor([&] { return ClientRequestState::IsTerminal(req->state()); }, kDeadline);
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
    EXPECT_TRUE(WaitFor([&] { return c->registry().Count() == 0; }, kDeadline))
        << c->registry().Count() << " requests in the registry";
    EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }, kDeadline))
        << server_->exec_mgr()->num_live() << " executor query states live";
    EXPECT_TRUE(WaitFor([&] { return c->GetMetrics().users_in_flight == 0; }, kDeadline));
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
inline void ExpectFailed(const StatementResult& r, const std::string& name, const std::string& type,
                  const std::string& flag) {
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  EXPECT_EQ(r.error_name(), name) << r.error.dump();
  EXPECT_EQ(r.error.value("errorType", ""), type) << r.error.dump();
  EXPECT_NE(r.error.value("message", "").find(flag), std::string::npos)
      << "the message should name " << flag << ": " << r.error.dump();
}

inline std::string MessageOf(const StatementResult& r) { return r.error.value("message", ""); }

/// Submits 'sql' for 'user' and never fetches it.
inline std::unique_ptr<StatementClient> SubmitUnfetched(int port, const std::string& sql,
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
inline std::unique_ptr<StatementClient> SubmitAndFetchOnce(int port, const StatementOptions& so) {
  auto c = std::make_unique<StatementClient>(port, so);
  c->Submit(kEndlessQuery);
  c->Advance();
  EXPECT_FALSE(c->done()) << c->result().error.dump();
  return c;
}

/// The background expiration pass never runs during a test (an hour apart).
inline constexpr int64_t kManualExpirationMs = 3600 * 1000;

/// Waits until 'req' has had no client activity for more than 'timeout_ms'.
inline bool WaitQuietFor(const ClientRequestStatePtr& req, int64_t timeout_ms) {
  return WaitFor(
      [&] {
        const int64_t now = Clock::now().time_since_epoch().count();
        return now - req->last_activity_ns() > timeout_ms * 1000000;
      },
      kDeadline);
}

}  // namespace qr::testing
