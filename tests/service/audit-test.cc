// The audit lines of the log (who submitted and who canceled, escaped), /varz for admins
// only, and request parameters that used to be undefined behaviour (issue 15).

#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "testutil/log-capture.h"
#include "service-test-util.h"
#include "http/password-file.h"

namespace qr::testing {
namespace {

std::optional<UniqueId> ParsedId(const std::string& text) {
  UniqueId id;
  if (!ParseId(text, &id).ok()) return std::nullopt;
  return id;
}

/// True when no captured message has a raw CR, LF or ESC: each forges or hides log lines.
bool AllLinesClean(LogCapture& log) {
  for (const std::string& line : log.Lines()) {
    if (line.find_first_of("\r\n\x1b") != std::string::npos) return false;
  }
  return true;
}

/// The one captured message containing both 'a' and 'b' (empty when there is not exactly one).
std::string OneLineWith(LogCapture& log, const std::string& a, const std::string& b) {
  std::string found;
  int n = 0;
  for (const std::string& line : log.Matching(a)) {
    if (line.find(b) == std::string::npos) continue;
    found = line;
    ++n;
  }
  return n == 1 ? found : "";
}

/// Everyone's password is "<user>-pw"; root is the admin.
class AuditTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    ServiceTest::SetUpTestSuite();
    password_file_ = data_dir_ + "/audit-users.passwd";
    std::ofstream out(password_file_);
    for (const char* user : {"alice", "root"}) {
      std::string line;
      Status s = MakePasswordEntryLine(user, std::string(user) + "-pw", kMinPasswordIterations,
                                       &line);
      ASSERT_TRUE(s.ok()) << s.message();
      out << line << "\n";
    }
  }
  void SetUp() override {
    CoordinatorServer::Options o = DefaultOptions();
    o.auth_password_file = password_file_;
    o.allow_insecure_auth = true;
    o.admin_users = "root";
    server_ = StartServer(o);
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }
  /// 'user''s credentials, plus an X-Trino-User header naming 'as' if given.
  static Headers As(const std::string& user, const std::string& as = "") {
    Headers h = {{"Authorization", "Basic " + Base64Encode(user + ":" + user + "-pw")}};
    if (!as.empty()) h.emplace_back("X-Trino-User", as);
    return h;
  }
  StatementOptions ClientOf(const std::string& user, const std::string& as = "") {
    StatementOptions o;
    o.user = "";
    o.headers = As(user, as);
    return o;
  }

  static inline std::string password_file_;
  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

TEST_F(AuditTest, AnAdminActingAsAnotherUserIsLoggedAsBoth) {
  LogCapture log;
  StatementClient c(port_, ClientOf("root", "alice"));
  ASSERT_EQ(c.Submit("SELECT 1").status, 200);
  const std::string id = c.result().id;
  while (!c.done() && c.result().failure.empty()) c.Advance();
  EXPECT_NE(OneLineWith(log, id, "submitted by user 'alice' (authenticated as 'root') from '127.0.0.1:"),
            "");
  EXPECT_NE(OneLineWith(log, id, "ended: user 'alice' (authenticated as 'root')"), "");
  // Acting as oneself names one user.
  StatementClient own(port_, ClientOf("alice"));
  ASSERT_EQ(own.Submit("SELECT 2").status, 200);
  EXPECT_NE(OneLineWith(log, own.result().id, "submitted by user 'alice' from"), "");
}

TEST_F(AuditTest, EveryCancelPathNamesWhoCanceled) {
  LogCapture log;
  // DELETE of the nextUri, by the admin.
  StatementClient a(port_, ClientOf("alice"));
  ASSERT_EQ(a.Submit(kEndlessQuery).status, 200);
  TestHttpClient http(port_);
  EXPECT_EQ(http.Delete(TargetOf(a.next_uri()), As("root")).status, 204);
  EXPECT_NE(OneLineWith(log, a.result().id,
                        "of user 'alice' canceled by user 'root' from 127.0.0.1:"),
            "");
  EXPECT_NE(OneLineWith(log, a.result().id, "(DELETE of its nextUri)"), "");
  // DELETE /v1/query/{id}, by its own user.
  StatementClient b(port_, ClientOf("alice"));
  ASSERT_EQ(b.Submit(kEndlessQuery).status, 200);
  EXPECT_EQ(http.Delete("/v1/query/" + b.result().id, As("alice")).status, 204);
  EXPECT_NE(OneLineWith(log, b.result().id, "canceled by user 'alice' from"), "");
  EXPECT_NE(OneLineWith(log, b.result().id, "(DELETE /v1/query/{id})"), "");
  // The debug pages' cancel, by the admin acting as alice.
  StatementClient d(port_, ClientOf("alice"));
  ASSERT_EQ(d.Submit(kEndlessQuery).status, 200);
  EXPECT_EQ(http.Post("/cancel_query?query_id=" + d.result().id, "", As("root", "alice")).status,
            200);
  EXPECT_NE(OneLineWith(log, d.result().id,
                        "canceled by user 'alice' (authenticated as 'root') from"),
            "");
}

TEST_F(AuditTest, VarzIsForAdminsOnly) {
  TestHttpClient http(port_);
  TestResponse denied = http.Get("/varz", As("alice"));
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_EQ(denied.body.find("auth_password_file="), std::string::npos);
  TestResponse admin = http.Get("/varz", As("root"));
  EXPECT_EQ(admin.status, 200);
  EXPECT_NE(admin.body.find("--logtostderr="), std::string::npos) << admin.body;
}

class UnauthenticatedAuditTest : public DefaultServerTest {};

TEST_F(UnauthenticatedAuditTest, UserNamesAndStatementsAreEscapedInTheLog) {
  LogCapture log;
  // Without authentication the Basic user name is taken as it is: a LF in it would forge a
  // log line.
  StatementOptions o;
  o.user = "";
  o.headers = {{"Authorization",
                "Basic " + Base64Encode("eve\nI1125 00:00:00.000000 1 forged.cc:1] admin:x")}};
  StatementClient c(port_, o);
  ASSERT_EQ(c.Submit("SELECT 1 -- \r\x1b[2K hidden").status, 200);
  while (!c.done() && c.result().failure.empty()) c.Advance();
  const std::string line = OneLineWith(log, c.result().id, "submitted by user 'eve\\x0aI1125");
  EXPECT_NE(line, "");
  EXPECT_NE(line.find("\\x0d\\x1b[2K hidden"), std::string::npos) << line;
  EXPECT_TRUE(AllLinesClean(log));
}

TEST_F(UnauthenticatedAuditTest, CrossOriginWritesAreRefusedOnEveryPath) {
  TestHttpClient http(port_);
  const Headers evil = {{"X-Trino-User", "alice"}, {"Origin", "https://evil.example"}};
  const int64_t submitted = server_->coordinator()->GetMetrics().submitted;
  TestResponse post = http.Post("/v1/statement", "SELECT 1", evil);
  EXPECT_EQ(post.status, 403) << post.body;
  EXPECT_NE(post.body.find("evil.example"), std::string::npos) << post.body;
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, submitted) << "nothing ran";
  // A cancel, by each path, is refused the same way and the query goes on.
  StatementClient c(port_);
  ASSERT_EQ(c.Submit(kEndlessQuery).status, 200);
  EXPECT_EQ(http.Delete(TargetOf(c.next_uri()), evil).status, 403);
  EXPECT_EQ(http.Delete("/v1/query/" + c.result().id, evil).status, 403);
  EXPECT_EQ(http.Post("/cancel_query?query_id=" + c.result().id, "", evil).status, 403);
  EXPECT_EQ(http.Post("/no/such/path", "", evil).status, 403);
  EXPECT_FALSE(ClientRequestState::IsTerminal(
      server_->coordinator()->Find(*ParsedId(c.result().id))->state()));
  // The same requests from this server's own origin (the debug pages) or with no Origin at
  // all (every Trino client) are served.
  Headers own = c.UserHeaders();  // its owner may cancel it
  own.emplace_back("Origin", "http://127.0.0.1:" + std::to_string(port_));
  EXPECT_EQ(http.Post("/v1/statement", "SELECT 1", own).status, 200);
  EXPECT_EQ(http.Post("/cancel_query?query_id=" + c.result().id, "", own).status, 200);
  EXPECT_EQ(http.Post("/v1/statement", "SELECT 1", {{"X-Trino-User", "alice"}}).status, 200);
  // Reading is never refused.
  EXPECT_EQ(http.Get("/v1/query", evil).status, 200);
}

TEST_F(UnauthenticatedAuditTest, ProtocolErrorBodiesAreNotSniffed) {
  TestHttpClient http(port_);
  for (const std::string& target :
       {std::string("/v1/statement/executing/nope/x/1"), std::string("/no/such/page"),
        std::string("/v1/query/not-an-id")}) {
    TestResponse r = http.Get(target, {{"X-Trino-User", "alice"}});
    EXPECT_GE(r.status, 400) << target;
    EXPECT_EQ(r.Header("X-Content-Type-Options"), "nosniff") << target;
  }
  TestResponse ok = http.Get("/v1/info", {{"X-Trino-User", "alice"}});
  EXPECT_EQ(ok.Header("X-Content-Type-Options"), "nosniff");
}

TEST_F(UnauthenticatedAuditTest, NonFiniteMaxWaitIsRefused) {
  StatementClient c(port_);
  ASSERT_EQ(c.Submit(kEndlessQuery).status, 200);
  TestHttpClient http(port_);
  for (const char* wait : {"nans", "infs", "nanms", "-infs", "1e400s"}) {
    TestResponse r = http.Get(TargetOf(c.next_uri()) + "?maxWait=" + wait, c.UserHeaders());
    EXPECT_EQ(r.status, 400) << wait << ": " << r.body;
  }
  // A small finite value is fine.
  EXPECT_EQ(http.Get(TargetOf(c.next_uri()) + "?maxWait=0.01ms", c.UserHeaders()).status, 200);
  EXPECT_EQ(c.Cancel().status, 204);
}

}  // namespace
}  // namespace qr::testing
