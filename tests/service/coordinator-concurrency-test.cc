// Many concurrent protocol clients against one in-process coordinatord: every query completes
// with the right rows, and the server ends with nothing in flight.

#include <atomic>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

class CoordinatorConcurrencyTest : public ServiceTest {};

struct Workload {
  const char* sql;
  size_t rows;
};

// One-row, one-page, and multi-page results (customer has 1500 rows: two pages).
const Workload kWorkloads[] = {
    {"SELECT 1", 1},
    {"SELECT * FROM nation", kNationRows},
    {"SELECT r_name FROM region ORDER BY r_regionkey", kRegionRows},
    {"SELECT c_custkey, c_name, c_acctbal FROM customer", kCustomerRows},
};

TEST_F(CoordinatorConcurrencyTest, SixtyFourClientsRunTheirQueriesToCompletion) {
  constexpr int kClients = 64;
  // ThreadSanitizer slows everything ~10x: fewer queries per client, the same 64 clients.
  constexpr int kQueriesPerClient = QR_TEST_UNDER_TSAN ? 4 : 20;
  auto server = StartServer(DefaultOptions());
  ASSERT_NE(server, nullptr);
  const int port = server->port();

  struct Outcome {
    int finished = 0;
    int requests = 0;
    std::vector<std::string> problems;
  };
  std::vector<Outcome> outcomes(kClients);
  std::latch start(kClients);
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // all clients at once
      Outcome& out = outcomes[t];
      for (int q = 0; q < kQueriesPerClient; ++q) {
        const Workload& w = kWorkloads[(t + q) % std::size(kWorkloads)];
        StatementOptions o;
        o.user = "client-" + std::to_string(t);
        o.header_prefix = t % 2 == 0 ? "X-Trino-" : "X-Presto-";
        o.timeout = 240s;
        StatementResult r = RunStatement(port, w.sql, o);
        out.requests += r.http_requests;
        std::string problem;
        if (!r.failure.empty()) {
          problem = r.failure;
        } else if (r.final_state != "FINISHED") {
          problem = "state " + r.final_state + " " + r.error.dump();
        } else if (r.rows.size() != w.rows) {
          problem = std::to_string(r.rows.size()) + " rows";
        }
        if (problem.empty()) {
          ++out.finished;
        } else {
          out.problems.push_back(std::string(w.sql) + ": " + problem);
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  int finished = 0, requests = 0;
  for (int t = 0; t < kClients; ++t) {
    finished += outcomes[t].finished;
    requests += outcomes[t].requests;
    for (const auto& p : outcomes[t].problems) ADD_FAILURE() << "client " << t << ": " << p;
  }
  EXPECT_EQ(finished, kClients * kQueriesPerClient);
  QueryCoordinator::Metrics m = server->coordinator()->GetMetrics();
  EXPECT_EQ(m.submitted, kClients * kQueriesPerClient);
  EXPECT_EQ(m.finished, kClients * kQueriesPerClient);
  EXPECT_EQ(m.failed + m.canceled, 0);
  EXPECT_EQ(m.in_flight, 0);
  EXPECT_EQ(m.queued, 0);
  // The last page can reach a client before the executor's final callback frees its slot.
  EXPECT_TRUE(WaitFor([&] { return server->coordinator()->GetMetrics().running == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server->exec_mgr()->num_live() == 0; }));
  RecordProperty("http_requests", requests);
  server->Shutdown(0);
}

TEST_F(CoordinatorConcurrencyTest, QueryStaysFindableWhileItCompletes) {
  // A query moves from the in-flight registry to the completed-query log when it ends; a
  // lookup at that moment (a GET of its nextUri, /v1/query/{id}) must find it in one or the
  // other, or the client gets a 404 for a query that exists.
  auto server = StartServer(DefaultOptions());
  ASSERT_NE(server, nullptr);
  QueryCoordinator* coordinator = server->coordinator();
  for (int i = 0; i < 20; ++i) {
    StatementClient c(server->port());
    c.Submit(kEndlessQuery);
    UniqueId id;
    ASSERT_TRUE(ParseId(c.result().id, &id).ok());
    std::atomic<bool> stop{false};
    std::atomic<int> lookups{0}, misses{0};
    std::thread looker([&] {
      while (!stop.load()) {
        if (coordinator->Find(id) == nullptr) misses.fetch_add(1);
        lookups.fetch_add(1);
      }
    });
    EXPECT_TRUE(WaitFor([&] { return lookups.load() > 0; }));
    EXPECT_EQ(c.Cancel().status, 204);
    EXPECT_TRUE(WaitFor([&] { return !coordinator->Completed().empty() &&
                                       coordinator->Completed().front()->query_id() == id; }));
    const int seen = lookups.load();
    EXPECT_TRUE(WaitFor([&] { return lookups.load() > seen; }));
    stop.store(true);
    looker.join();
    ASSERT_EQ(misses.load(), 0) << "iteration " << i;
  }
  server->Shutdown(0);
}

TEST_F(CoordinatorConcurrencyTest, CancelRacingAdmissionLeavesNoExecutionBehind) {
  // With one slot, canceling the running query admits the queued one on the executor's
  // callback thread while another thread cancels that queued one: the cancel may complete the
  // request between its admission and its execution being attached. The execution must
  // still end and free its slot, and no request in the query log may keep it alive.
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.max_running_queries = 1;
  o.coordinator.abandoned_query_timeout_ms = 0;
  auto server = StartServer(std::move(o));
  ASSERT_NE(server, nullptr);
  QueryCoordinator* coordinator = server->coordinator();
  constexpr int kRounds = QR_TEST_UNDER_TSAN ? 100 : 400;
  for (int i = 0; i < kRounds; ++i) {
    SessionInfo s;
    s.user = i % 2 == 0 ? "alice" : "bob";
    auto running = coordinator->Submit(std::make_shared<const std::string>(kEndlessQuery), s);
    auto queued = coordinator->Submit(std::make_shared<const std::string>(kEndlessQuery), s);
    std::latch go(2);
    std::thread other([&] {
      go.arrive_and_wait();
      EXPECT_TRUE(coordinator->Cancel(queued->query_id()).ok());
    });
    go.arrive_and_wait();
    EXPECT_TRUE(coordinator->Cancel(running->query_id()).ok());
    other.join();
    ASSERT_TRUE(ClientRequestState::IsTerminal(running->state())) << "round " << i;
    ASSERT_TRUE(ClientRequestState::IsTerminal(queued->state())) << "round " << i;
  }
  EXPECT_TRUE(WaitFor([&] { return coordinator->GetMetrics().running == 0; }))
      << coordinator->GetMetrics().running << " slots still held";
  EXPECT_EQ(coordinator->registry().Count(), 0u);
  EXPECT_TRUE(WaitFor([&] { return server->exec_mgr()->num_live() == 0; }))
      << server->exec_mgr()->num_live() << " executor query states live";
  // The slot is free: a new query runs.
  StatementResult r = RunStatement(server->port(), "SELECT 1");
  EXPECT_EQ(r.final_state, "FINISHED") << r.failure << r.error.dump();
  server->Shutdown(0);
}

}  // namespace
}  // namespace qr::testing
