// /queries?json at scale (filters, sort, cursor paging, parameter validation) and the
// per-query page's data (/query_detail?json, /query_plan) against an in-process
// CoordinatorServer. The list basics and the page assets: debug-pages-test.cc.

#include <stdlib.h>

#include <atomic>
#include <cctype>
#include <future>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"
#include "service/queries-list.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class QueriesPageTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    setenv("TZ", ":/etc/localtime", /*overwrite=*/0);  // see debug-pages-test.cc
    ServiceTest::SetUpTestSuite();
  }
  void SetUp() override {
    CoordinatorServer::Options options = DefaultOptions();
    options.admin_users = "root";
    server_ = StartServer(std::move(options));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }

  json Get(const std::string& target, int expected_status = 200) {
    TestResponse r = TestHttpClient(port_).Get(target);
    EXPECT_EQ(r.status, expected_status) << target << ": " << r.body;
    return r.Json();
  }

  StatementResult Run(const std::string& sql, const std::string& user,
                      const std::string& source = "queries-page-test") {
    StatementOptions options;
    options.user = user;
    options.post_headers = {{"X-Trino-Source", source}};
    StatementResult result = RunStatement(port_, sql, options);
    EXPECT_TRUE(result.failure.empty()) << result.failure;
    return result;
  }

  static std::vector<std::string> Ids(const json& list) {
    std::vector<std::string> ids;
    for (const json& q : list) ids.push_back(q["query_id"]);
    return ids;
  }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

// GET /queries?json runs on --queries_list_threads, not on the HTTP I/O thread: while the
// listing thread is held, the only I/O thread still serves other requests; past
// --queries_list_max_pending a listing gets 503 naming the flag; held listings are answered
// once the thread goes on.
TEST_F(QueriesPageTest, ListingsRunOffTheIoThreadAndAreBounded) {
  server_->Shutdown(0);
  HeldPageWorkers held_workers;
  CoordinatorServer::Options options = DefaultOptions();
  options.http.num_threads = 1;
  options.queries_list.threads = 1;
  options.queries_list.max_pending = 2;
  held_workers.Install(&options);
  server_ = StartServer(std::move(options));
  ASSERT_NE(server_, nullptr);
  const std::string listing = "GET /queries?json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  TestHttpClient held(server_->port()), queued(server_->port());
  ASSERT_TRUE(held.Connect() && queued.Connect());
  ASSERT_TRUE(held.SendRaw(listing));
  ASSERT_TRUE(WaitFor([&] { return held_workers.entered() == 1; }, std::chrono::seconds(60)));
  ASSERT_TRUE(queued.SendRaw(listing));
  PageWorkers* workers = server_->queries_list_workers();
  ASSERT_TRUE(WaitFor([&] { return workers->pending() == 2; }, std::chrono::seconds(60)));

  TestResponse refused = TestHttpClient(server_->port()).Get("/queries?json");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.Header("Retry-After"), "1");
  EXPECT_NE(refused.body.find("--queries_list_max_pending=2"), std::string::npos)
      << refused.body;
  // The I/O thread is free: other requests are answered while the listing thread is held.
  EXPECT_EQ(TestHttpClient(server_->port()).Get("/v1/info").status, 200);
  const std::string metrics = TestHttpClient(server_->port()).Get("/metrics").body;
  EXPECT_NE(metrics.find("\nqr_queries_list_pending 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nqr_queries_list_rejected_total 1\n"), std::string::npos);

  held_workers.Release();
  for (TestHttpClient* c : {&held, &queued}) {
    TestResponse r = c->ReadResponse();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.Json().contains("completed")) << r.body;
  }
  EXPECT_EQ(held_workers.entered(), 2);
  EXPECT_TRUE(WaitFor([&] { return workers->pending() == 0; }, std::chrono::seconds(60)));
  EXPECT_EQ(workers->rejected(), 1u);
}

TEST_F(QueriesPageTest, FiltersByUserSourceStateAndStatementText) {
  StatementResult a1 = Run("SELECT n_name FROM nation", "alice", "airflow");
  StatementResult a2 = Run("SELECT * FROM no_such_table", "alice", "cli");
  StatementResult b1 = Run("select count(*) from NATION", "bob", "airflow");
  ASSERT_EQ(a2.final_state, "FAILED");

  json page = Get("/queries?json&user=alice");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{a2.id, a1.id}));
  EXPECT_EQ(page["completed_matched"], 2);
  page = Get("/queries?json&source=airflow");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{b1.id, a1.id}));
  page = Get("/queries?json&state=FAILED");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{a2.id}));
  page = Get("/queries?json&state=FINISHED,FAILED&user=bob");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{b1.id}));
  // ASCII case-insensitive, anywhere in the statement.
  page = Get("/queries?json&q=NaTiOn");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{b1.id, a1.id}));
  page = Get("/queries?json&q=nothing%20like%20this");
  EXPECT_TRUE(page["completed"].empty());
  EXPECT_EQ(page["next_cursor"], nullptr);
  // A filter that matches nothing leaves the server-wide totals alone.
  EXPECT_EQ(page["summary"]["submitted_total"], 3);
}

TEST_F(QueriesPageTest, TimeRangeIsHalfOpenOnTheSubmitTime) {
  StatementResult q = Run("SELECT 1", "alice");
  json all = Get("/queries?json");
  ASSERT_EQ(all["completed"].size(), 1u);
  const std::string start = all["completed"][0]["start_time"];  // ms precision, UTC
  EXPECT_EQ(Ids(Get("/queries?json&since=" + start)["completed"]),
            std::vector<std::string>{q.id});
  EXPECT_TRUE(Get("/queries?json&until=" + start)["completed"].empty());
  EXPECT_TRUE(Get("/queries?json&since=4102444800000")["completed"].empty());  // 2100
  EXPECT_EQ(Get("/queries?json&since=0&until=4102444800000")["completed"].size(), 1u);
  EXPECT_EQ(Get("/queries?json&until=2100-01-01T00:00Z")["completed"].size(), 1u);
}

TEST_F(QueriesPageTest, CursorPagesEveryRowOnceWhileQueriesKeepCompleting) {
  std::vector<std::string> ran;
  for (int i = 0; i < 7; ++i) ran.push_back(Run("SELECT " + std::to_string(i), "alice").id);
  std::vector<std::string> seen;
  std::string cursor;
  for (int pages = 0; pages < 10; ++pages) {
    json page = Get("/queries?json&limit=3" + (cursor.empty() ? "" : "&cursor=" + cursor));
    EXPECT_EQ(page["limit"], 3);
    EXPECT_LE(page["completed"].size(), 3u);
    for (const std::string& id : Ids(page["completed"])) seen.push_back(id);
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"];
    // A query completing between pages sorts before the cursor: no repeat, no gap.
    Run("SELECT 'late'", "bob");
  }
  std::vector<std::string> newest_first(ran.rbegin(), ran.rend());
  EXPECT_EQ(seen, newest_first);
}

TEST_F(QueriesPageTest, SortsByRowsAndDurationBothWays) {
  StatementResult few = Run("SELECT * FROM region", "alice");     // 5 rows
  StatementResult many = Run("SELECT * FROM nation", "alice");    // 25 rows
  StatementResult one = Run("SELECT 1", "alice");
  json page = Get("/queries?json&sort=rows");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{many.id, few.id, one.id}));
  page = Get("/queries?json&sort=rows&order=asc&limit=2");
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{one.id, few.id}));
  ASSERT_TRUE(page["next_cursor"].is_string());
  page = Get("/queries?json&sort=rows&order=asc&limit=2&cursor=" +
             page["next_cursor"].get<std::string>());
  EXPECT_EQ(Ids(page["completed"]), (std::vector<std::string>{many.id}));
  page = Get("/queries?json&sort=duration");
  ASSERT_EQ(page["completed"].size(), 3u);
  EXPECT_GE(page["completed"][0]["duration_ms"], page["completed"][1]["duration_ms"]);
  EXPECT_GE(page["completed"][1]["duration_ms"], page["completed"][2]["duration_ms"]);
}

TEST_F(QueriesPageTest, BadParametersAnswer400NamingTheParameter) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"state=BOGUS", "state"},       {"state=running", "state"},
      {"sort=user", "sort"},          {"order=up", "order"},
      {"limit=0", "limit"},           {"limit=1001", "limit"},
      {"limit=ten", "limit"},         {"cursor=nope", "cursor"},
      {"cursor=12.abc", "cursor"},    {"since=yesterday", "since"},
      {"until=2024-13-01T00:00Z", "until"}, {"q=" + std::string(1001, 'x'), "q"},
      // Past 2262-04-11 a time's nanoseconds do not fit in 64 bits.
      {"since=9300000000000", "since"},    {"until=9999-12-31T23:59Z", "until"},
  };
  for (const auto& [param, name] : bad) {
    json body = Get("/queries?json&" + param, 400);
    std::string message = body.value("error", "");
    EXPECT_EQ(message.rfind("Bad " + name, 0), 0u) << param << ": " << message;
  }
  EXPECT_TRUE(Get("/queries?json&since=9223372036854")["completed"].empty());  // the latest
  EXPECT_EQ(Get("/queries?json&limit=1000")["limit"], 1000);
  EXPECT_EQ(Get("/queries?json")["limit"], 100);
}

TEST(QueryListCursorTest, RoundTripsAndRejectsMalformed) {
  debug_pages::QueryListCursor c{1732612345123, UniqueId{0xabc, 0x1234}};
  debug_pages::QueryListCursor back;
  ASSERT_TRUE(debug_pages::DecodeCursor(debug_pages::EncodeCursor(c), &back));
  EXPECT_EQ(back.key, c.key);
  EXPECT_EQ(back.id, c.id);
  for (const char* bad : {"", ".", "1.", "x.0000000000000abc:0000000000001234",
                          "1.0000000000000abc", "1 .0000000000000abc:0000000000001234"}) {
    EXPECT_FALSE(debug_pages::DecodeCursor(bad, &back)) << bad;
  }
}

TEST(IgnoreCaseSearchTest, FindsWhatANaiveSearchFinds) {
  using debug_pages::IgnoreCaseSearch;
  EXPECT_TRUE(IgnoreCaseSearch("").FoundIn(""));
  EXPECT_TRUE(IgnoreCaseSearch("").FoundIn("abc"));
  EXPECT_FALSE(IgnoreCaseSearch("a").FoundIn(""));
  EXPECT_TRUE(IgnoreCaseSearch("LineItem").FoundIn("select * from LINEITEM where"));
  EXPECT_FALSE(IgnoreCaseSearch("lineitems").FoundIn("select * from lineitem"));
  // Prefixes that repeat: the search must fall back, not restart past a match.
  EXPECT_TRUE(IgnoreCaseSearch("aab").FoundIn("aaab"));
  EXPECT_TRUE(IgnoreCaseSearch("abab c").FoundIn("ababab c"));
  EXPECT_TRUE(IgnoreCaseSearch("\xC3\xA9t\xC3\xA9").FoundIn("l'\xC3\xA9t\xC3\xA9"));  // bytes
  // Against a naive search, over every needle and text of up to 7 letters of {a, B, b}.
  const std::string letters = "aBb";
  auto naive = [](std::string text, std::string needle) {
    for (char& c : text) c = static_cast<char>(std::tolower(c));
    for (char& c : needle) c = static_cast<char>(std::tolower(c));
    return text.find(needle) != std::string::npos;
  };
  auto words = [&](size_t max) {
    std::vector<std::string> out{""};
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].size() == max) continue;
      for (char c : letters) out.push_back(out[i] + c);
    }
    return out;
  };
  const std::vector<std::string> texts = words(7), needles = words(4);
  for (const std::string& needle : needles) {
    const IgnoreCaseSearch search(needle);
    for (const std::string& text : texts) {
      ASSERT_EQ(search.FoundIn(text), naive(text, needle)) << needle << " in " << text;
    }
  }
  // The case that cost a naive search 10^9 comparisons: found, and not found, at the end.
  const std::string needle = std::string(999, 'a') + "b";
  const std::string text(1 << 20, 'A');
  EXPECT_FALSE(IgnoreCaseSearch(needle).FoundIn(text));
  EXPECT_TRUE(IgnoreCaseSearch(needle).FoundIn(text + "B"));
}

TEST_F(QueriesPageTest, DetailHasTimelineCountersAndSession) {
  StatementOptions options;
  options.user = "alice";
  options.post_headers = {{"X-Trino-Source", "airflow"},
                          {"X-Trino-Client-Info", "nightly"},
                          {"X-Trino-Client-Tags", "etl, finance"}};
  StatementResult r = RunStatement(port_, "SELECT * FROM nation", options);
  ASSERT_EQ(r.final_state, "FINISHED") << r.failure;
  json q = Get("/query_detail?json&query_id=" + r.id);
  EXPECT_EQ(q["query_id"], r.id);
  EXPECT_EQ(q["state"], "FINISHED");
  EXPECT_EQ(q["terminal"], true);
  EXPECT_EQ(q["statement"], "SELECT * FROM nation");
  EXPECT_EQ(q["user"], "alice");
  EXPECT_EQ(q["source"], "airflow");
  EXPECT_EQ(q["client_info"], "nightly");
  EXPECT_EQ(q["client_tags"], (json{"etl", "finance"}));
  EXPECT_EQ(q["counters"]["rows_fetched"], kNationRows);
  EXPECT_GT(q["counters"]["bytes_fetched"], 0);
  const json& t = q["timeline"];
  for (const char* point : {"submitted", "executor_started", "first_row", "finished"}) {
    ASSERT_TRUE(t[point].is_string()) << point << ": " << t;
  }
  // ISO times of one format sort as text: submitted <= started <= first row <= finished.
  EXPECT_LE(t["submitted"].get<std::string>(), t["executor_started"].get<std::string>());
  EXPECT_LE(t["executor_started"].get<std::string>(), t["first_row"].get<std::string>());
  EXPECT_LE(t["first_row"].get<std::string>(), t["finished"].get<std::string>());
  EXPECT_TRUE(q["error"].is_null());
  EXPECT_TRUE(q["canceled_by"].is_null());

  Get("/query_detail?json&query_id=nope", 400);
  Get("/query_detail?json&query_id=0000000000000001:0000000000000000", 404);
  TestResponse html = TestHttpClient(port_).Get("/query_detail?query_id=" + r.id);
  EXPECT_EQ(html.status, 200);
  EXPECT_NE(html.body.find("/www/query.js"), std::string::npos);
}

TEST_F(QueriesPageTest, DetailShowsTheErrorPositionAndWhoCanceled) {
  StatementResult bad = Run("SELECT 1\nFROM nation WHERE WHERE", "alice");
  ASSERT_EQ(bad.final_state, "FAILED");
  json q = Get("/query_detail?json&query_id=" + bad.id);
  ASSERT_TRUE(q["error"].is_object()) << q;
  EXPECT_EQ(q["error"]["name"], "SYNTAX_ERROR");
  EXPECT_EQ(q["error"]["line"], 2) << q["error"];
  EXPECT_TRUE(q["error"]["column"].is_number()) << q["error"];

  StatementOptions options;
  options.user = "alice";
  StatementClient client(port_, options);
  ASSERT_EQ(client.Submit(kEndlessQuery).status, 200);
  const std::string id = client.result().id;
  Headers headers = {{"X-Trino-User", "alice"}};
  ASSERT_EQ(TestHttpClient(port_).Post("/cancel_query?query_id=" + id, "", headers).status, 200);
  q = Get("/query_detail?json&query_id=" + id);
  EXPECT_EQ(q["state"], "CANCELED");
  ASSERT_TRUE(q["canceled_by"].is_string()) << q;
  EXPECT_NE(q["canceled_by"].get<std::string>().find("'alice'"), std::string::npos);
  EXPECT_NE(q["canceled_by"].get<std::string>().find("/cancel_query"), std::string::npos);
}

TEST_F(QueriesPageTest, PlanExplainsSelectsWithoutRunningThemAndNotOtherStatements) {
  StatementResult sel = Run("SELECT n_name FROM nation WHERE n_nationkey = 3", "alice");
  StatementResult show = Run("SHOW TABLES", "alice");
  const int64_t submitted = server_->coordinator()->GetMetrics().submitted;

  json plan = Get("/query_plan?query_id=" + sel.id);
  ASSERT_TRUE(plan["plan"].is_string()) << plan;
  EXPECT_NE(plan["plan"].get<std::string>().find("nation"), std::string::npos) << plan;
  EXPECT_TRUE(plan["no_plan_reason"].is_null());

  plan = Get("/query_plan?query_id=" + show.id);
  EXPECT_TRUE(plan["plan"].is_null());
  EXPECT_NE(plan["no_plan_reason"].get<std::string>().find("SHOW"), std::string::npos) << plan;

  // An endless statement is explained, never run: the answer comes back.
  StatementOptions options;
  options.user = "alice";
  StatementClient client(port_, options);
  ASSERT_EQ(client.Submit(kEndlessQuery).status, 200);
  plan = Get("/query_plan?query_id=" + client.result().id);
  EXPECT_TRUE(plan["plan"].is_string()) << plan;

  // Each plan is an EXPLAIN query of its own, submitted like any statement (the SHOW's got
  // none): the endless query and two EXPLAINs; nothing is left running but the endless one.
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, submitted + 3);
  json explains = Get("/queries?json&source=coordinatord-query-plan&state=FINISHED");
  EXPECT_EQ(explains["completed"].size(), 2u) << explains;
  Headers headers = {{"X-Trino-User", "alice"}};
  ASSERT_EQ(TestHttpClient(port_)
                .Post("/cancel_query?query_id=" + client.result().id, "", headers)
                .status,
            200);
  EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }));
  Get("/query_plan?query_id=nope", 400);
}

}  // namespace
}  // namespace qr::testing
