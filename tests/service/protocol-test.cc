// Integration tests of the Trino client protocol (docs/protocol.md) through HTTP against an
// in-process CoordinatorServer: submitting and paging. Types and the informational endpoints:
// protocol-endpoints-test.cc. Errors and cancel: protocol-errors-test.cc. HTTP robustness:
// protocol-http-test.cc.

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class ProtocolTest : public DefaultServerTest {
 protected:
  /// Restarts the server answering to 'hosts' (--http_allowed_hosts).
  void RestartWithAllowedHosts(const std::string& hosts) {
    CoordinatorServer::Options o = DefaultOptions();
    o.http_allowed_hosts = hosts;
    server_->Shutdown(0);
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
};

/// The fields docs/protocol.md requires in every stats object.
const std::vector<std::string> kStatsFields = {
    "state",           "queued",          "scheduled",         "nodes",
    "totalSplits",     "queuedSplits",    "runningSplits",     "completedSplits",
    "cpuTimeMillis",   "wallTimeMillis",  "queuedTimeMillis",  "elapsedTimeMillis",
    "processedRows",   "processedBytes",  "physicalInputBytes", "peakMemoryBytes",
    "spilledBytes"};

/// The nextUri of 'answer' split into its parts; false if it does not have the protocol shape
/// "<base>/v1/statement/{queued|executing}/<id>/<slug>/<token>".
struct NextUri {
  std::string base, phase, id, slug;
  int64_t token = -1;
};
bool ParseNextUri(const std::string& uri, NextUri* out) {
  static const std::regex kShape(
      R"(^(https?://[^/]+)/v1/statement/(queued|executing)/([0-9a-f]{16}:[0-9a-f]{16})/([^/]+)/([0-9]+)$)");
  std::smatch m;
  if (!std::regex_match(uri, m, kShape)) return false;
  out->base = m[1];
  out->phase = m[2];
  out->id = m[3];
  out->slug = m[4];
  out->token = std::stoll(m[5]);
  return true;
}

std::string WithToken(const NextUri& u, int64_t token) {
  return "/v1/statement/" + u.phase + "/" + u.id + "/" + u.slug + "/" + std::to_string(token);
}

// ---------------------------------------------------------------------------------------------
// Submit

TEST_F(ProtocolTest, PostAnswersQueuedWithIdInfoUriNextUriStatsAndNoData) {
  TestHttpClient http(port_);
  TestResponse r = http.Post("/v1/statement", "SELECT 1", {{"X-Trino-User", "alice"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type").rfind("application/json", 0), 0u);
  json j = r.Json();
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j["id"].is_string());
  const std::string id = j["id"];
  EXPECT_EQ(j["infoUri"], Base() + "/v1/query/" + id);
  NextUri next;
  ASSERT_TRUE(ParseNextUri(j.value("nextUri", ""), &next)) << r.body;
  EXPECT_EQ(next.base, Base());
  EXPECT_EQ(next.phase, "queued");
  EXPECT_EQ(next.id, id);
  EXPECT_EQ(j["stats"]["state"], "QUEUED");
  for (const auto& field : kStatsFields) EXPECT_TRUE(j["stats"].contains(field)) << field;
  EXPECT_FALSE(j.contains("data"));
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(j["warnings"], json::array());
}

TEST_F(ProtocolTest, ContentTypeOfThePostIsIgnored) {
  for (const char* type : {"", "text/plain", "application/x-www-form-urlencoded",
                           "application/json; charset=utf-8"}) {
    StatementOptions o;
    if (*type != '\0') o.post_headers = {{"Content-Type", type}};
    StatementResult r = RunStatement(port_, "SELECT 1 + 1", o);
    EXPECT_TRUE(r.failure.empty()) << type << ": " << r.failure;
    EXPECT_EQ(r.final_state, "FINISHED") << type;
    EXPECT_EQ(r.rows, std::vector<json>{json::array({2})}) << type;
  }
}

TEST_F(ProtocolTest, ChunkedPostBodyIsAccepted) {
  StatementOptions o;
  o.chunked_post = true;  // presto-client's way: chunked, no Content-Type
  o.header_prefix = "X-Presto-";
  StatementResult r = RunStatement(port_, "SELECT n_name FROM nation WHERE n_nationkey = 7", o);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.rows, std::vector<json>{json::array({"GERMANY"})});
}

TEST_F(ProtocolTest, BodyIsNeverFormDecoded) {
  // '+', '%20', '&' and '=' would all be mangled by form decoding.
  const std::string literal = "a+b%20c&d=e%zz+";
  StatementOptions o;
  o.post_headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  StatementResult r = RunStatement(port_, "SELECT '" + literal + "' AS s, 1+2 AS n", o);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], literal);
  EXPECT_EQ(r.rows[0][1], 3);
}

TEST_F(ProtocolTest, EmptyStatementIs400TextPlain) {
  TestHttpClient http(port_);
  for (const char* sql : {"", "   ", "\n\t ", ";"}) {
    TestResponse r = http.Post("/v1/statement", sql, {{"X-Trino-User", "u"}});
    EXPECT_EQ(r.status, 400) << "'" << sql << "': " << r.body;
    EXPECT_EQ(r.Header("Content-Type").rfind("text/plain", 0), 0u) << r.Header("Content-Type");
    EXPECT_FALSE(r.body.empty());
  }
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
}

TEST_F(ProtocolTest, NoUserIs401WithWwwAuthenticate) {
  TestHttpClient http(port_);
  TestResponse r = http.Post("/v1/statement", "SELECT 1");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.Header("WWW-Authenticate").rfind("Basic", 0), 0u) << r.Header("WWW-Authenticate");
  // An empty user header is no user either.
  r = http.Post("/v1/statement", "SELECT 1", {{"X-Trino-User", ""}});
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
}

TEST_F(ProtocolTest, BasicAuthUserIsTheSessionUser) {
  StatementOptions o;
  o.user = "";
  o.post_headers = {{"Authorization", "Basic " + Base64Encode("bob:s3cret:with:colons")}};
  StatementResult r = RunStatement(port_, "SELECT 1", o);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  TestHttpClient http(port_);
  json info = http.Get("/v1/query/" + r.id).Json();
  EXPECT_EQ(info["session"]["user"], "bob");
}

TEST_F(ProtocolTest, MalformedItemHeadersAre400AsInTrino) {
  // Trino answers 400 for an item without '=' and for a '%' without two hex digits (its
  // URLDecoder refuses it); the items used to be skipped or passed through undecoded.
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"X-Trino-Session", "query_max_run_time"},
           {"X-Trino-Session", "a=1, b"},
           {"X-Trino-Session", "a=50%"},
           {"X-Presto-Session", "a=%zz"},
           {"X-Trino-Prepared-Statement", "st=SELECT+1%2"}}) {
    StatementOptions o;
    o.post_headers = {{name, value}};
    StatementClient c(port_, o);
    TestResponse r = c.Submit("SELECT 1");
    EXPECT_EQ(r.status, 400) << name << ": " << value;
    EXPECT_NE(r.body.find("Invalid " + name), std::string::npos) << r.body;
  }
  // Empty items and spaces around them are fine; tags come from every line of the header.
  StatementOptions o;
  o.post_headers = {{"X-Trino-Session", " , a = 1 ,, "},
                    {"X-Trino-Client-Tags", "etl, nightly"},
                    {"X-Trino-Client-Tags", "finance"}};
  StatementResult r = RunStatement(port_, "SELECT 1", o);
  ASSERT_EQ(r.final_state, "FINISHED") << r.failure << r.error.dump();
  TestHttpClient http(port_);
  EXPECT_EQ(http.Get("/v1/query/" + r.id).Json()["session"]["clientTags"],
            json::array({"etl", "nightly", "finance"}));
}

TEST_F(ProtocolTest, TrinoAndPrestoHeaderFamiliesBothWork) {
  for (const std::string& prefix : std::vector<std::string>{"X-Trino-", "X-Presto-"}) {
    StatementOptions o;
    o.user = "user-" + prefix;
    o.header_prefix = prefix;
    o.post_headers = {{prefix + "Source", "src-" + prefix},
                      {prefix + "Catalog", "cat"},
                      {prefix + "Schema", "sch"},
                      {prefix + "Session", "a=1,b=x%20y"},
                      {prefix + "Client-Info", "info"},
                      {prefix + "Client-Tags", " etl , nightly,,"},
                      {prefix + "Time-Zone", "UTC"},
                      {prefix + "Query-Data-Encoding", "json+zstd"},
                      {"X-Unknown-Header", "ignored"}};
    StatementResult r = RunStatement(port_, "SELECT 1", o);
    ASSERT_TRUE(r.failure.empty()) << prefix << ": " << r.failure;
    TestHttpClient http(port_);
    TestResponse info = http.Get("/v1/query/" + r.id);
    json j = info.Json();
    EXPECT_EQ(j["session"]["user"], "user-" + prefix);
    EXPECT_EQ(j["session"]["source"], "src-" + prefix);
    EXPECT_EQ(j["session"]["clientInfo"], "info");
    EXPECT_EQ(j["session"]["clientTags"], json::array({"etl", "nightly"}));
    json page = http.Get("/queries?json").Json();
    bool listed = false;
    for (const json& q : page["completed"]) {
      if (q["query_id"] != r.id) continue;
      listed = true;
      EXPECT_EQ(q["client_info"], "info");
      EXPECT_EQ(q["client_tags"], json::array({"etl", "nightly"}));
    }
    EXPECT_TRUE(listed) << prefix;
    // Spooling is never offered back.
    EXPECT_EQ(info.body.find("Data-Encoding"), std::string::npos);
  }
}

TEST_F(ProtocolTest, DefaultUserServesRequestsWithoutOne) {
  server_->Shutdown(0);
  CoordinatorServer::Options o = DefaultOptions();
  o.protocol.default_user = "fallback";
  server_ = StartServer(o);
  ASSERT_NE(server_, nullptr);
  port_ = server_->port();
  StatementOptions so;
  so.user = "";
  StatementResult r = RunStatement(port_, "SELECT 1", so);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  TestHttpClient http(port_);
  EXPECT_EQ(http.Get("/v1/query/" + r.id).Json()["session"]["user"], "fallback");
}

// ---------------------------------------------------------------------------------------------
// Paging

TEST_F(ProtocolTest, NextUriIsAbsoluteAndBuiltFromTheHostHeader) {
  // A name in Host: the server on loopback without authentication answers only to the names
  // listed (ALoopbackServerWithoutAuthenticationAnswersOnlyItsNames below).
  RestartWithAllowedHosts("coordinator.example");
  TestHttpClient http(port_);
  TestRequest post;
  post.method = "POST";
  post.target = "/v1/statement";
  post.body = "SELECT * FROM region";
  post.headers = {{"X-Trino-User", "u"}};
  post.host = "coordinator.example:8443";
  TestResponse r = http.Send(post);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  NextUri next;
  ASSERT_TRUE(ParseNextUri(j["nextUri"], &next)) << j["nextUri"];
  EXPECT_EQ(next.base, "http://coordinator.example:8443");
  EXPECT_EQ(next.token, 0);
  EXPECT_EQ(next.slug.size(), 16u);
  EXPECT_EQ(j["infoUri"], "http://coordinator.example:8443/v1/query/" + next.id);
  // Following it (with that Host) keeps the authority and moves to "executing".
  int rows = 0;
  std::string uri = j["nextUri"];
  int64_t expected_token = 0;
  while (!uri.empty()) {
    ASSERT_TRUE(ParseNextUri(uri, &next)) << uri;
    EXPECT_EQ(next.base, "http://coordinator.example:8443");
    EXPECT_EQ(next.token, expected_token++);
    TestRequest get;
    get.target = TargetOf(uri);
    get.host = "coordinator.example:8443";
    TestResponse page = http.Send(get);
    ASSERT_EQ(page.status, 200) << page.body;
    json p = page.Json();
    if (p.contains("data")) rows += static_cast<int>(p["data"].size());
    uri = p.value("nextUri", "");
    if (!uri.empty() && p["stats"]["state"] != "QUEUED") {
      ASSERT_TRUE(ParseNextUri(uri, &next));
      EXPECT_EQ(next.phase, "executing");
    }
  }
  EXPECT_EQ(rows, kRegionRows);
}

TEST_F(ProtocolTest, NextUriUsesTheServersAddressWhenHostIsMissingOrUnsafe) {
  // No Host header at all (HTTP/1.0), and a Host that must not be echoed into a URI (let
  // through: any name allowed).
  RestartWithAllowedHosts("*");
  for (const std::string& host_line :
       std::vector<std::string>{"", "Host: evil\"><x\r\n"}) {
    TestHttpClient http(port_);
    ASSERT_TRUE(http.Connect());
    ASSERT_TRUE(http.SendRaw("POST /v1/statement HTTP/1.0\r\n" + host_line +
                             "X-Trino-User: u\r\nContent-Length: 8\r\n\r\nSELECT 1"));
    TestResponse r = http.ReadResponse();
    ASSERT_EQ(r.status, 200) << r.body;
    NextUri next;
    ASSERT_TRUE(ParseNextUri(r.Json().value("nextUri", ""), &next)) << r.body;
    EXPECT_EQ(next.base, Base()) << "Host line: " << host_line;
  }
}

TEST_F(ProtocolTest, ForwardedHeadersAreUsedOnlyWhenTrusted) {
  const Headers forwarded = {{"X-Trino-User", "u"},
                             {"X-Forwarded-Host", "proxy.example:8443"},
                             {"X-Forwarded-Proto", "https"}};
  TestHttpClient http(port_);
  json j = http.Post("/v1/statement", "SELECT 1", forwarded).Json();
  EXPECT_EQ(j.value("nextUri", "").rfind(Base() + "/v1/statement/", 0), 0u) << j.dump();

  server_->Shutdown(0);
  CoordinatorServer::Options o = DefaultOptions();
  o.protocol.trust_forwarded_headers = true;
  server_ = StartServer(o);
  ASSERT_NE(server_, nullptr);
  port_ = server_->port();
  TestHttpClient behind_proxy(port_);
  j = behind_proxy.Post("/v1/statement", "SELECT 1", forwarded).Json();
  EXPECT_EQ(j.value("nextUri", "").rfind("https://proxy.example:8443/v1/statement/queued/", 0),
            0u)
      << j.dump();
  EXPECT_EQ(j.value("infoUri", "").rfind("https://proxy.example:8443/v1/query/", 0), 0u);
}

TEST_F(ProtocolTest, WrongSlugIs404) {
  StatementClient c(port_);
  c.Submit("SELECT * FROM nation");
  NextUri next;
  ASSERT_TRUE(ParseNextUri(c.next_uri(), &next));
  std::string wrong = next.slug;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  for (const std::string& slug : {wrong, next.slug.substr(1), next.slug + "0", std::string("x")}) {
    NextUri bad = next;
    bad.slug = slug;
    TestResponse r = c.http().Get(WithToken(bad, 0));
    EXPECT_EQ(r.status, 404) << slug;
    EXPECT_EQ(r.Header("Content-Type").rfind("text/plain", 0), 0u);
    EXPECT_EQ(c.http().Delete(WithToken(bad, 0)).status, 404) << slug;
  }
  // The right slug still works (the wrong ones did not cancel anything).
  while (!c.done() && c.result().failure.empty()) c.Advance();
  EXPECT_TRUE(c.result().failure.empty()) << c.result().failure;
  EXPECT_EQ(c.result().final_state, "FINISHED");
  EXPECT_EQ(c.result().rows.size(), static_cast<size_t>(kNationRows));
}

TEST_F(ProtocolTest, UnknownQueryAndMalformedStatementUrisAre404) {
  TestHttpClient http(port_);
  for (const char* target : {"/v1/statement/executing/0123456789abcdef:0123456700000000/"
                             "0123456789abcdef/0",
                             "/v1/statement/queued/0123456789abcdef:0123456700000000/x/1",
                             "/v1/statement/running/0123456789abcdef:0123456700000000/x/1",
                             "/v1/statement/executing/not-an-id/abc/0",
                             "/v1/statement/executing/0123456789abcdef:0123456700000000/x/-1",
                             "/v1/statement/executing/0123456789abcdef:0123456700000000/x/1/",
                             "/v1/statement/"}) {
    TestResponse r = http.Get(target);
    EXPECT_EQ(r.status, 404) << target << ": " << r.body;
    EXPECT_EQ(r.Header("Content-Type").rfind("text/plain", 0), 0u) << target;
  }
  // A DELETE of a well-formed nextUri of a query that is gone (expired, or fetched to its end)
  // cancels nothing and is no error: 204, as Trino answers (the Python client's cancel raises
  // on anything else). Malformed ones stay 404.
  for (const char* target : {"/v1/statement/executing/0123456789abcdef:0123456700000000/"
                             "0123456789abcdef/0",
                             "/v1/statement/queued/0123456789abcdef:0123456700000000/x/1"}) {
    EXPECT_EQ(http.Delete(target).status, 204) << target;
  }
  EXPECT_EQ(http.Delete("/v1/statement/executing/not-an-id/abc/0").status, 404);
}

TEST_F(ProtocolTest, GetWaitsUpToMaxWaitForSomethingNew) {
  StatementClient c(port_);
  c.Submit(kEndlessQuery);
  NextUri next;
  ASSERT_TRUE(ParseNextUri(c.next_uri(), &next));
  // The endless query produces nothing: each GET waits its maxWait, then answers without rows.
  for (const auto& [param, wait] : std::vector<std::pair<std::string, std::chrono::milliseconds>>{
           {"?maxWait=300ms", 300ms}, {"?maxWait=0.4s", 400ms}, {"", 1000ms}}) {
    auto start = Clock::now();
    TestResponse r = c.http().Get(WithToken(next, next.token) + param);
    auto took = Clock::now() - start;
    ASSERT_EQ(r.status, 200) << r.body;
    json j = r.Json();
    EXPECT_FALSE(j.contains("data"));
    EXPECT_TRUE(j["stats"]["state"] == "RUNNING" || j["stats"]["state"] == "QUEUED") << r.body;
    EXPECT_GE(took, wait - 50ms) << param;
    EXPECT_LT(took, wait + 10s) << param;
    NextUri after;
    ASSERT_TRUE(ParseNextUri(j.value("nextUri", ""), &after)) << r.body;
    EXPECT_EQ(after.token, next.token + 1);
    next = after;
  }
  EXPECT_EQ(c.http().Get(WithToken(next, next.token) + "?maxWait=soon").status, 400);
  EXPECT_EQ(c.http().Delete(WithToken(next, next.token)).status, 204);
}

TEST_F(ProtocolTest, RepeatedGetOfATokenReturnsTheSamePage) {
  StatementClient c(port_);
  c.Submit("SELECT l_orderkey, l_linenumber FROM lineitem");
  TestResponse first = c.AdvanceToData();
  ASSERT_TRUE(first.Json().contains("data")) << first.body;
  // Retries of the same token, even several, answer the same rows and the same nextUri.
  for (int retry = 0; retry < 3; ++retry) {
    TestResponse again = c.http().Get(TargetOf(c.previous_uri()));
    ASSERT_EQ(again.status, 200);
    json a = first.Json(), b = again.Json();
    EXPECT_EQ(a["data"], b["data"]);
    EXPECT_EQ(a["nextUri"], b["nextUri"]);
    EXPECT_EQ(a["columns"], b["columns"]);
    EXPECT_EQ(a["id"], b["id"]);
  }
  // And the cursor moves on normally afterwards: no rows lost or duplicated.
  StatementResult& r = c.result();
  while (!c.done() && r.failure.empty()) c.Advance();
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  StatementResult count = RunStatement(port_, "SELECT count(*) FROM lineitem");
  ASSERT_EQ(count.rows.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(r.rows.size()), count.rows[0][0].get<int64_t>());
}

TEST_F(ProtocolTest, OlderTokenIs410AndTokenBeyondTheNextIs404) {
  StatementClient c(port_);
  c.Submit("SELECT * FROM orders");
  c.Advance();
  c.Advance();
  c.Advance();
  ASSERT_FALSE(c.done()) << "orders has many pages";
  NextUri next;
  ASSERT_TRUE(ParseNextUri(c.next_uri(), &next));
  ASSERT_GE(next.token, 3);
  for (int64_t older = 0; older <= next.token - 2; ++older) {
    TestResponse r = c.http().Get(WithToken(next, older));
    EXPECT_EQ(r.status, 410) << "token " << older << ": " << r.body;
  }
  EXPECT_EQ(c.http().Get(WithToken(next, next.token - 1)).status, 200);  // a retry
  for (int64_t beyond : {next.token + 1, next.token + 2, int64_t{1} << 40}) {
    TestResponse r = c.http().Get(WithToken(next, beyond));
    EXPECT_EQ(r.status, 404) << "token " << beyond;
    EXPECT_EQ(r.Header("Content-Type").rfind("text/plain", 0), 0u);
  }
  EXPECT_EQ(c.http().Delete(c.next_uri()).status, 204);
}

TEST_F(ProtocolTest, MultiPagePagingFollowsEveryPageRule) {
  StatementOptions o;
  o.keep_answers = true;
  StatementResult r = RunStatement(port_, "SELECT * FROM orders ORDER BY o_orderkey", o);
  ASSERT_TRUE(r.failure.empty()) << r.failure;  // the client checks the per-answer invariants
  EXPECT_EQ(r.rows.size(), static_cast<size_t>(kOrdersRows));
  EXPECT_GT(r.data_pages, 3);
  EXPECT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(r.states.front(), "QUEUED");
  ASSERT_GE(r.answers.size(), 3u);
  // Columns appear once known, then on every later page.
  size_t first_with_columns = r.answers.size();
  for (size_t i = 0; i < r.answers.size(); ++i) {
    if (r.answers[i].contains("columns")) {
      first_with_columns = std::min(first_with_columns, i);
    } else {
      EXPECT_LT(i, first_with_columns) << "page " << i << " lost the columns";
    }
  }
  EXPECT_LT(first_with_columns, r.answers.size());
  // The page with the last rows still has a nextUri; the final answer has neither.
  const json& last = r.answers.back();
  EXPECT_EQ(last["stats"]["state"], "FINISHED");
  EXPECT_FALSE(last.contains("data"));
  EXPECT_FALSE(last.contains("nextUri"));
  EXPECT_FALSE(last.contains("error"));
  int last_data = -1;
  for (size_t i = 0; i < r.answers.size(); ++i) {
    if (r.answers[i].contains("data")) last_data = static_cast<int>(i);
    // A page with no rows omits 'data' entirely.
    if (r.answers[i].contains("data")) {
      EXPECT_FALSE(r.answers[i]["data"].empty());
    }
    // Every answer repeats id, infoUri and full stats.
    EXPECT_EQ(r.answers[i]["id"], r.id);
    EXPECT_TRUE(r.answers[i]["infoUri"].is_string());
    for (const auto& field : kStatsFields) {
      EXPECT_TRUE(r.answers[i]["stats"].contains(field)) << "page " << i << ": " << field;
    }
    EXPECT_EQ(r.answers[i]["warnings"], json::array());
  }
  ASSERT_GE(last_data, 0);
  EXPECT_TRUE(r.answers[last_data].contains("nextUri"));
  // Rows arrive in order, none lost or repeated.
  for (size_t i = 1; i < r.rows.size(); ++i) {
    ASSERT_LT(r.rows[i - 1][0].get<int64_t>(), r.rows[i][0].get<int64_t>()) << i;
  }
  // After the final answer, the next token does not exist.
  TestHttpClient http(port_);
  NextUri u;
  ASSERT_TRUE(ParseNextUri(r.answers[r.answers.size() - 2]["nextUri"], &u));
  EXPECT_EQ(http.Get(WithToken(u, u.token + 1)).status, 404);
  // ... and the final answer can be fetched again.
  TestResponse again = http.Get(WithToken(u, u.token));
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.Json()["stats"]["state"], "FINISHED");
  EXPECT_FALSE(again.Json().contains("nextUri"));
}

TEST_F(ProtocolTest, StatsCarryTheProcessedRows) {
  StatementOptions o;
  o.keep_answers = true;
  StatementResult r = RunStatement(port_, "SELECT * FROM nation", o);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  const json& stats = r.answers.back()["stats"];
  EXPECT_EQ(stats["processedRows"], kNationRows);
  EXPECT_GT(stats["processedBytes"].get<int64_t>(), 0);
  EXPECT_EQ(stats["queued"], false);
  EXPECT_GE(stats["elapsedTimeMillis"].get<int64_t>(), 0);
}

// DNS rebinding: a page whose own name an attacker points at 127.0.0.1 reaches a server on
// loopback as the same origin, and the browser names it in Host. Without authentication such
// a server answers only to localhost, IP addresses and --http_allowed_hosts.
TEST_F(ProtocolTest, ALoopbackServerWithoutAuthenticationAnswersOnlyItsNames) {
  auto get = [](int port, const std::string& host) {
    TestHttpClient http(port);
    TestRequest req;
    req.target = "/v1/info";
    req.host = host;
    return http.Send(req);
  };
  for (const std::string host : {"127.0.0.1:1", "localhost", "LOCALHOST:8080", "localhost.",
                                 "app.localhost:80", "[::1]:8080", "10.1.2.3"}) {
    EXPECT_EQ(get(port_, host).status, 200) << host;
  }
  for (const std::string host : {"rebind.attacker.example:8080", "localhost.attacker.example",
                                 "[not-an-address]", "coordinator.example"}) {
    const TestResponse r = get(port_, host);
    EXPECT_EQ(r.status, 403) << host;
    EXPECT_NE(r.body.find("--http_allowed_hosts"), std::string::npos) << r.body;
  }
  // A state-changing request too, whatever its Origin says.
  {
    TestHttpClient http(port_);
    TestRequest post;
    post.method = "POST";
    post.target = "/v1/statement";
    post.body = "SELECT 1";
    post.host = "rebind.attacker.example:8080";
    post.headers = {{"X-Trino-User", "u"}, {"Origin", "http://rebind.attacker.example:8080"}};
    EXPECT_EQ(http.Send(post).status, 403);
  }
  // Listed names are answered, in any case and with any port; others still are not.
  CoordinatorServer::Options o = DefaultOptions();
  o.http_allowed_hosts = " coordinator.example ,db.internal";
  auto listed = StartServer(std::move(o));
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ(get(listed->port(), "Coordinator.Example:8443").status, 200);
  EXPECT_EQ(get(listed->port(), "db.internal").status, 200);
  EXPECT_EQ(get(listed->port(), "localhost").status, 200);
  EXPECT_EQ(get(listed->port(), "other.internal").status, 403);
  listed->Shutdown(0);
  // A name that is no host name is refused at start-up.
  CoordinatorServer::Options bad = DefaultOptions();
  bad.http_allowed_hosts = "http://coordinator.example";
  CoordinatorServer server(std::move(bad));
  const Status s = server.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--http_allowed_hosts"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace qr::testing
