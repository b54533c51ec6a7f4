// Password authentication and per-user visibility against an in-process CoordinatorServer
// (--auth_password_file; plain HTTP with allow_insecure_auth, TLS is in tls-test.cc).

#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "testutil/log-capture.h"
#include "service-test-util.h"
#include "http/password-file.h"

namespace qr::testing {
namespace {

using nlohmann::json;

/// Everyone's password is "<user>-pw"; root is the admin.
class AuthTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    ServiceTest::SetUpTestSuite();
    password_file_ = data_dir_ + "/users.passwd";
    std::ofstream out(password_file_);
    out << "# test users\n";
    for (const char* user : {"alice", "bob", "root"}) {
      std::string line;
      Status s = MakePasswordEntryLine(user, std::string(user) + "-pw", kMinPasswordIterations,
                                       &line);
      ASSERT_TRUE(s.ok()) << s.message();
      out << line << "\n";
    }
  }

  static CoordinatorServer::Options AuthOptions() {
    CoordinatorServer::Options o = DefaultOptions();
    o.auth_password_file = password_file_;
    o.allow_insecure_auth = true;
    o.admin_users = "root";
    o.auth.max_failures = 5;
    // Two endless queries (alice's and bob's) plus the EXPLAIN of a query's plan page: with
    // the default two executor threads the EXPLAIN would wait for an endless query to end.
    o.num_query_threads = 3;
    return o;
  }

  void SetUp() override {
    server_ = StartServer(AuthOptions());
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }

  static Headers Creds(const std::string& user, const std::string& password) {
    return {{"Authorization", "Basic " + Base64Encode(user + ":" + password)}};
  }
  /// 'user''s credentials, plus an X-Trino-User header naming 'as' if given.
  static Headers As(const std::string& user, const std::string& as = "") {
    Headers h = Creds(user, user + "-pw");
    if (!as.empty()) h.emplace_back("X-Trino-User", as);
    return h;
  }
  StatementOptions ClientOf(const std::string& user) {
    StatementOptions o;
    o.user = "";  // No user header: the authenticated user is the user.
    o.headers = As(user);
    return o;
  }
  /// Submits an endless query as 'user' (it stays in flight until canceled).
  std::unique_ptr<StatementClient> StartEndless(const std::string& user) {
    auto client = std::make_unique<StatementClient>(port_, ClientOf(user));
    EXPECT_EQ(client->Submit(kEndlessQuery).status, 200);
    return client;
  }
  ClientRequestStatePtr Query(const std::string& id) {
    UniqueId uid;
    EXPECT_TRUE(ParseId(id, &uid).ok());
    return server_->coordinator()->Find(uid);
  }
  bool Terminal(const std::string& id) {
    return ClientRequestState::IsTerminal(Query(id)->state());
  }
  /// The query ids of GET /v1/query as 'user'.
  std::set<std::string> QueryList(const std::string& user) {
    TestResponse r = TestHttpClient(port_).Get("/v1/query", As(user));
    EXPECT_EQ(r.status, 200) << r.body;
    std::set<std::string> ids;
    for (const json& q : r.Json()) ids.insert(q["queryId"].get<std::string>());
    return ids;
  }
  /// The query ids of both lists of /queries?json as 'user'.
  std::set<std::string> QueriesPage(const std::string& user) {
    TestResponse r = TestHttpClient(port_).Get("/queries?json", As(user));
    EXPECT_EQ(r.status, 200) << r.body;
    std::set<std::string> ids;
    json page = r.Json();
    for (const char* list : {"in_flight", "completed"}) {
      for (const json& q : page[list]) ids.insert(q["query_id"].get<std::string>());
    }
    return ids;
  }

  static inline std::string password_file_;
  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

void ExpectChallenge(const TestResponse& r, const std::string& what) {
  EXPECT_EQ(r.status, 401) << what << ": " << r.body;
  EXPECT_EQ(r.Header("WWW-Authenticate"), "Basic realm=\"coordinatord\"") << what;
}

TEST_F(AuthTest, EveryEndpointButHealthzNeedsCredentials) {
  TestHttpClient http(port_);
  for (const char* path : {"/v1/query", "/v1/info", "/v1/info/state", "/queries",
                           "/queries?json", "/metrics", "/varz", "/", "/www/style.css",
                           "/query_statement?query_id=0000000000000001:0000000000000000",
                           "/query_detail?json&query_id=0000000000000001:0000000000000000",
                           "/query_plan?query_id=0000000000000001:0000000000000000",
                           "/v1/statement/queued/0000000000000001:0000000000000000/ab/0",
                           "/no/such/path"}) {
    ExpectChallenge(http.Get(path), path);
  }
  ExpectChallenge(http.Post("/v1/statement", "SELECT 1", {{"X-Trino-User", "alice"}}),
                  "POST /v1/statement");
  ExpectChallenge(http.Post("/cancel_query?query_id=0000000000000001:0000000000000000", ""),
                  "POST /cancel_query");
  ExpectChallenge(http.Delete("/v1/query/0000000000000001:0000000000000000"), "DELETE query");
  EXPECT_EQ(http.Get("/healthz").status, 200);
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
}

TEST_F(AuthTest, WrongCredentialsGet401) {
  TestHttpClient http(port_);
  ExpectChallenge(http.Get("/v1/query", Creds("alice", "bob-pw")), "wrong password");
  ExpectChallenge(http.Get("/v1/query", Creds("carol", "carol-pw")), "unknown user");
  ExpectChallenge(http.Get("/v1/query", {{"Authorization", "Basic %%%"}}), "malformed");
  ExpectChallenge(http.Get("/v1/query", {{"Authorization", "Bearer x"}}), "not Basic");
  EXPECT_EQ(server_->authenticator()->failures(), 4u);
}

TEST_F(AuthTest, RightCredentialsRunAStatementEndToEnd) {
  StatementClient client(port_, ClientOf("alice"));
  StatementResult& r = client.RunToCompletion("SELECT n_name FROM nation");
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(r.rows.size(), static_cast<size_t>(kNationRows));
  EXPECT_EQ(Query(r.id)->user(), "alice");  // No header: the authenticated user.
  // One PBKDF2 for the whole statement; every other request hit the cache.
  EXPECT_EQ(server_->authenticator()->verifications(), 1u);
  EXPECT_EQ(server_->authenticator()->cache_hits(),
            static_cast<uint64_t>(r.http_requests - 1));
}

TEST_F(AuthTest, UserHeaderMustNameTheAuthenticatedUser) {
  TestHttpClient http(port_);
  TestResponse r = http.Post("/v1/statement", "SELECT 1", As("alice", "bob"));
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("User 'alice' may not act as user 'bob'"), std::string::npos) << r.body;
  Headers presto = Creds("alice", "alice-pw");
  presto.emplace_back("X-Presto-User", "root");
  EXPECT_EQ(http.Get("/v1/query", presto).status, 403);
  EXPECT_EQ(http.Get("/queries?json", As("bob", "alice")).status, 403);
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
  // Naming oneself is fine.
  StatementOptions o = ClientOf("alice");
  o.user = "alice";
  StatementResult ok = RunStatement(port_, "SELECT 1", o);
  EXPECT_EQ(ok.final_state, "FINISHED") << ok.failure;
}

TEST_F(AuthTest, AdminMayActAsAnotherUser) {
  StatementOptions o;
  o.user = "bob";
  o.headers = As("root");
  StatementClient client(port_, o);
  ASSERT_EQ(client.Submit(kEndlessQuery).status, 200);
  const std::string id = client.result().id;
  EXPECT_EQ(Query(id)->user(), "bob");
  EXPECT_EQ(QueryList("bob").count(id), 1u);  // It is bob's query now.
  EXPECT_EQ(QueryList("alice").count(id), 0u);
  EXPECT_EQ(client.Cancel().status, 204);
  EXPECT_TRUE(Terminal(id));
}

TEST_F(AuthTest, NonAdminsSeeOnlyTheirOwnQueries) {
  auto alice = StartEndless("alice");
  auto bob = StartEndless("bob");
  const std::string a = alice->result().id, b = bob->result().id;
  EXPECT_EQ(QueryList("bob"), std::set<std::string>{b});
  EXPECT_EQ(QueryList("alice"), std::set<std::string>{a});
  EXPECT_EQ(QueryList("root"), (std::set<std::string>{a, b}));
  EXPECT_EQ(QueriesPage("bob"), std::set<std::string>{b});
  EXPECT_EQ(QueriesPage("root"), (std::set<std::string>{a, b}));

  TestHttpClient http(port_);
  // Someone else's query answers exactly like an unknown one.
  TestResponse other = http.Get("/v1/query/" + a, As("bob"));
  EXPECT_EQ(other.status, 410);
  EXPECT_EQ(other.body, "Query " + a + " is unknown or expired\n");
  EXPECT_EQ(http.Get("/v1/query/" + a, As("alice")).status, 200);
  EXPECT_EQ(http.Get("/v1/query/" + a, As("root")).status, 200);
  TestResponse stmt = http.Get("/query_statement?query_id=" + a, As("bob"));
  EXPECT_EQ(stmt.status, 404);
  EXPECT_NE(stmt.body.find("is not known"), std::string::npos);
  TestResponse own = http.Get("/query_statement?query_id=" + a, As("alice"));
  EXPECT_EQ(own.status, 200);
  EXPECT_EQ(own.body, kEndlessQuery);
  EXPECT_EQ(http.Get("/query_statement?query_id=" + a, As("root")).status, 200);
  // The per-query page's data and plan follow the same rule; a filter cannot widen it.
  for (const std::string& path :
       {"/query_detail?json&query_id=" + a, "/query_plan?query_id=" + a}) {
    EXPECT_EQ(http.Get(path, As("bob")).status, 404) << path;
    EXPECT_EQ(http.Get(path, As("alice")).status, 200) << path;
    EXPECT_EQ(http.Get(path, As("root")).status, 200) << path;
  }
  TestResponse filtered = http.Get("/queries?json&user=alice", As("bob"));
  ASSERT_EQ(filtered.status, 200);
  EXPECT_TRUE(filtered.Json()["in_flight"].empty()) << filtered.body;
  alice->Cancel();
  bob->Cancel();
}

TEST_F(AuthTest, NextUriIsReadOnlyByItsOwnerOrAnAdmin) {
  auto alice = StartEndless("alice");
  const std::string a = alice->result().id;
  const std::string next = TargetOf(alice->next_uri());
  TestHttpClient http(port_);
  // bob holding alice's whole nextUri (slug included) gets what an unknown query gets.
  TestResponse stolen = http.Get(next, As("bob"));
  EXPECT_EQ(stolen.status, 404);
  EXPECT_EQ(stolen.body.find("RUNNING"), std::string::npos);
  // A guessed slug is refused to alice herself.
  std::string guessed = next;
  guessed.replace(guessed.find(a) + a.size() + 1, 16, "0123456789abcdef");
  EXPECT_EQ(http.Get(guessed, As("alice")).status, 404);
  // The owner and an admin read it.
  EXPECT_EQ(http.Get(next + "?maxWait=0s", As("alice")).status, 200);
  EXPECT_EQ(http.Get(next + "?maxWait=0s", As("root")).status, 200);
  alice->Cancel();
}

TEST_F(AuthTest, NonAdminsCancelOnlyTheirOwnQueries) {
  auto alice = StartEndless("alice");
  const std::string a = alice->result().id;
  TestHttpClient http(port_);
  // As for an unknown id: 204, and nothing is canceled.
  EXPECT_EQ(http.Delete(TargetOf(alice->next_uri()), As("bob")).status, 204);
  EXPECT_EQ(http.Delete("/v1/query/" + a, As("bob")).status, 204);
  TestResponse page_cancel = http.Post("/cancel_query?query_id=" + a, "", As("bob", "bob"));
  EXPECT_EQ(page_cancel.status, 404) << page_cancel.body;
  EXPECT_FALSE(Terminal(a));

  // The owner cancels with DELETE of nextUri; an admin cancels anyone's from the page.
  auto alice2 = StartEndless("alice");
  const std::string a2 = alice2->result().id;
  EXPECT_EQ(http.Delete(TargetOf(alice->next_uri()), As("alice")).status, 204);
  EXPECT_TRUE(Terminal(a));
  TestResponse admin = http.Post("/cancel_query?query_id=" + a2, "", As("root", "root"));
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.Json()["canceled"], true);
  EXPECT_TRUE(Terminal(a2));

  auto alice3 = StartEndless("alice");
  const std::string a3 = alice3->result().id;
  EXPECT_EQ(http.Delete("/v1/query/" + a3, As("alice")).status, 204);
  EXPECT_TRUE(Terminal(a3));
}

TEST_F(AuthTest, RepeatedFailuresAreRateLimitedAndLoggedWithoutPasswords) {
  LogCapture log;
  TestHttpClient http(port_);
  const std::string password = "hunter2-not-it";
  for (int i = 0; i < 5; ++i) {
    ExpectChallenge(http.Get("/v1/query", Creds("alice", password)), "failure " +
                                                                         std::to_string(i));
  }
  const uint64_t verified = server_->authenticator()->verifications();
  TestResponse limited = http.Get("/v1/query", Creds("alice", password));
  EXPECT_EQ(limited.status, 429);
  EXPECT_FALSE(limited.Header("Retry-After").empty());
  // Even the right password waits for the window to end, and nothing is verified meanwhile.
  EXPECT_EQ(http.Get("/v1/query", As("alice")).status, 429);
  EXPECT_EQ(server_->authenticator()->verifications(), verified);
  EXPECT_EQ(log.Matching("Authentication failed for user 'alice' from 127.0.0.1").size(), 5u);
  EXPECT_EQ(log.Matching("Too many failed logins for user 'alice' from 127.0.0.1").size(), 1u);
  for (const std::string& line : log.Lines()) {
    EXPECT_EQ(line.find(password), std::string::npos) << line;
    EXPECT_EQ(line.find(Base64Encode("alice:" + password)), std::string::npos) << line;
  }
  EXPECT_EQ(http.Get("/healthz").status, 200);  // Health checks are never limited.
  // Another user from the same address is not limited (verified, then cached).
  EXPECT_EQ(http.Get("/v1/info", As("bob")).status, 200);
  EXPECT_EQ(http.Get("/v1/info", As("bob")).status, 200);
}

// Behind a same-host proxy (--http_trusted_proxies=127.0.0.1), the failures of one client
// limit that client (the last hop of X-Forwarded-For), not every user of the proxy.
TEST_F(AuthTest, TrustedProxyForwardedForNamesTheLimitedClient) {
  server_->Shutdown(0);
  CoordinatorServer::Options o = AuthOptions();
  o.http_trusted_proxies = "127.0.0.1";
  server_ = StartServer(o);
  ASSERT_NE(server_, nullptr);
  TestHttpClient http(server_->port());
  auto via = [](Headers h, const std::string& client) {
    h.emplace_back("X-Forwarded-For", client);
    return h;
  };
  for (int i = 0; i < 5; ++i) {
    ExpectChallenge(http.Get("/v1/info", via(Creds("alice", "guess"), "198.51.100.7")),
                    "failure " + std::to_string(i));
  }
  EXPECT_EQ(http.Get("/v1/info", via(As("alice"), "198.51.100.7")).status, 429);
  EXPECT_EQ(http.Get("/v1/info", via(As("alice"), "198.51.100.8")).status, 200);
  EXPECT_EQ(http.Get("/v1/info", As("alice")).status, 200);  // The proxy's own address.
}

TEST_F(AuthTest, MetricsCountVerificationsCacheHitsAndFailures) {
  TestHttpClient http(port_);
  ExpectChallenge(http.Get("/v1/query", Creds("bob", "nope")), "wrong password");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(http.Get("/v1/info", As("alice")).status, 200);
  TestResponse r = http.Get("/metrics", As("alice"));
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\nqr_auth_verifications_total 2\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\nqr_auth_cache_hits_total 3\n"), std::string::npos);
  EXPECT_NE(r.body.find("\nqr_auth_failures_total 1\n"), std::string::npos);
  EXPECT_NE(r.body.find("\nqr_auth_rate_limited_total 0\n"), std::string::npos);
}

// A forwarded-user header is checked before any password: refused at once, and logged at most
// once per 10 s (with a count), or any client could write a WARNING line per request.
TEST_F(AuthTest, RefusedForwardedUsersAreLoggedOncePerInterval) {
  testing::LogCapture log;
  TestHttpClient http(port_);
  for (int i = 0; i < 50; ++i) {
    const TestResponse r = http.Get("/v1/info", {{"X-Qr-Forwarded-Principal", "x"}});
    ASSERT_EQ(r.status, 401) << r.body;
    EXPECT_NE(r.body.find("forwarded user of this request is refused"), std::string::npos);
  }
  EXPECT_EQ(log.Matching("Refused a forwarded user").size(), 1u);
}

TEST_F(AuthTest, ReloadReadsNewUsersAndKeepsTheOldOnesOnError) {
  TestHttpClient http(port_);
  ASSERT_EQ(http.Get("/v1/info", As("bob")).status, 200);
  const std::string original = [] {
    std::ifstream in(password_file_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  std::string carol;
  ASSERT_TRUE(MakePasswordEntryLine("carol", "carol-pw", kMinPasswordIterations, &carol).ok());
  std::ofstream(password_file_) << "# bob left, carol came\n" << carol << "\n";
  Status s = server_->ReloadPasswordFile();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(http.Get("/v1/info", As("carol")).status, 200);
  ExpectChallenge(http.Get("/v1/info", As("bob")), "bob after the reload (was cached)");
  std::ofstream(password_file_) << "carol:broken\n";
  s = server_->ReloadPasswordFile();
  EXPECT_EQ(s.message().rfind(password_file_ + ":1: expected 5", 0), 0u) << s.message();
  EXPECT_EQ(http.Get("/v1/info", As("carol")).status, 200);  // The old users stay.
  std::ofstream(password_file_) << original;  // For the next tests of the suite.
}

class AuthStartupTest : public ServiceTest {};

TEST_F(AuthStartupTest, PlainHttpAuthIsRefusedUnlessAllowed) {
  const std::string file = data_dir_ + "/startup.passwd";
  std::string line;
  ASSERT_TRUE(MakePasswordEntryLine("alice", "pw", kMinPasswordIterations, &line).ok());
  std::ofstream(file) << line << "\n";
  CoordinatorServer::Options o = DefaultOptions();
  o.auth_password_file = file;
  CoordinatorServer refused(o);
  Status s = refused.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("password authentication over plain HTTP is refused"),
            std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--allow_insecure_auth"), std::string::npos);
  o.allow_insecure_auth = true;
  CoordinatorServer allowed(o);
  s = allowed.Start();
  EXPECT_TRUE(s.ok()) << s.message();
  allowed.Shutdown(0);
}

TEST_F(AuthStartupTest, BadPasswordFileStopsTheStart) {
  CoordinatorServer::Options o = DefaultOptions();
  o.allow_insecure_auth = true;
  o.auth_password_file = data_dir_ + "/missing.passwd";
  Status s = CoordinatorServer(o).Start();
  EXPECT_NE(s.message().find("cannot read the password file"), std::string::npos)
      << s.message();
  o.auth_password_file = data_dir_ + "/bad.passwd";
  std::ofstream(o.auth_password_file) << "# ok\nalice:plain:secret\n";
  s = CoordinatorServer(o).Start();
  EXPECT_EQ(s.message(), o.auth_password_file + ":2: expected 5 ':'-separated fields "
            "user:pbkdf2-sha256:ITERATIONS:SALT_BASE64:HASH_BASE64 (make lines with "
            "coordinatord-passwd)");
}

TEST_F(AuthStartupTest, MalformedTrustedProxiesStopTheStart) {
  CoordinatorServer::Options o = DefaultOptions();
  o.http_trusted_proxies = "127.0.0.1, 10.0.0.0/40";
  Status s = CoordinatorServer(o).Start();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("--http_trusted_proxies: bad trusted proxy '10.0.0.0/40'", 0), 0u)
      << s.message();
}

/// Runs coordinatord-passwd with 'password' on stdin; returns its stdout, '*status' its exit.
std::string RunPasswdTool(const std::string& args, const std::string& password, int* status) {
  std::string cmd = "printf '%s\\n' '" + password + "' | " QR_PASSWD_TOOL " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  size_t n;
  while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = p != nullptr ? pclose(p) : -1;
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

TEST(PasswdToolTest, MakesLinesTheServerAccepts) {
  int status = -1;
  std::string line = RunPasswdTool("--iterations=1000 alice", "pa ss:word", &status);
  ASSERT_EQ(status, 0) << line;
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.rfind("alice:pbkdf2-sha256:1000:", 0), 0u) << line;
  PasswordFile file;
  Status s = PasswordFile::Parse(line, "tool output", &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(VerifyPassword(*file.Find("alice"), "pa ss:word"));
  EXPECT_FALSE(VerifyPassword(*file.Find("alice"), "pa ss:wor"));
  // The default iteration count is recorded in the line.
  line = RunPasswdTool("bob", "pw", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(line.rfind("bob:pbkdf2-sha256:" + std::to_string(kDefaultPasswordIterations) + ":",
                       0),
            0u)
      << line;
  EXPECT_NE(RunPasswdTool("a:b", "pw", &status).find("user name 'a:b'"), std::string::npos);
  EXPECT_EQ(status, 1);
  RunPasswdTool("", "pw", &status);
  EXPECT_EQ(status, 2);
}

}  // namespace
}  // namespace qr::testing
