// LongQueryGate: at most N long queries of one user run at once; a further one waits for a
// turn, first come first served, and stops waiting on a cancel or at its deadline. Then
// through the engine: a user's third long query waits while another user's runs.
#include "runtime/long-query-gate.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime-test-util.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/sqlite-engine.h"
#include "testutil/wait.h"

namespace qr {
namespace {

using qr::testing::Drain;
using qr::testing::NewUnrunQuery;
using qr::testing::QueryOutcome;
using qr::testing::ScopedTempDir;
using qr::testing::StartEmptyDbEngine;
using qr::testing::Submit;
using qr::testing::SubmittedQuery;
using Clock = std::chrono::steady_clock;

/// Enter() on a thread of its own; 'result' is 1 (a turn), 0 (none) once it returned.
struct Parker {
  Parker(LongQueryGate* gate, QueryState* query,
         Clock::time_point deadline = Clock::time_point::max())
      : thread([this, gate, query, deadline] { result = gate->Enter(query, deadline) ? 1 : 0; }) {}
  ~Parker() {
    if (thread.joinable()) thread.join();
  }
  std::atomic<int> result{-1};
  std::thread thread;
};

TEST(LongQueryGateTest, AUsersTurnsAreHandedOverInOrderAndOtherUsersNeverWait) {
  QueryExecMgr mgr;
  LongQueryGate gate(1);
  QueryStateHandle a = NewUnrunQuery(&mgr, "alice");
  QueryStateHandle b = NewUnrunQuery(&mgr, "alice");
  QueryStateHandle c = NewUnrunQuery(&mgr, "alice");
  QueryStateHandle other = NewUnrunQuery(&mgr, "bob");
  ASSERT_TRUE(gate.Enter(a.get(), Clock::time_point::max()));
  Parker pb(&gate, b.get());
  ASSERT_TRUE(WaitFor([&] { return gate.num_parked() == 1; }));
  Parker pc(&gate, c.get());
  ASSERT_TRUE(WaitFor([&] { return gate.num_parked() == 2; }));
  // Another user's long query has turns of its own.
  EXPECT_TRUE(gate.Enter(other.get(), Clock::time_point::max()));
  EXPECT_EQ(gate.num_parked(), 2);

  gate.Leave(a.get());  // to b, the first parked
  ASSERT_TRUE(WaitFor([&] { return pb.result.load() == 1; }));
  EXPECT_EQ(pc.result.load(), -1);
  EXPECT_EQ(gate.num_parked(), 1);
  gate.Leave(b.get());
  ASSERT_TRUE(WaitFor([&] { return pc.result.load() == 1; }));
  gate.Leave(c.get());
  gate.Leave(other.get());
  EXPECT_EQ(gate.num_parked(), 0);
  EXPECT_EQ(gate.num_parks(), 2);
  // Every turn came back: alice runs at once again.
  QueryStateHandle d = NewUnrunQuery(&mgr, "alice");
  EXPECT_TRUE(gate.Enter(d.get(), Clock::time_point::max()));
  gate.Leave(d.get());
  EXPECT_EQ(gate.num_parks(), 2);
}

TEST(LongQueryGateTest, AParkedQueryStopsWaitingWhenCanceledOrAtItsDeadline) {
  QueryExecMgr mgr;
  LongQueryGate gate(1);
  QueryStateHandle holder = NewUnrunQuery(&mgr, "alice");
  QueryStateHandle canceled = NewUnrunQuery(&mgr, "alice");
  QueryStateHandle late = NewUnrunQuery(&mgr, "alice");
  ASSERT_TRUE(gate.Enter(holder.get(), Clock::time_point::max()));
  {
    Parker p(&gate, canceled.get());
    ASSERT_TRUE(WaitFor([&] { return gate.num_parked() == 1; }));
    canceled->Cancel(QueryError::UserCanceled());
    ASSERT_TRUE(WaitFor([&] { return p.result.load() == 0; }));
  }
  // A query canceled before it asked does not wait at all.
  EXPECT_FALSE(gate.Enter(canceled.get(), Clock::time_point::max()));
  {
    const Clock::time_point start = Clock::now();
    Parker p(&gate, late.get(), start + std::chrono::milliseconds(50));
    ASSERT_TRUE(WaitFor([&] { return p.result.load() == 0; }));
    EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  }
  EXPECT_EQ(gate.num_parked(), 0);
  // Neither took the turn: the holder's Leave() frees it for the next query.
  gate.Leave(holder.get());
  QueryStateHandle next = NewUnrunQuery(&mgr, "alice");
  EXPECT_TRUE(gate.Enter(next.get(), Clock::time_point::max()));
  gate.Leave(next.get());
}

TEST(LongQueryGateTest, DisabledNeverParks) {
  QueryExecMgr mgr;
  LongQueryGate gate(0);
  EXPECT_FALSE(gate.enabled());
  QueryStateHandle a = NewUnrunQuery(&mgr, "alice");
  EXPECT_FALSE(gate.Enter(a.get(), Clock::time_point::max()));
  EXPECT_EQ(gate.num_parks(), 0);
}

class LongQueryGateEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteEngine::Options options;
    options.num_threads = 4;
    // Long after 5 ms; no priority change (the gate does not need the demoter).
    options.long_query.after_ms = 5;
    options.long_query.nice_increment = 0;
    options.max_long_queries_per_user = 1;
    engine_ = StartEmptyDbEngine(dir_, options);
    ASSERT_NE(engine_, nullptr);
  }

  SubmittedQuery SubmitAs(const std::string& user, const std::string& sql) {
    QueryContext ctx;
    ctx.user = user;
    return Submit(&mgr_, engine_.get(), sql, ctx);
  }

  /// Waits until 'q' has surely asked for its turn: 5 million VM steps take far longer than
  /// the 5 ms after which it asks (every 1000 steps from then on).
  static ::testing::AssertionResult AskedForATurn(const SubmittedQuery& q) {
    return WaitFor([&] { return q->vm_steps.load() > 5'000'000; });
  }

  ScopedTempDir dir_;
  QueryExecMgr mgr_;
  std::unique_ptr<SqliteEngine> engine_;
};

// Runs until canceled.
constexpr const char* kEndless =
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT max(i) FROM c";

TEST_F(LongQueryGateEngineTest, AUsersSecondLongQueryWaitsWhileAnotherUsersRuns) {
  SubmittedQuery first = SubmitAs("alice", kEndless);
  ASSERT_TRUE(AskedForATurn(first));
  SubmittedQuery second = SubmitAs("alice", kEndless);
  ASSERT_TRUE(WaitFor([&] { return engine_->num_long_queries_parked() == 1; }));
  // Bob's long query is not parked: it progresses while Alice's second waits.
  SubmittedQuery bob = SubmitAs("bob", kEndless);
  ASSERT_TRUE(WaitFor([&] { return bob->vm_steps.load() > 1'000'000; }));
  EXPECT_EQ(engine_->num_long_queries_parked(), 1);
  EXPECT_EQ(engine_->num_long_query_parks(), 1);
  // Alice's short queries do not wait for her turns.
  QueryContext alice;
  alice.user = "alice";
  QueryOutcome quick = Drain(Submit(&mgr_, engine_.get(), "SELECT 42", alice));
  ASSERT_TRUE(quick.ended);
  EXPECT_EQ(quick.RowsJson(), "[[42]]");

  // A cancel ends the parked query at once, while the first still runs.
  const int64_t parked_steps = second->vm_steps.load();
  second->Cancel(QueryError::UserCanceled());
  QueryOutcome out = Drain(second);
  ASSERT_TRUE(out.ended);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->name, "USER_CANCELED");
  EXPECT_EQ(first->exec_state(), QueryState::ExecState::kRunning);
  EXPECT_EQ(engine_->num_long_queries_parked(), 0);
  // It did not run while parked: its count may lag by the steps between two samples (64k).
  EXPECT_LE(second->vm_steps.load(), parked_steps + 65'000);

  // A parked query runs to its end once the turn comes back.
  SubmittedQuery third =
      SubmitAs("alice",
               "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300000) "
               "SELECT max(i) FROM c");
  ASSERT_TRUE(WaitFor([&] { return engine_->num_long_queries_parked() == 1; }));
  first->Cancel(QueryError::UserCanceled());
  QueryOutcome done = Drain(third);
  ASSERT_TRUE(done.ended);
  EXPECT_FALSE(done.error.has_value()) << done.error->message;
  EXPECT_EQ(done.RowsJson(), "[[300000]]");
  EXPECT_EQ(engine_->num_long_query_parks(), 2);
  bob->Cancel(QueryError::UserCanceled());
  EXPECT_TRUE(Drain(first).ended);
  EXPECT_TRUE(Drain(bob).ended);
}

TEST_F(LongQueryGateEngineTest, AParkedQueryEndsAtItsTimeLimit) {
  SubmittedQuery first = SubmitAs("alice", kEndless);
  ASSERT_TRUE(AskedForATurn(first));
  QueryContext ctx;
  ctx.user = "alice";
  ctx.exec_time_limit_ms = 200;
  SubmittedQuery limited = Submit(&mgr_, engine_.get(), kEndless, ctx);
  QueryOutcome out = Drain(limited);
  ASSERT_TRUE(out.ended);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->name, "EXCEEDED_TIME_LIMIT");
  EXPECT_EQ(engine_->num_long_query_parks(), 1);
  EXPECT_EQ(engine_->num_long_queries_parked(), 0);
  first->Cancel(QueryError::UserCanceled());
  EXPECT_TRUE(Drain(first).ended);
}

}  // namespace
}  // namespace qr
