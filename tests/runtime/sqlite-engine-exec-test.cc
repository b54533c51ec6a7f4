// SqliteEngine: cancellation, the time and buffer limits, queueing, concurrency and the files
// it refuses to open (sqlite-engine-test.cc: types, pages and errors).

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sqlite-engine-test-fixture.h"

namespace qr {
namespace sqlite_engine_test {

/// Runs 'per_thread' queries on each of 'threads' threads at once, each query read to its end
/// before the thread submits the next: "SELECT n + <plus_sql>" for a number n unique to the
/// query, expected to answer n + 'plus'. Returns the queries that answered so; then expects
/// the engine to be idle.
int SqliteEngineTest::RunConcurrently(int threads, int per_thread, const std::string& plus_sql,
                                      int plus) {
  std::atomic<int> ok{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const int n = t * 1000 + i;
        QueryOutcome out = Run("SELECT " + std::to_string(n) + " + " + plus_sql);
        if (out.ended && !out.error && out.RowsJson() == "[[" + std::to_string(n + plus) + "]]") {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : running) t.join();
  EXPECT_TRUE(WaitFor([&] { return engine_->num_running() == 0 && engine_->num_queued() == 0; }));
  return ok.load();
}

}  // namespace sqlite_engine_test

namespace {

using qr::testing::Drain;
using qr::testing::Submit;
using sqlite_engine_test::ExecState;
using sqlite_engine_test::Json;
using sqlite_engine_test::kEndless;
using sqlite_engine_test::kTenMillionRows;
using sqlite_engine_test::QueryOutcome;
using sqlite_engine_test::SqliteEngineTest;

TEST_F(SqliteEngineTest, CancelStopsARunningStatement) {
  auto q = Submit(&mgr_, engine_.get(), kEndless);
  ASSERT_TRUE(WaitFor([&] { return q->exec_state() == ExecState::kRunning; }));
  EXPECT_TRUE(q->Cancel(QueryError::UserCanceled()));
  ASSERT_TRUE(WaitFor([&] { return q->exec_state() == ExecState::kCancelled; }));
  QueryOutcome out = Drain(q);
  ASSERT_TRUE(out.ended);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->name, "USER_CANCELED");
  EXPECT_EQ(out.error->code, 3);
  EXPECT_EQ(out.error->message, "Query was canceled");
  EXPECT_TRUE(out.pages.empty());
}

TEST_F(SqliteEngineTest, TimeLimitFailsTheQuery) {
  QueryContext ctx;
  ctx.exec_time_limit_ms = 200;
  auto q = Submit(&mgr_, engine_.get(), kEndless, ctx);
  QueryOutcome out = Drain(q);
  ASSERT_TRUE(out.ended);
  EXPECT_EQ(out.state, ExecState::kFailed);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->name, "EXCEEDED_TIME_LIMIT");
  EXPECT_EQ(out.error->code, 131075);
  EXPECT_EQ(out.error->type, ErrorType::kInsufficientResources);
  EXPECT_EQ(out.error->message, "Query exceeded the maximum execution time limit of 200.00ms");
  EXPECT_TRUE(q->is_cancelled());
}

TEST_F(SqliteEngineTest, UnreadResultsBlockTheProducerWithinTheBufferLimit) {
  QueryContext ctx;
  ctx.result_buffer_max_bytes = 64 << 10;
  ctx.result_buffer_max_rows = 1 << 30;
  ctx.page_max_bytes = 8 << 10;
  ctx.page_max_rows = 1 << 30;
  auto q = Submit(&mgr_, engine_.get(), kTenMillionRows, ctx);
  ResultBuffer* buf = q->result_buffer();
  // Full: the next page would not fit, so the producer waits in Put().
  ASSERT_TRUE(WaitFor([&] { return buf->buffered_bytes() > (64 << 10) - (8 << 10) - 64; }));
  EXPECT_LE(buf->peak_buffered_bytes(), (64 << 10) + (8 << 10) + 64);
  const int64_t produced = q->rows_produced.load();
  EXPECT_LE(produced, buf->buffered_rows() + 8 * 1024) << "at most one page beyond the buffer";
  EXPECT_EQ(q->exec_state(), ExecState::kRunning);
  q->Cancel(QueryError::UserCanceled());
  ASSERT_TRUE(WaitFor([&] { return q->exec_state() == ExecState::kCancelled; }));
  EXPECT_LE(buf->peak_buffered_bytes(), (64 << 10) + (8 << 10) + 64);
  EXPECT_LT(q->rows_produced.load(), 1'000'000);
}

TEST_F(SqliteEngineTest, QueuedQueriesWaitForAFreeThreadAndCanBeCancelled) {
  engine_ = MakeEngine(sample_path_, 1);
  auto running = Submit(&mgr_, engine_.get(), kEndless);
  ASSERT_TRUE(WaitFor([&] { return running->exec_state() == ExecState::kRunning; }));
  auto queued = Submit(&mgr_, engine_.get(), "SELECT 1");
  EXPECT_EQ(queued->exec_state(), ExecState::kQueued);
  EXPECT_EQ(engine_->num_queued(), 1);
  EXPECT_EQ(engine_->num_running(), 1);
  queued->Cancel(QueryError::UserCanceled());
  running->Cancel(QueryError::UserCanceled());
  QueryOutcome out = Drain(queued);
  EXPECT_EQ(out.state, ExecState::kCancelled);
  EXPECT_EQ(out.error->name, "USER_CANCELED");
  EXPECT_EQ(queued->rows_produced.load(), 0);
  EXPECT_EQ(Drain(running).state, ExecState::kCancelled);
}

TEST_F(SqliteEngineTest, DestroyingTheEngineCancelsQueuedAndRunningQueries) {
  engine_ = MakeEngine(sample_path_, 1);
  auto running = Submit(&mgr_, engine_.get(), kEndless);
  ASSERT_TRUE(WaitFor([&] { return running->exec_state() == ExecState::kRunning; }));
  auto queued = Submit(&mgr_, engine_.get(), kEndless);
  engine_.reset();
  for (const auto* q : {&running, &queued}) {
    EXPECT_EQ((*q)->exec_state(), ExecState::kCancelled);
    QueryOutcome out = Drain(*q);
    ASSERT_TRUE(out.ended);
    EXPECT_EQ(out.error->name, "USER_CANCELED");
  }
}

TEST_F(SqliteEngineTest, ManyConcurrentQueriesAllComplete) {
  EXPECT_EQ(RunConcurrently(4, 25, "count(*) FROM nation", 25), 4 * 25);
}

// Executors go idle between queries and are woken one at a time through their own wake
// words: more submitters than executors, each query waited for before the next, so most
// submissions find an idle executor and a few race with executors going idle or finishing.
// A lost wake-up leaves a query queued with executors asleep (Run()'s bounded wait fails).
TEST_F(SqliteEngineTest, IdleExecutorsAreWokenForEveryQuery) {
  engine_ = MakeEngine(sample_path_, 3);
  EXPECT_EQ(RunConcurrently(6, 60, "0", 0), 6 * 60);
  // With every executor asleep, destroying the engine wakes and joins them.
  engine_.reset();
}

TEST_F(SqliteEngineTest, CreateRejectsMissingUnusableAndNonSqliteFiles) {
  std::unique_ptr<SqliteEngine> engine;
  const std::string missing = dir_->path() + "/missing.db";
  Status st = SqliteEngine::Create({missing, 1}, &engine);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find(missing), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file"), std::string::npos) << st.message();

  st = SqliteEngine::Create({dir_->path(), 1}, &engine);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("is a directory"), std::string::npos) << st.message();

  const std::string text = dir_->path() + "/not-a-db.txt";
  std::ofstream(text) << std::string(4096, 'x');
  st = SqliteEngine::Create({text, 1}, &engine);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not a database"), std::string::npos) << st.message();
  EXPECT_EQ(engine, nullptr);
}

TEST_F(SqliteEngineTest, CreateRejectsAnUnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const std::string path = dir_->path() + "/unreadable.db";
  std::filesystem::copy_file(sample_path_, path);
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  std::unique_ptr<SqliteEngine> engine;
  Status st = SqliteEngine::Create({path, 1}, &engine);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Permission denied"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace qr
