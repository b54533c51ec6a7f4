// Integration tests of the debug pages (/queries, /queries?json, /query_statement,
// /cancel_query, /healthz, /varz, /, /www/) against an in-process CoordinatorServer.
// /metrics: metrics-page-test.cc.

#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include "service-test-util.h"
#include "service/debug-pages.h"
#include "service/www-assets.h"

DECLARE_string(www_dir);

DEFINE_string(debug_pages_test_api_token, "hunter2", "A secret that /varz must not show.");

namespace qr::testing {
namespace {

/// glog timestamps every LOG line through mktime(), which re-reads TZ (free + strdup) under a
/// glibc lock that TSan cannot see: with TZ unset, two threads logging at once are reported as
/// a race. Naming the default zone explicitly (same local time) makes glibc skip the re-read.
/// Call before any thread starts.
void AvoidTzsetFalsePositive() { setenv("TZ", ":/etc/localtime", /*overwrite=*/0); }

using nlohmann::json;

class DebugPagesTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    AvoidTzsetFalsePositive();
    ServiceTest::SetUpTestSuite();
  }
  void SetUp() override {
    CoordinatorServer::Options options = DefaultOptions();
    options.admin_users = " root , ops";
    server_ = StartServer(std::move(options));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }

  json QueriesJson() {
    TestResponse r = TestHttpClient(port_).Get("/queries?json");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("Content-Type").rfind("application/json", 0), 0u);
    return r.Json();
  }

  /// The entry of 'id' in the list 'list' ("in_flight" or "completed") of /queries?json, or
  /// null.
  json FindQuery(const std::string& list, const std::string& id) {
    json page = QueriesJson();
    for (const json& q : page[list]) {
      if (q["query_id"] == id) return q;
    }
    return nullptr;
  }

  /// Submits an endless query as 'user' and waits until the page shows it RUNNING.
  std::unique_ptr<StatementClient> StartEndless(const std::string& user,
                                                std::string sql = kEndlessQuery) {
    StatementOptions options;
    options.user = user;
    options.post_headers = {{"X-Trino-Source", "debug-pages-test"}};
    auto client = std::make_unique<StatementClient>(port_, options);
    TestResponse r = client->Submit(sql);
    EXPECT_EQ(r.status, 200) << r.body;
    const std::string id = client->result().id;
    EXPECT_TRUE(WaitFor([&] {
      json q = FindQuery("in_flight", id);
      return q.is_object() && q["state"] == "RUNNING";
    })) << "query " << id << " never showed as RUNNING";
    return client;
  }

  TestResponse Cancel(const std::string& id, const std::string& user) {
    Headers headers;
    if (!user.empty()) headers.emplace_back("X-Trino-User", user);
    return TestHttpClient(port_).Post("/cancel_query?query_id=" + id, "", headers);
  }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

/// True for "YYYY-MM-DDTHH:MM:SS.mmmZ".
bool IsIsoTime(const json& value) {
  if (!value.is_string()) return false;
  const std::string s = value;
  const std::string shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (s.size() != shape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (shape[i] == 'd' ? !isdigit(static_cast<unsigned char>(s[i])) : s[i] != shape[i]) {
      return false;
    }
  }
  return true;
}

TEST_F(DebugPagesTest, JsonShowsRunningQueryThenCanceledInCompleted) {
  auto client = StartEndless("alice");
  const std::string id = client->result().id;
  json page = QueriesJson();
  EXPECT_GE(page["summary"]["in_flight"].get<int>(), 1);
  EXPECT_EQ(page["summary"]["running"], 1);
  EXPECT_GE(page["summary"]["submitted_total"].get<int>(), 1);
  EXPECT_EQ(page["query_stmt_size"], 250);
  json q = FindQuery("in_flight", id);
  ASSERT_TRUE(q.is_object());
  EXPECT_EQ(q["user"], "alice");
  EXPECT_EQ(q["source"], "debug-pages-test");
  EXPECT_EQ(q["statement"], kEndlessQuery);
  EXPECT_EQ(q["statement_length"], std::string(kEndlessQuery).size());
  EXPECT_EQ(q["statement_truncated"], false);
  EXPECT_TRUE(IsIsoTime(q["start_time"])) << q;
  EXPECT_TRUE(q["end_time"].is_null());
  EXPECT_TRUE(q["error"].is_null());
  EXPECT_GE(q["duration_ms"].get<int64_t>(), 0);
  EXPECT_EQ(q["rows_fetched"], 0);
  EXPECT_TRUE(q["rows_produced"].is_number_integer());

  TestResponse r = Cancel(id, "alice");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["canceled"], true);
  EXPECT_EQ(r.Json()["query_id"], id);
  EXPECT_TRUE(FindQuery("in_flight", id).is_null());
  json done = FindQuery("completed", id);
  ASSERT_TRUE(done.is_object());
  EXPECT_EQ(done["state"], "CANCELED");
  EXPECT_TRUE(IsIsoTime(done["end_time"])) << done;
  EXPECT_GE(done["end_time"].get<std::string>(), done["start_time"].get<std::string>());
  EXPECT_EQ(done["error"]["name"], "USER_CANCELED");
  EXPECT_EQ(QueriesJson()["summary"]["canceled_total"], 1);
}

TEST_F(DebugPagesTest, CancelThroughTheEndpointStopsTheQueryForItsClient) {
  auto client = StartEndless("alice");
  ASSERT_EQ(Cancel(client->result().id, "alice").status, 200);
  while (!client->done() && client->result().failure.empty()) client->Advance();
  EXPECT_EQ(client->result().final_state, "FAILED");
  EXPECT_EQ(client->result().error_name(), "USER_CANCELED");
  // The executor side is released too: nothing keeps running.
  EXPECT_TRUE(WaitFor([&] { return server_->exec_mgr()->num_live() == 0; }));
  EXPECT_EQ(server_->coordinator()->GetMetrics().running, 0);
}

TEST_F(DebugPagesTest, FinishedAndFailedQueriesListedWithEndTimeAndError) {
  StatementResult ok = RunStatement(port_, "SELECT 1");
  ASSERT_EQ(ok.final_state, "FINISHED") << ok.failure;
  StatementResult bad = RunStatement(port_, "SELECT * FROM no_such_table");
  ASSERT_EQ(bad.final_state, "FAILED") << bad.failure;
  json page = QueriesJson();
  ASSERT_EQ(page["completed"].size(), 2u);
  // Newest first.
  EXPECT_EQ(page["completed"][0]["query_id"], bad.id);
  EXPECT_EQ(page["completed"][1]["query_id"], ok.id);
  json f = page["completed"][1];
  EXPECT_EQ(f["state"], "FINISHED");
  EXPECT_EQ(f["rows_fetched"], 1);
  EXPECT_TRUE(f["error"].is_null());
  EXPECT_TRUE(IsIsoTime(f["end_time"])) << f;
  json e = page["completed"][0];
  EXPECT_EQ(e["state"], "FAILED");
  EXPECT_EQ(e["error"]["name"], bad.error_name());
  EXPECT_NE(e["error"]["message"].get<std::string>().find("no_such_table"), std::string::npos);
  EXPECT_EQ(page["summary"]["completed_in_log"], 2);
  EXPECT_EQ(page["summary"]["finished_total"], 1);
  EXPECT_EQ(page["summary"]["failed_total"], 1);
}

TEST_F(DebugPagesTest, InFlightListedNewestFirst) {
  auto first = StartEndless("alice");
  auto second = StartEndless("bob");
  json page = QueriesJson();
  ASSERT_EQ(page["in_flight"].size(), 2u);
  EXPECT_EQ(page["in_flight"][0]["query_id"], second->result().id);
  EXPECT_EQ(page["in_flight"][1]["query_id"], first->result().id);
}

TEST_F(DebugPagesTest, LongStatementTruncatedByCharactersWithFullTextOnDemand) {
  // 2-byte characters: a byte-based cut would split one; the listing counts characters.
  std::string sql = std::string(kEndlessQuery) + " /* ";
  for (int i = 0; i < 100; ++i) sql += "é日";
  sql += " */";
  auto client = StartEndless("alice", sql);
  const std::string id = client->result().id;
  json q = FindQuery("in_flight", id);
  ASSERT_TRUE(q.is_object());
  EXPECT_EQ(q["statement_truncated"], true);
  EXPECT_EQ(q["statement_length"], debug_pages::CountChars(sql));
  EXPECT_EQ(q["statement_length"], std::string(kEndlessQuery).size() + 4 + 200 + 3);
  std::string shown = q["statement"];
  EXPECT_EQ(debug_pages::CountChars(shown), 250u);
  EXPECT_EQ(sql.compare(0, shown.size(), shown), 0);

  TestResponse full = TestHttpClient(port_).Get("/query_statement?query_id=" + id);
  ASSERT_EQ(full.status, 200);
  EXPECT_EQ(full.body, sql);
  EXPECT_EQ(full.Header("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(full.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(TestHttpClient(port_).Get("/query_statement?query_id=nope").status, 400);
  EXPECT_EQ(TestHttpClient(port_)
                .Get("/query_statement?query_id=0000000000000001:0000000000000000")
                .status,
            404);
}

TEST(DebugPagesTruncateTest, NeverSplitsACharacterAndCountsStrayBytesAsOne) {
  EXPECT_EQ(debug_pages::TruncateChars("abc", 2), "ab");
  EXPECT_EQ(debug_pages::TruncateChars("a\xC3\xA9z", 2), "a\xC3\xA9");
  EXPECT_EQ(debug_pages::TruncateChars("\xF0\x9F\x8E\x89x", 1), "\xF0\x9F\x8E\x89");
  EXPECT_EQ(debug_pages::TruncateChars("ab", 5), "ab");
  EXPECT_EQ(debug_pages::CountChars("a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x8E\x89"), 4u);
  EXPECT_EQ(debug_pages::CountChars("\x80\x80"), 2u);  // stray continuation bytes
  EXPECT_EQ(debug_pages::CountChars("\xC3"), 1u);      // truncated sequence
}

TEST_F(DebugPagesTest, CancelAnswersErrorCodes) {
  auto client = StartEndless("alice");
  const std::string id = client->result().id;
  TestResponse get = TestHttpClient(port_).Get("/cancel_query?query_id=" + id);
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("Allow"), "POST");
  TestResponse bad = Cancel("12%3Cb%3Ezz", "alice");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.Json()["error"].get<std::string>().find("'12<b>zz'"), std::string::npos)
      << bad.body;
  EXPECT_EQ(Cancel("", "alice").status, 400);
  EXPECT_EQ(TestHttpClient(port_).Post("/cancel_query", "", {{"X-Trino-User", "a"}}).status,
            400);
  TestResponse unknown = Cancel("0123456789abcdef:0000000000000000", "alice");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.Json()["error"].get<std::string>().find("0123456789abcdef"),
            std::string::npos);
  EXPECT_EQ(Cancel(id, "").status, 401);
  TestResponse other = Cancel(id, "mallory");
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.Json()["error"].get<std::string>().find("mallory"), std::string::npos);
  EXPECT_EQ(FindQuery("in_flight", id)["state"], "RUNNING");  // 403 canceled nothing
  // An admin of --admin_users (" root , ops": spaces trimmed) may cancel anyone's query.
  TestResponse admin = Cancel(id, "ops");
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.Json()["canceled"], true);
  // Canceling an ended query: 200, nothing canceled, its state.
  TestResponse again = Cancel(id, "alice");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.Json()["canceled"], false);
  EXPECT_EQ(again.Json()["state"], "CANCELED");
}

TEST_F(DebugPagesTest, CancelUserFromPrestoHeaderButNeverFromCredentialsAlone) {
  auto a = StartEndless("alice");
  auto b = StartEndless("bob");
  // Browsers attach cached Basic credentials to a cross-site form post; only a custom header
  // (which such a form cannot send) makes a cancel.
  TestResponse basic = TestHttpClient(port_).Post(
      "/cancel_query?query_id=" + a->result().id, "",
      {{"Authorization", "Basic " + Base64Encode("alice:")}});
  EXPECT_EQ(basic.status, 403) << basic.body;
  EXPECT_NE(basic.Json()["error"].get<std::string>().find("X-Trino-User"), std::string::npos);
  EXPECT_EQ(FindQuery("in_flight", a->result().id)["state"], "RUNNING");
  TestResponse presto = TestHttpClient(port_).Post("/cancel_query?query_id=" + b->result().id,
                                                   "", {{"X-Presto-User", "bob"}});
  EXPECT_EQ(presto.status, 200) << presto.body;
}

TEST_F(DebugPagesTest, CrossOriginCancelIsRefused) {
  auto a = StartEndless("alice");
  const std::string target = "/cancel_query?query_id=" + a->result().id;
  TestResponse foreign = TestHttpClient(port_).Post(
      target, "", {{"X-Trino-User", "alice"}, {"Origin", "https://evil.example"}});
  EXPECT_EQ(foreign.status, 403) << foreign.body;
  // Refused by the webserver (http/http-origin.h), before any handler or authentication.
  EXPECT_NE(foreign.body.find("evil.example"), std::string::npos) << foreign.body;
  EXPECT_EQ(FindQuery("in_flight", a->result().id)["state"], "RUNNING");
  TestResponse forwarded_elsewhere = TestHttpClient(port_).Post(
      target, "",
      {{"X-Trino-User", "alice"}, {"Origin", "https://evil.example"},
       {"X-Forwarded-Host", "db.example:443"}});
  EXPECT_EQ(forwarded_elsewhere.status, 403) << forwarded_elsewhere.body;
  // Behind a proxy that rewrites Host, X-Forwarded-Host names the browser's host.
  auto b = StartEndless("alice");
  TestResponse proxied = TestHttpClient(port_).Post(
      "/cancel_query?query_id=" + b->result().id, "",
      {{"X-Trino-User", "alice"}, {"Origin", "https://db.example"},
       {"X-Forwarded-Host", "db.example"}});
  EXPECT_EQ(proxied.status, 200) << proxied.body;
  // The page's own fetch() carries an Origin naming the server itself (the client sends
  // Host: 127.0.0.1:port).
  TestResponse same = TestHttpClient(port_).Post(
      target, "",
      {{"X-Trino-User", "alice"}, {"Origin", "http://127.0.0.1:" + std::to_string(port_)}});
  EXPECT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(same.Json()["canceled"], true);
}

TEST_F(DebugPagesTest, UntrustedTextComesBackVerbatimAsJsonNeverAsMarkup) {
  const std::vector<std::string> hostile = {
      "<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>",
      "Grüße, 日本語, emoji 🎉, RTL \u05e9\u05dc\u05d5\u05dd"};
  std::vector<std::string> ids;
  for (const std::string& text : hostile) {
    StatementOptions options;
    options.user = text;
    options.post_headers = {{"X-Trino-Source", text}};
    StatementResult r = RunStatement(port_, "SELECT '" + text + "' AS x", options);
    ASSERT_EQ(r.final_state, "FINISHED") << r.failure;
    ids.push_back(r.id);
  }
  for (size_t i = 0; i < hostile.size(); ++i) {
    json q = FindQuery("completed", ids[i]);
    ASSERT_TRUE(q.is_object());
    EXPECT_EQ(q["user"], hostile[i]);
    EXPECT_EQ(q["source"], hostile[i]);
    EXPECT_EQ(q["statement"], "SELECT '" + hostile[i] + "' AS x");
  }
  // The page itself carries no data: it renders the JSON with textContent, under a CSP that
  // forbids inline script.
  TestResponse page = TestHttpClient(port_).Get("/queries");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page.body.find("alert(1)"), std::string::npos);
  EXPECT_NE(page.Header("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(page.Header("X-Content-Type-Options"), "nosniff");
  TestResponse js = TestHttpClient(port_).Get("/www/queries.js");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.Header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(js.body.find("innerHTML"), std::string::npos);
  EXPECT_EQ(js.body.find("insertAdjacentHTML"), std::string::npos);
  EXPECT_EQ(js.body.find("document.write"), std::string::npos);
}

TEST_F(DebugPagesTest, InvalidUtf8InStatementBecomesReplacementCharacter) {
  StatementResult r = RunStatement(port_, "SELECT 1 /* \xff\xfe */");
  ASSERT_FALSE(r.id.empty()) << r.failure;
  json q = FindQuery("completed", r.id);
  ASSERT_TRUE(q.is_object());
  EXPECT_EQ(q["statement"], "SELECT 1 /* \xEF\xBF\xBD\xEF\xBF\xBD */");
}

TEST_F(DebugPagesTest, AssetsServedOnlyFromTheLoadedSet) {
  TestResponse css = TestHttpClient(port_).Get("/www/style.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.Header("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(TestHttpClient(port_).Get("/www/missing.js").status, 404);
  EXPECT_EQ(TestHttpClient(port_).Get("/www/../CMakeLists.txt").status, 404);
  EXPECT_EQ(TestHttpClient(port_).Get("/www/%2e%2e/CMakeLists.txt").status, 404);
}

TEST_F(DebugPagesTest, EveryCompiledInAssetServedWithItsContentType) {
  ASSERT_GE(EmbeddedWwwAssets().size(), 4u);  // queries.html, queries.js, style.css, favicon
  for (const EmbeddedAsset& asset : EmbeddedWwwAssets()) {
    SCOPED_TRACE(asset.name);
    TestResponse r = TestHttpClient(port_).Get("/www/" + std::string(asset.name));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, asset.data);
    // A file of be/www with an extension the server has no type for would be left out.
    EXPECT_NE(r.Header("Content-Type"), "");
    EXPECT_EQ(r.Header("X-Content-Type-Options"), "nosniff");
  }
  TestResponse page = TestHttpClient(port_).Get("/queries");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<script src=\"/www/queries.js\""), std::string::npos);
}

TEST_F(DebugPagesTest, WwwDirOverridesTheCompiledInAssets) {
  const std::string dir = data_dir_ + "/www-override";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/queries.html") << "<p>edited</p>";
  gflags::FlagSaver saver;
  FLAGS_www_dir = dir;
  std::unique_ptr<CoordinatorServer> server = StartServer(DefaultOptions());
  ASSERT_NE(server, nullptr);
  TestResponse page = TestHttpClient(server->port()).Get("/queries");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, "<p>edited</p>");
  // Only what the directory holds: no fallback to the compiled-in copy.
  EXPECT_EQ(TestHttpClient(server->port()).Get("/www/style.css").status, 404);
  server->Shutdown(0);
}

TEST_F(DebugPagesTest, HealthzIndexVarzAndUnknownPaths) {
  TestResponse ok = TestHttpClient(port_).Get("/healthz");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "OK\n");
  TestResponse index = TestHttpClient(port_).Get("/");
  EXPECT_EQ(index.status, 200);
  for (const char* link : {"/queries", "/queries?json", "/metrics", "/healthz", "/varz"}) {
    EXPECT_NE(index.body.find("href=\"" + std::string(link) + "\""), std::string::npos) << link;
  }
  TestResponse varz = TestHttpClient(port_).Get("/varz");
  EXPECT_EQ(varz.status, 200);
  EXPECT_NE(varz.body.find("\n--query_stmt_size=250\n"), std::string::npos);
  EXPECT_NE(varz.body.find("\n--debug_pages_test_api_token=<redacted>\n"), std::string::npos);
  EXPECT_EQ(varz.body.find("hunter2"), std::string::npos);
  TestResponse missing = TestHttpClient(port_).Get("/no/such/page");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "Not found: '/no/such/page'");
  EXPECT_EQ(TestHttpClient(port_).Post("/no/such/page", "").status, 404);
  EXPECT_EQ(TestHttpClient(port_).Post("/", "").status, 405);

  server_->coordinator()->Shutdown(0);
  TestResponse down = TestHttpClient(port_).Get("/healthz");
  EXPECT_EQ(down.status, 503);
  EXPECT_EQ(down.body, "SHUTTING_DOWN\n");
}

TEST_F(DebugPagesTest, ListingsStayConsistentWhileQueriesComeAndGo) {
  // Listing takes registry snapshots: it must neither block submissions nor race with them
  // (TSan checks the latter).
  constexpr int kQueriesPerThread = 8;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kQueriesPerThread; ++i) {
        if (RunStatement(port_, "SELECT 1").final_state != "FINISHED") ++failures;
      }
    });
    threads.emplace_back([&] {
      for (int i = 0; i < kQueriesPerThread; ++i) {
        TestResponse r = TestHttpClient(port_).Get("/queries?json");
        if (r.status != 200 || !r.Json().is_object()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(QueriesJson()["summary"]["finished_total"], 2 * kQueriesPerThread);
}

// An admission slot is not a thread: with one executor thread, a second admitted query waits
// for it and the page shows it QUEUED (it used to show RUNNING), beside the executor queue
// length in /metrics.
TEST_F(DebugPagesTest, AdmittedQueryWaitingForAnExecutorThreadIsQueued) {
  server_->Shutdown(0);
  CoordinatorServer::Options options = DefaultOptions();
  options.num_query_threads = 1;
  options.coordinator.max_running_queries = 4;
  server_ = StartServer(std::move(options));
  ASSERT_NE(server_, nullptr);
  port_ = server_->port();
  auto first = StartEndless("alice");
  StatementOptions o;
  o.user = "bob";
  StatementClient second(port_, o);
  ASSERT_EQ(second.Submit(kEndlessQuery).status, 200);
  const std::string id = second.result().id;
  ASSERT_TRUE(WaitFor([&] { return server_->engine()->num_queued() == 1; }));
  EXPECT_EQ(server_->coordinator()->GetMetrics().running, 2) << "both hold a running slot";
  EXPECT_EQ(FindQuery("in_flight", id)["state"], "QUEUED");
  TestResponse metrics = TestHttpClient(port_).Get("/metrics");
  EXPECT_NE(metrics.body.find("\nqr_executor_queue_length 1\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nqr_executor_threads_busy 1\n"), std::string::npos);
  // The executor's states: both in the one 2 MiB slab mapped at this server's first query.
  EXPECT_NE(metrics.body.find("\nqr_executor_state_memory_bytes 2097152\n"), std::string::npos);
  // The coordinator's requests, for the process (other servers of this test binary count too):
  // at least these two, in whole 2 MiB slabs.
  auto sample = [&](const std::string& name) -> int64_t {
    const size_t at = metrics.body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(metrics.body.substr(at + name.size() + 2));
  };
  EXPECT_GE(sample("qr_coordinator_requests_live"), 2);
  const int64_t request_bytes = sample("qr_coordinator_request_memory_bytes");
  EXPECT_GE(request_bytes, 2097152);
  EXPECT_EQ(request_bytes % 2097152, 0);
  EXPECT_EQ(second.Cancel().status, 204);
  EXPECT_EQ(first->Cancel().status, 204);
}

}  // namespace
}  // namespace qr::testing
