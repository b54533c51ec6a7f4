// The whole retained query history is browsable: /queries?json (filters, sort, cursor paging)
// and system.runtime.completed_queries list the queries past the in-memory completed-query
// log, read from the segments through the history's index.

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/webserver.h"
#include "service/debug-pages.h"
#include "service/page-workers.h"
#include "service/queries-list.h"
#include "service/query-history.h"
#include "service-test-util.h"
#include "test-client.h"
#include "testutil/wait.h"

namespace qr::testing {
namespace {

using Json = nlohmann::json;

constexpr int kQueries = 30;
constexpr int kLogSize = 4;

class QueryHistoryListTest : public ServiceTest {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-history-list-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    history_dir_ = tmpl;
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(history_dir_, ec);
  }
  CoordinatorServer::Options WithHistory() const {
    CoordinatorServer::Options o = DefaultOptions();
    o.history.dir = history_dir_;
    // Small segments: the queries span several, read with one pread per range.
    o.history.segment_bytes = 2000;
    o.coordinator.query_log_size = kLogSize;
    return o;
  }
  /// Runs kQueries statements: every third fails, users alternate; waits until written.
  void RunQueries() {
    for (int i = 0; i < kQueries; ++i) {
      StatementOptions o;
      o.user = i % 2 == 0 ? "alice" : "bob";
      const std::string sql = i % 3 == 2 ? "SELECT * FROM missing_" + std::to_string(i)
                                         : "SELECT " + std::to_string(i) + " AS n";
      StatementResult r = RunStatement(server_->port(), sql, o);
      ASSERT_EQ(r.final_state, i % 3 == 2 ? "FAILED" : "FINISHED") << sql << r.failure;
      ids_.push_back(r.id);  // oldest first
    }
    ASSERT_TRUE(WaitFor([&] { return server_->history()->index().size() == kQueries; }));
  }
  Json List(debug_pages::QueryListParams params) {
    return Json::parse(debug_pages::RenderQueriesJson(*server_->coordinator(), 100, {}, params));
  }
  /// Every completed row of the list, page by page.
  std::vector<std::string> PageThrough(debug_pages::QueryListParams params, int* pages) {
    std::vector<std::string> out;
    *pages = 0;
    for (;;) {
      Json page = List(params);
      ++*pages;
      EXPECT_LE(page["completed"].size(), params.limit);
      for (const Json& q : page["completed"]) out.push_back(q["query_id"]);
      if (page["next_cursor"].is_null()) break;
      debug_pages::QueryListCursor cursor;
      EXPECT_TRUE(debug_pages::DecodeCursor(page["next_cursor"].get<std::string>(), &cursor));
      params.cursor = cursor;
      if (*pages > 100) break;
    }
    return out;
  }

  std::string history_dir_;
  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::string> ids_;
};

TEST_F(QueryHistoryListTest, ListsEveryRetainedQueryPastTheLogAcrossARestart) {
  server_ = StartServer(WithHistory());
  ASSERT_NE(server_, nullptr);
  RunQueries();
  for (bool restarted : {false, true}) {
    SCOPED_TRACE(restarted ? "after a restart" : "before a restart");
    ASSERT_EQ(server_->coordinator()->Completed().size(), static_cast<size_t>(kLogSize));
    debug_pages::QueryListParams params;
    params.limit = 7;
    Json first = List(params);
    EXPECT_EQ(first["completed_matched"], kQueries);
    EXPECT_EQ(first["summary"]["completed_in_history"], kQueries);
    // Newest first, each once, across the log and the history.
    int pages = 0;
    std::vector<std::string> listed = PageThrough(params, &pages);
    std::vector<std::string> expected(ids_.rbegin(), ids_.rend());
    EXPECT_EQ(listed, expected);
    EXPECT_EQ(pages, (kQueries + 6) / 7);
    // Oldest first.
    params.ascending = true;
    EXPECT_EQ(PageThrough(params, &pages), ids_);
    // Filters over both: a user, a state, both.
    params = {};
    params.limit = 4;
    params.user = "bob";
    std::vector<std::string> bobs = PageThrough(params, &pages);
    EXPECT_EQ(bobs.size(), static_cast<size_t>(kQueries / 2));
    params.states = {"FAILED"};
    std::vector<std::string> failed = PageThrough(params, &pages);
    std::vector<std::string> expected_failed;
    for (int i = kQueries - 1; i >= 0; --i) {
      if (i % 2 == 1 && i % 3 == 2) expected_failed.push_back(ids_[i]);
    }
    EXPECT_EQ(failed, expected_failed);
    params = {};
    params.states = {"RUNNING"};
    EXPECT_EQ(List(params)["completed_matched"], 0);
    // A row of the history carries what the record kept.
    params = {};
    params.limit = 1;
    params.ascending = true;
    Json oldest = List(params)["completed"][0];
    EXPECT_EQ(oldest["query_id"], ids_[0]);
    EXPECT_EQ(oldest["user"], "alice");
    EXPECT_EQ(oldest["statement"], "SELECT 0 AS n");
    EXPECT_EQ(oldest["state"], "FINISHED");
    EXPECT_EQ(oldest["rows_fetched"], 1);
    // Sort by rows: the finished queries (one row) before the failed (none).
    params = {};
    params.sort = debug_pages::QuerySortKey::kRows;
    params.limit = 5;
    std::vector<std::string> by_rows = PageThrough(params, &pages);
    ASSERT_EQ(by_rows.size(), static_cast<size_t>(kQueries));
    EXPECT_EQ(std::set<std::string>(by_rows.begin(), by_rows.end()).size(),
              static_cast<size_t>(kQueries));
    std::set<std::string> failed_ids;
    for (int i = 2; i < kQueries; i += 3) failed_ids.insert(ids_[i]);
    EXPECT_EQ(std::set<std::string>(by_rows.end() - kQueries / 3, by_rows.end()), failed_ids);
    if (!restarted) {
      server_->Shutdown(0);
      server_.reset();
      server_ = StartServer(WithHistory());
      ASSERT_NE(server_, nullptr);
    }
  }
}

TEST_F(QueryHistoryListTest, TextSearchReadsABoundedNumberOfRecordsPerRequest) {
  server_ = StartServer(WithHistory());
  ASSERT_NE(server_, nullptr);
  RunQueries();
  debug_pages::QueryListParams params;
  params.text = "missing_";
  params.limit = 3;
  params.max_scan = 5;
  // At most 5 records of the history per request: the answers may hold fewer rows than the
  // limit (marked partial), and the cursor continues the scan until every match is found.
  Json first = List(params);
  EXPECT_LE(first["completed"].size(), 3u);
  int pages = 0;
  std::vector<std::string> found = PageThrough(params, &pages);
  std::vector<std::string> expected;
  for (int i = kQueries - 1; i >= 0; --i) {
    if (i % 3 == 2) expected.push_back(ids_[i]);
  }
  EXPECT_EQ(found, expected);
  EXPECT_GE(pages, (kQueries - kLogSize) / 5);
  // A search that reads everything at once is complete in one answer.
  params.max_scan = 1000;
  params.limit = 100;
  Json all = List(params);
  EXPECT_EQ(all["completed"].size(), expected.size());
  EXPECT_EQ(all["completed_matched"], expected.size());
  EXPECT_FALSE(all["completed_partial"].get<bool>());
  EXPECT_TRUE(all["next_cursor"].is_null());
}

TEST_F(QueryHistoryListTest, AnyListReadsABoundedNumberOfHistoryBytesPerRequest) {
  // A page of 1,000 records of 1 MiB statements was read, decoded and held at once (1 GB per
  // request). Here the budget is one byte: each answer reads one record of the history (the
  // first always), is marked partial, and the cursor goes on until every row was listed.
  server_ = StartServer(WithHistory());
  ASSERT_NE(server_, nullptr);
  RunQueries();
  debug_pages::QueryListParams params;
  params.limit = 7;
  params.max_scan_bytes = 1;
  Json first = List(params);
  EXPECT_TRUE(first["completed_partial"].get<bool>()) << first.dump();
  EXPECT_LE(first["completed"].size(), static_cast<size_t>(kLogSize) + 1);
  int pages = 0;
  EXPECT_EQ(PageThrough(params, &pages), std::vector<std::string>(ids_.rbegin(), ids_.rend()));
  EXPECT_GE(pages, kQueries - kLogSize);
  // With the default budget one answer holds the page.
  params.max_scan_bytes = debug_pages::kMaxHistoryScanBytes;
  Json whole = List(params);
  EXPECT_FALSE(whole["completed_partial"].get<bool>());
  EXPECT_EQ(whole["completed"].size(), 7u);
}

TEST_F(QueryHistoryListTest, SqlAndTheDetailPageReachTheWholeHistory) {
  server_ = StartServer(WithHistory());
  ASSERT_NE(server_, nullptr);
  RunQueries();
  StatementResult count = RunStatement(
      server_->port(), "SELECT count(*), count(DISTINCT query_id), sum(state = 'FAILED'), "
                       "count(started) FROM system.runtime.completed_queries");
  ASSERT_EQ(count.final_state, "FINISHED") << count.failure;
  ASSERT_EQ(count.rows.size(), 1u);
  EXPECT_EQ(count.rows[0][0], kQueries);
  EXPECT_EQ(count.rows[0][1], kQueries);
  EXPECT_EQ(count.rows[0][2], kQueries / 3);
  EXPECT_EQ(count.rows[0][3], kQueries);
  StatementResult oldest = RunStatement(
      server_->port(), "SELECT query_id, user, query, rows FROM system.runtime.completed_queries "
                       "WHERE query_id = '" + ids_[0] + "'");
  ASSERT_EQ(oldest.final_state, "FINISHED") << oldest.failure;
  ASSERT_EQ(oldest.rows.size(), 1u);
  EXPECT_EQ(oldest.rows[0][0], ids_[0]);
  EXPECT_EQ(oldest.rows[0][1], "alice");
  EXPECT_EQ(oldest.rows[0][2], "SELECT 0 AS n");
  EXPECT_EQ(oldest.rows[0][3], 1);
  // The per-query page of a query only the history still has.
  TestHttpClient client(server_->port());
  TestResponse detail = client.Get("/query_detail?json&query_id=" + ids_[0]);
  ASSERT_EQ(detail.status, 200) << detail.body;
  Json q = detail.Json();
  EXPECT_EQ(q["query_id"], ids_[0]);
  EXPECT_EQ(q["statement"], "SELECT 0 AS n");
  EXPECT_FALSE(q["timeline"]["executor_started"].is_null());
  TestResponse statement = client.Get("/query_statement?query_id=" + ids_[1]);
  ASSERT_EQ(statement.status, 200);
  EXPECT_EQ(statement.body, "SELECT 1 AS n");
}

// The per-query pages of a query only the history has read its record on the listing threads,
// never on the HTTP I/O thread (one here): with the listing thread held, the I/O thread still
// answers, a query in memory is answered at once, one more history read than
// --queries_list_max_pending gets 503 naming the flag, and the held ones are answered once it
// goes on.
TEST_F(QueryHistoryListTest, PagesOfQueriesInTheHistoryAreReadOffTheIoThread) {
  HeldPageWorkers held_workers;
  CoordinatorServer::Options options = WithHistory();
  options.http.num_threads = 1;
  options.queries_list.threads = 1;
  options.queries_list.max_pending = 2;
  held_workers.Install(&options);
  server_ = StartServer(std::move(options));
  ASSERT_NE(server_, nullptr);
  RunQueries();
  const std::string detail = "GET /query_detail?json&query_id=" + ids_[0] +
                             " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trino-User: alice\r\n\r\n";
  const std::string statement = "GET /query_statement?query_id=" + ids_[1] +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trino-User: bob\r\n\r\n";
  TestHttpClient held(server_->port()), queued(server_->port());
  ASSERT_TRUE(held.Connect() && queued.Connect());
  ASSERT_TRUE(held.SendRaw(detail));
  ASSERT_TRUE(WaitFor([&] { return held_workers.entered() == 1; }));
  ASSERT_TRUE(queued.SendRaw(statement));
  PageWorkers* workers = server_->queries_list_workers();
  ASSERT_TRUE(WaitFor([&] { return workers->pending() == 2; }));

  TestHttpClient client(server_->port());
  TestResponse refused = client.Get("/query_plan?query_id=" + ids_[2]);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.Header("Retry-After"), "1");
  EXPECT_NE(refused.body.find("--queries_list_max_pending=2"), std::string::npos)
      << refused.body;
  // The I/O thread is free, and a query still in the log needs no history read.
  EXPECT_EQ(client.Get("/v1/info").status, 200);
  TestResponse in_log = client.Get("/query_statement?query_id=" + ids_.back());
  EXPECT_EQ(in_log.status, 200) << in_log.body;
  EXPECT_EQ(held_workers.entered(), 1);

  held_workers.Release();
  TestResponse d = held.ReadResponse();
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.Json()["statement"], "SELECT 0 AS n");
  TestResponse st = queued.ReadResponse();
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.body, "SELECT 1 AS n");
  EXPECT_EQ(held_workers.entered(), 2);
  EXPECT_TRUE(WaitFor([&] { return workers->pending() == 0; }));
  EXPECT_EQ(workers->rejected(), 1u);
}

}  // namespace
}  // namespace qr::testing
