#include "service/query-coordinator.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "../runtime/runtime-test-util.h"
#include "runtime/sample-db.h"

namespace qr {
namespace {

using State = ClientRequestState::State;
using Outcome = ClientRequestState::FetchOutcome;
using testing::ScopedTempDir;

constexpr char kForever[] =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

/// The coordinator core on the sample database, without HTTP.
class QueryCoordinatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    ASSERT_TRUE(EnsureSampleDatabase(dir_->path(), 0.001, &db_path_).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  void Start(QueryCoordinator::Options opts) {
    exec_mgr_ = std::make_unique<QueryExecMgr>(8);
    SqliteEngine::Options eo;
    eo.database_path = db_path_;
    eo.num_threads = 2;
    ASSERT_TRUE(SqliteEngine::Create(eo, &engine_).ok());
    opts.num_shards = 8;
    coord_ = std::make_unique<QueryCoordinator>(opts, exec_mgr_.get(), engine_.get());
  }

  void TearDown() override {
    // The engine first: its executor threads call the coordinator back until joined.
    engine_.reset();
    coord_.reset();
    if (exec_mgr_) {
      EXPECT_TRUE(exec_mgr_->WaitForDrain(10000));
    }
  }

  ClientRequestStatePtr Submit(const std::string& sql, const std::string& user = "u") {
    SessionInfo s;
    s.user = user;
    return coord_->Submit(std::make_shared<const std::string>(sql), s);
  }

  /// Fetches 'token', waiting (on the request's waiter, bounded) until a page is ready.
  Outcome FetchWait(const ClientRequestStatePtr& req, int64_t token,
                    QueryPage* page) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto woken = std::make_shared<std::atomic<bool>>(false);
      uint64_t waiter = 0;
      Outcome o = coord_->Fetch(req, token, true, [woken] { woken->store(true); }, page, &waiter);
      if (o != Outcome::kWait) return o;
      if (!WaitFor([&] { return woken->load(); }, std::chrono::milliseconds(200))) {
        req->RemoveWaiter(waiter);
      }
    }
    ADD_FAILURE() << "no page within 60 s";
    return Outcome::kNotFound;
  }

  /// Runs a request to its final page; returns the rows and the final page.
  int64_t Drain(const ClientRequestStatePtr& req, QueryPage* last) {
    int64_t rows = 0;
    for (int64_t token = 0;; ++token) {
      EXPECT_EQ(FetchWait(req, token, last), Outcome::kPage);
      if (last->page) rows += last->page->num_rows;
      if (!last->next_token) return rows;
      EXPECT_EQ(*last->next_token, token + 1);
    }
  }

  static ScopedTempDir* dir_;
  static std::string db_path_;
  std::unique_ptr<QueryExecMgr> exec_mgr_;
  std::unique_ptr<SqliteEngine> engine_;
  std::unique_ptr<QueryCoordinator> coord_;
};

ScopedTempDir* QueryCoordinatorTest::dir_ = nullptr;
std::string QueryCoordinatorTest::db_path_;

TEST_F(QueryCoordinatorTest, QueryRunsToFinishedAndMovesToTheLog) {
  Start({});
  auto req = Submit("SELECT * FROM nation");
  QueryPage last;
  EXPECT_EQ(Drain(req, &last), 25);
  EXPECT_STREQ(last.state, "FINISHED");
  EXPECT_FALSE(last.error.has_value());
  EXPECT_EQ(coord_->registry().Count(), 0u);
  ASSERT_EQ(coord_->Completed().size(), 1u);
  EXPECT_EQ(coord_->Find(req->query_id()), req) << "completed queries stay findable";
  QueryCoordinator::Metrics m = coord_->GetMetrics();
  EXPECT_EQ(m.submitted, 1);
  EXPECT_EQ(m.finished, 1);
  // The client can read the last page before the executor thread's final callback releases
  // the admission slot: wait for it rather than race it (CI caught the race).
  EXPECT_TRUE(WaitFor([&] { return coord_->GetMetrics().running == 0; })) << "slot released";
  int64_t sum = 0;
  EXPECT_EQ(coord_->LatencyHistogram(&sum).back(), 1);
}

TEST_F(QueryCoordinatorTest, RetriedTokenReturnsTheSameSharedPage) {
  Start({});
  auto req = Submit("SELECT n_name FROM nation");
  QueryPage first;
  int64_t token = 0;
  do {  // skip answers without rows
    ASSERT_EQ(FetchWait(req, token, &first), Outcome::kPage);
    ++token;
  } while (!first.page);
  QueryPage again;
  ASSERT_EQ(FetchWait(req, token - 1, &again), Outcome::kPage);
  ASSERT_TRUE(again.page.has_value());
  EXPECT_EQ(again.page->json_rows.get(), first.page->json_rows.get()) << "shared, not copied";
  EXPECT_EQ(again.next_token, first.next_token);
  QueryPage p;
  ASSERT_EQ(FetchWait(req, token, &p), Outcome::kPage);
  EXPECT_EQ(coord_->Fetch(req, token - 1, false, nullptr, &p, nullptr), Outcome::kGone);
  EXPECT_EQ(coord_->Fetch(req, token + 5, false, nullptr, &p, nullptr), Outcome::kNotFound);
}

TEST_F(QueryCoordinatorTest, QueryCanceledBeforeItsAdmissionCountsNothing) {
  // Registered (so a DELETE or kill_query finds it) and canceled before it is admitted: it
  // must not take an in-flight count that its completion, already past, would never return.
  QueryCoordinator::Options o;
  o.max_in_flight_queries = 1;
  o.max_in_flight_queries_per_user = 1;
  bool cancel_next = true;
  o.after_register_for_testing = [&](const ClientRequestStatePtr& req) {
    if (std::exchange(cancel_next, false)) {
      ASSERT_TRUE(coord_->Cancel(req->query_id()).ok());
    }
  };
  Start(o);
  auto canceled = Submit(kForever);
  EXPECT_EQ(canceled->state(), State::kCanceled);
  QueryCoordinator::Metrics m = coord_->GetMetrics();
  EXPECT_EQ(m.in_flight, 0);
  EXPECT_EQ(m.users_in_flight, 0);
  EXPECT_EQ(m.queued, 0);
  // The one in-flight slot is free: the next query runs (before the fix: QUERY_QUEUE_FULL).
  auto next = Submit("SELECT 1");
  QueryPage last;
  Drain(next, &last);
  EXPECT_EQ(next->state(), State::kFinished);
  EXPECT_FALSE(last.error.has_value());
  // The canceled one still answers its client with the cancel.
  EXPECT_EQ(FetchWait(canceled, 0, &last), Outcome::kPage);
  ASSERT_TRUE(last.error.has_value());
  EXPECT_EQ(last.error->name, "USER_CANCELED");
}

TEST_F(QueryCoordinatorTest, CancelingAQueuedQueryWhosePollIsParkedForgetsItsUser) {
  QueryCoordinator::Options o;
  o.max_running_queries = 1;
  Start(o);
  auto running = Submit(kForever, "a");
  auto queued = Submit("SELECT 1", "b");
  ASSERT_EQ(coord_->GetMetrics().queued, 1);
  // A long poll parked on the queued query; the cancel wakes it, and it fetches the final
  // page at once (as the statement service does), before the query leaves the queue.
  QueryPage woken_page;
  Outcome woken = Outcome::kWait;
  uint64_t waiter = 0;
  QueryPage page;
  ASSERT_EQ(coord_->Fetch(
                queued, 0, true,
                [&] { woken = coord_->Fetch(queued, 0, false, nullptr, &woken_page, nullptr); },
                &page, &waiter),
            Outcome::kWait);
  ASSERT_TRUE(coord_->Cancel(queued->query_id()).ok());
  EXPECT_EQ(woken, Outcome::kPage);
  EXPECT_FALSE(woken_page.next_token.has_value());
  // Only user a is left (before the fix, b's empty entry stayed until b's next query).
  QueryCoordinator::Metrics m = coord_->GetMetrics();
  EXPECT_EQ(m.queued, 0);
  EXPECT_EQ(m.users_in_flight, 1);
  EXPECT_FALSE(coord_->OtherUsersInFlight("a"));
  ASSERT_TRUE(coord_->Cancel(running->query_id()).ok());
  QueryPage last;
  EXPECT_EQ(FetchWait(running, 0, &last), Outcome::kPage);
  // Its running slot is released by the executor's last callback, maybe after the fetch.
  EXPECT_TRUE(WaitFor([&] { return coord_->GetMetrics().users_in_flight == 0; }));
}

TEST_F(QueryCoordinatorTest, AdmissionQueuesThenRejectsWithQueueFull) {
  QueryCoordinator::Options o;
  o.max_running_queries = 1;
  o.max_queued_queries = 1;
  Start(o);
  auto running = Submit(kForever);
  auto queued = Submit("SELECT 1");
  auto rejected = Submit("SELECT 1");
  QueryPage p;
  ASSERT_EQ(FetchWait(rejected, 0, &p), Outcome::kPage);
  ASSERT_TRUE(p.error.has_value());
  EXPECT_EQ(p.error->name, "QUERY_QUEUE_FULL");
  EXPECT_EQ(p.error->code, 131074);
  EXPECT_FALSE(p.next_token.has_value());
  EXPECT_EQ(queued->state(), State::kQueued);
  EXPECT_EQ(coord_->GetMetrics().queued, 1);
  ASSERT_TRUE(coord_->Cancel(running->query_id()).ok());
  // The slot frees once the canceled execution ends; the queued query then runs.
  QueryPage last;
  EXPECT_EQ(Drain(queued, &last), 1);
  EXPECT_STREQ(last.state, "FINISHED");
  ASSERT_TRUE(WaitFor([&] { return coord_->GetMetrics().running == 0; }));
}

TEST_F(QueryCoordinatorTest, CanceledQueuedQueriesLeaveTheQueueAndSlotsAreNotLeaked) {
  QueryCoordinator::Options o;
  o.max_running_queries = 1;
  o.max_queued_queries = 4;
  o.query_log_size = 1;  // completed requests are evicted at once
  Start(o);
  auto running = Submit(kForever);
  for (int round = 0; round < 3; ++round) {
    std::vector<ClientRequestStatePtr> queued;
    for (int i = 0; i < 4; ++i) queued.push_back(Submit("SELECT 1"));
    EXPECT_EQ(coord_->GetMetrics().queued, 4);
    for (auto& q : queued) ASSERT_TRUE(coord_->Cancel(q->query_id()).ok());
    EXPECT_EQ(coord_->GetMetrics().queued, 0) << "canceled requests must leave the queue";
  }
  ASSERT_TRUE(coord_->Cancel(running->query_id()).ok());
  running.reset();  // only the coordinator's own references remain, and the log evicts it
  for (int i = 0; i < 3; ++i) {
    QueryPage p;
    EXPECT_EQ(Drain(Submit("SELECT 1"), &p), 1);  // pushes the canceled one out of the log
  }
  // The slot of the evicted, canceled query must come back: a new query runs.
  auto next = Submit("SELECT 2");
  QueryPage last;
  EXPECT_EQ(Drain(next, &last), 1);
  EXPECT_STREQ(last.state, "FINISHED");
}

TEST_F(QueryCoordinatorTest, CancelEndsARunningQueryAsUserCanceled) {
  Start({});
  auto req = Submit(kForever);
  ASSERT_TRUE(WaitFor([&] { return req->exec_elapsed_ms() >= 0; }));
  ASSERT_TRUE(coord_->Cancel(req->query_id()).ok());
  EXPECT_TRUE(coord_->Cancel(req->query_id()).ok()) << "cancel is idempotent";
  QueryPage last;
  Drain(req, &last);
  EXPECT_STREQ(last.state, "FAILED");
  ASSERT_TRUE(last.error.has_value());
  EXPECT_EQ(last.error->name, "USER_CANCELED");
  EXPECT_EQ(last.error->message, "Query was canceled");
  EXPECT_EQ(coord_->GetMetrics().canceled, 1);
  EXPECT_EQ(coord_->Cancel(GenerateQueryId()).code(), StatusCode::kNotFound);
}

// queuedTimeMillis ends when an executor thread starts the statement, not when a poll first
// sees it running (a query that started at once used to report 6 s queued after one
// maxWait=5s poll).
TEST_F(QueryCoordinatorTest, QueuedTimeEndsWhenTheExecutorStarts) {
  Start({});
  auto req = Submit(kForever);
  // Nobody polls: the protocol state stays QUEUED while the executor runs the statement.
  ASSERT_TRUE(WaitFor([&] { return req->exec_elapsed_ms() >= 300; }));
  const int64_t exec_ms = req->exec_elapsed_ms();  // read first: it ends before 'info' is read
  ClientRequestState::Info info = req->GetInfo();
  EXPECT_EQ(info.state, ClientRequestState::State::kQueued);
  EXPECT_LE(info.queued_ms + exec_ms, info.elapsed_ms)
      << "queued " << info.queued_ms << " ms, executing " << exec_ms << " ms, elapsed "
      << info.elapsed_ms << " ms";
  ASSERT_TRUE(coord_->Cancel(req->query_id()).ok());
  QueryPage last;
  Drain(req, &last);
}

// Found while chasing an RSS failure of the soak test: a canceled (or abandoned) query in the
// completed-query log kept the rows of the last page its client had fetched, for a retry of
// that token.
TEST_F(QueryCoordinatorTest, CanceledQueryInTheLogKeepsNoRows) {
  Start({});
  auto req = Submit("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                    "SELECT x FROM c");
  QueryPage first;
  int64_t token = 0;
  do {  // skip answers without rows
    ASSERT_EQ(FetchWait(req, token, &first), Outcome::kPage);
    ++token;
  } while (!first.page);
  ASSERT_TRUE(coord_->Cancel(req->query_id()).ok());
  EXPECT_EQ(coord_->registry().Count(), 0u);
  ASSERT_EQ(coord_->Completed().size(), 1u);
  QueryPage again;
  ASSERT_EQ(FetchWait(req, token - 1, &again), Outcome::kPage) << "a retry still answers";
  EXPECT_FALSE(again.page.has_value()) << "the logged query still holds its last page's rows";
  EXPECT_EQ(again.next_token, first.next_token);
  QueryPage last;
  ASSERT_EQ(FetchWait(req, token, &last), Outcome::kPage);
  EXPECT_STREQ(last.state, "FAILED");
  ASSERT_TRUE(last.error.has_value());
  EXPECT_EQ(last.error->name, "USER_CANCELED");
}

TEST_F(QueryCoordinatorTest, IdleQueryIsAbandoned) {
  QueryCoordinator::Options o;
  o.idle_query_timeout_ms = 100;
  o.expiration_interval_ms = 10;
  Start(o);
  auto req = Submit(kForever);
  ASSERT_TRUE(WaitFor([&] { return ClientRequestState::IsTerminal(req->state()); }));
  ClientRequestState::Info info = req->GetInfo();
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "ABANDONED_QUERY");
  // The expiration thread makes the state terminal, then moves the request to the log.
  EXPECT_TRUE(WaitFor([&] { return coord_->registry().Count() == 0; })) << "left the registry";
  ASSERT_TRUE(WaitFor([&] { return exec_mgr_->num_live() == 0; })) << "execution stopped";
}

TEST_F(QueryCoordinatorTest, ExecTimeLimitFailsTheQuery) {
  QueryCoordinator::Options o;
  o.exec_time_limit_ms = 100;
  Start(o);
  auto req = Submit(kForever);
  QueryPage last;
  Drain(req, &last);
  ASSERT_TRUE(last.error.has_value());
  EXPECT_EQ(last.error->name, "EXCEEDED_TIME_LIMIT");
}

TEST_F(QueryCoordinatorTest, ShutdownCancelsRunningAndRefusesNewQueries) {
  QueryCoordinator::Options o;
  o.max_running_queries = 1;
  Start(o);
  auto running = Submit(kForever);
  auto queued = Submit("SELECT 1");
  ASSERT_TRUE(WaitFor([&] { return running->exec_elapsed_ms() >= 0; }));
  EXPECT_EQ(coord_->Shutdown(50), 1);
  EXPECT_TRUE(coord_->shutting_down());
  for (const auto& req : {running, queued, Submit("SELECT 1")}) {
    QueryPage last;
    Drain(req, &last);
    ASSERT_TRUE(last.error.has_value());
    EXPECT_EQ(last.error->name, "SERVER_SHUTTING_DOWN");
  }
  QueryCoordinator::Metrics m = coord_->GetMetrics();
  EXPECT_EQ(m.submitted, 3);
  EXPECT_EQ(m.finished + m.failed + m.canceled, m.submitted);
}

TEST_F(QueryCoordinatorTest, QueryLogIsBounded) {
  QueryCoordinator::Options o;
  o.query_log_size = 3;
  Start(o);
  std::vector<ClientRequestStatePtr> reqs;
  for (int i = 0; i < 5; ++i) {
    reqs.push_back(Submit("SELECT " + std::to_string(i)));
    QueryPage last;
    Drain(reqs.back(), &last);
  }
  auto log = coord_->Completed();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log.front(), reqs.back()) << "newest first";
  EXPECT_EQ(coord_->Find(reqs.front()->query_id()), nullptr) << "evicted";
}

TEST_F(QueryCoordinatorTest, AnErrorNotFetchedYetOutlivesTheLogsSize) {
  // A query that fails before it runs completes at once, before its client's first GET:
  // the queries completing meanwhile must not push its error out of reach.
  QueryCoordinator::Options o;
  o.query_log_size = 2;
  Start(o);
  auto failed = Submit("SET SESSION no_such_property = 'x'");
  ASSERT_EQ(failed->state(), State::kFailed);
  std::vector<ClientRequestStatePtr> others;
  for (int i = 0; i < 3; ++i) {
    others.push_back(Submit("SELECT " + std::to_string(i)));
    QueryPage last;
    Drain(others.back(), &last);
  }
  EXPECT_EQ(coord_->Find(failed->query_id()), failed);
  EXPECT_EQ(coord_->Find(others[0]->query_id()), nullptr) << "fetched: evicted as before";
  QueryPage page;
  ASSERT_EQ(FetchWait(failed, 0, &page), Outcome::kPage);
  ASSERT_TRUE(page.error.has_value());
  EXPECT_EQ(page.error->name, "INVALID_SESSION_PROPERTY");
  // Fetched now: the expiration pass drops it.
  coord_->ExpireQueries();
  EXPECT_EQ(coord_->Find(failed->query_id()), nullptr);
  // Unfetched errors are kept up to --query_log_size of them besides the log, not more.
  std::vector<ClientRequestStatePtr> unfetched;
  for (int i = 0; i < 5; ++i) unfetched.push_back(Submit("SET SESSION nope = 'x'"));
  EXPECT_EQ(coord_->Completed().size(), 2u);
  EXPECT_EQ(coord_->Find(unfetched[0]->query_id()), nullptr);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(coord_->Find(unfetched[i]->query_id()), unfetched[i]);
}

}  // namespace
}  // namespace qr
