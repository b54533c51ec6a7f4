// The durable query history inside a real CoordinatorServer: completed queries are recorded
// and shown again by the next server over the same directory.

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "service/debug-pages.h"
#include "service/query-history.h"
#include "service-test-util.h"
#include "testutil/wait.h"

namespace qr::testing {
namespace {

class QueryHistoryServerTest : public ServiceTest {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-history-server-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    history_dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(history_dir_, ec);
  }
  CoordinatorServer::Options WithHistory(int query_log_size = 200) const {
    CoordinatorServer::Options o = DefaultOptions();
    o.history.dir = history_dir_ + "/history";  // created by the server
    o.coordinator.query_log_size = query_log_size;
    return o;
  }

  std::string history_dir_;
};

TEST_F(QueryHistoryServerTest, CompletedQueriesAreShownAgainAfterARestart) {
  auto server = StartServer(WithHistory());
  ASSERT_NE(server, nullptr);
  // Canceled by someone before its client fetched anything: the record keeps who and when.
  SessionInfo carol;
  carol.user = "carol";
  auto canceled = server->coordinator()->Submit(
      std::make_shared<const std::string>("SELECT 42"), carol);
  ASSERT_TRUE(server->coordinator()->CancelRequest(canceled, QueryError::UserCanceled(),
                                                   "user 'dave' (/cancel_query)"));
  StatementOptions alice;
  alice.user = "alice";
  alice.post_headers = {{"X-Trino-Source", "history-test"}, {"X-Trino-Client-Info", "ci"}};
  StatementResult ok = RunStatement(server->port(), "SELECT r_name FROM region", alice);
  ASSERT_EQ(ok.final_state, "FINISHED") << ok.failure;
  StatementResult bad = RunStatement(server->port(), "SELECT * FROM no_such_table");
  ASSERT_EQ(bad.final_state, "FAILED");
  StatementResult last = RunStatement(server->port(), "SELECT 3");
  ASSERT_EQ(last.final_state, "FINISHED");
  // Written, then synced by the sync thread (--query_history_sync=batch).
  ASSERT_TRUE(WaitFor([&] {
    const QueryHistory::Stats stats = server->history()->GetStats();
    return stats.records == 4 && stats.syncs >= 1;
  }));
  EXPECT_EQ(server->history()->GetStats().dropped, 0);
  server->Shutdown(0);
  server.reset();

  server = StartServer(WithHistory());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->history_restored().records, 4);
  auto completed = server->coordinator()->Completed();  // newest first
  ASSERT_EQ(completed.size(), 4u);
  EXPECT_EQ(PrintId(completed[0]->query_id()), last.id);
  EXPECT_EQ(PrintId(completed[2]->query_id()), ok.id);
  EXPECT_EQ(completed[2]->user(), "alice");
  EXPECT_EQ(completed[2]->session().source, "history-test");
  EXPECT_EQ(completed[2]->session().client_info, "ci");
  EXPECT_EQ(*completed[2]->statement(), "SELECT r_name FROM region");
  ClientRequestState::Info info = completed[2]->GetInfo();
  EXPECT_EQ(info.state, ClientRequestState::State::kFinished);
  EXPECT_EQ(info.rows_delivered, kRegionRows);
  EXPECT_TRUE(info.end_wall_time.has_value());
  // The whole timeline survives (record version 2), to the nanosecond of the submission.
  ASSERT_TRUE(info.exec_start_wall_time.has_value());
  ASSERT_TRUE(info.first_row_wall_time.has_value());
  // (Recorded in milliseconds: the start may read up to 1 ms before the exact submission.)
  EXPECT_LE(completed[2]->submit_wall_time(),
            *info.exec_start_wall_time + std::chrono::milliseconds(1));
  EXPECT_LE(*info.exec_start_wall_time, *info.first_row_wall_time + std::chrono::milliseconds(1));
  EXPECT_EQ(completed[3]->query_id(), canceled->query_id());
  EXPECT_EQ(completed[3]->submit_wall_time(), canceled->submit_wall_time());
  ClientRequestState::Info canceled_info = completed[3]->GetInfo();
  EXPECT_EQ(canceled_info.state, ClientRequestState::State::kCanceled);
  EXPECT_EQ(canceled_info.canceled_by, "user 'dave' (/cancel_query)");
  EXPECT_TRUE(canceled_info.end_wall_time.has_value());
  ClientRequestState::Info failed = completed[1]->GetInfo();
  EXPECT_EQ(failed.state, ClientRequestState::State::kFailed);
  ASSERT_TRUE(failed.error.has_value());
  EXPECT_EQ(failed.error->name, bad.error_name());
  // Find() sees restored queries; the pages list them.
  EXPECT_NE(server->coordinator()->Find(completed[1]->query_id()), nullptr);
  auto page =
      nlohmann::json::parse(debug_pages::RenderQueriesJson(*server->coordinator(), 100, {}));
  ASSERT_EQ(page["completed"].size(), 4u);
  EXPECT_EQ(page["completed"][2]["query_id"], ok.id);
  EXPECT_EQ(page["completed"][2]["state"], "FINISHED");
  EXPECT_EQ(page["completed"][2]["rows_fetched"], kRegionRows);
  EXPECT_NE(debug_pages::RenderMetrics(server.get()).find("qr_history_restored_records 4\n"),
            std::string::npos);
  server->Shutdown(0);
  server.reset();

  // A smaller query log restores only the newest.
  server = StartServer(WithHistory(/*query_log_size=*/2));
  ASSERT_NE(server, nullptr);
  completed = server->coordinator()->Completed();
  ASSERT_EQ(completed.size(), 2u);
  EXPECT_EQ(PrintId(completed[0]->query_id()), last.id);
}

TEST_F(QueryHistoryServerTest, OffByDefault) {
  auto server = StartServer(DefaultOptions());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->history(), nullptr);
  EXPECT_NE(debug_pages::RenderMetrics(server.get()).find("qr_history_enabled 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace qr::testing
