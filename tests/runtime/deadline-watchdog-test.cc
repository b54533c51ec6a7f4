// The deadline watchdog: it interrupts a statement at its query's time limit wherever the
// statement is, including a row that neither loops nor allocates, which no check of the
// query runner sees.
#include "runtime/deadline-watchdog.h"

#include <chrono>
#include <memory>
#include <string>

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
using Clock = std::chrono::steady_clock;

TEST(DeadlineWatchdogTest, FiresEachPassedDeadlineOnceAndNeverADisarmedOne) {
  QueryExecMgr mgr;
  QueryStateHandle passed = NewUnrunQuery(&mgr);
  QueryStateHandle soon = NewUnrunQuery(&mgr);
  QueryStateHandle disarmed = NewUnrunQuery(&mgr);
  DeadlineWatchdog watchdog;
  // Armed latest first: each earlier deadline must wake the sleeping thread.
  watchdog.Arm(disarmed.get(), Clock::now() + std::chrono::hours(1));
  watchdog.Arm(soon.get(), Clock::now() + std::chrono::milliseconds(20));
  watchdog.Arm(passed.get(), Clock::now() - std::chrono::milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return watchdog.num_fired() == 2; }));
  watchdog.Disarm(disarmed.get());
  watchdog.Disarm(passed.get());  // already fired: a no-op
  EXPECT_EQ(watchdog.num_fired(), 2);
  // Interrupting a query with no statement running changes nothing.
  EXPECT_FALSE(passed->is_cancelled());
}

class DeadlineWatchdogEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteEngine::Options options;
    options.num_threads = 1;
    engine_ = StartEmptyDbEngine(dir_, options);
    ASSERT_NE(engine_, nullptr);
  }

  ScopedTempDir dir_;
  QueryExecMgr mgr_;
  std::unique_ptr<SqliteEngine> engine_;
};

// One row of 2000 `x + x` on a 1 MB digit string: each term copies x into a register that
// already has the room (no allocation) and converts it to a number twice, ~4 GB of digits in
// all (seconds). SQLite's progress handler runs only where a loop jumps back, and the
// checkpoints only in allocations and in our functions: only the watchdog stops this row.
// Before it, 20 queries end within their time limit: they were disarmed, so the watchdog's
// wake at the row's deadline (later than all of theirs) interrupts nothing else.
TEST_F(DeadlineWatchdogEngineTest, StopsARowThatNeitherLoopsNorAllocatesAtTheTimeLimit) {
  QueryContext quick;
  quick.exec_time_limit_ms = 200;
  for (int i = 0; i < 20; ++i) {
    QueryOutcome out = Drain(Submit(&mgr_, engine_.get(), "SELECT 1", quick));
    ASSERT_TRUE(out.ended);
    EXPECT_FALSE(out.error.has_value()) << out.error->message;
  }
  EXPECT_EQ(engine_->num_deadline_interrupts(), 0);

  std::string sql = "WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 1000000, '7')) SELECT ";
  constexpr int kTerms = 2000;
  for (int i = 0; i < kTerms; ++i) sql += (i > 0 ? ", x + x" : "x + x");
  sql += " FROM t";
  QueryContext ctx;
  ctx.exec_time_limit_ms = 300;
  auto q = Submit(&mgr_, engine_.get(), sql, ctx);
  QueryOutcome out = Drain(q);
  ASSERT_TRUE(out.ended);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->name, "EXCEEDED_TIME_LIMIT");
  EXPECT_EQ(out.error->message, "Query exceeded the maximum execution time limit of 300.00ms");
  EXPECT_EQ(engine_->num_deadline_interrupts(), 1);
  // Stopped inside the row (over 3 opcodes per term), not after it.
  EXPECT_LT(q->vm_steps.load(), kTerms);
}

}  // namespace
}  // namespace qr
