#include "http/http-auth.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http/base64.h"
#include "util/mutex.h"
#include "http/password-file.h"
#include "http/webserver.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;

// The authenticate hook with BasicAuthenticator: password checks run on the verification
// threads, never on the I/O threads.

/// Holds the verification threads (BasicAuthenticator::Options::before_verify) while closed.
class Gate {
 public:
  void Pass() {
    MutexLock l(&mu_);
    ++waiting_;
    cv_.NotifyAll();
    while (!open_) cv_.Wait(&mu_);
    --waiting_;
  }
  void Close() {
    MutexLock l(&mu_);
    open_ = false;
  }
  void Open() {
    MutexLock l(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }
  /// Waits until 'n' threads wait at the gate; false at the deadline.
  bool WaitForWaiting(int n) {
    MutexLock l(&mu_);
    auto deadline = Clock::now() + kDeadline;
    while (waiting_ < n) {
      if (!cv_.WaitUntil(&mu_, deadline) && waiting_ < n) return false;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ QR_GUARDED_BY(mu_) = true;
  int waiting_ QR_GUARDED_BY(mu_) = 0;
};

class WebserverAuthTest : public WebserverTest {
 protected:
  ~WebserverAuthTest() override {
    gate_.Open();  // Before the authenticator joins its threads.
    server_.reset();
  }

  /// Users "alice", "bob"... with password "<user>-pw"; 'max_pending' verifications.
  void StartAuthServer(size_t max_pending) {
    std::string lines;
    for (const char* user : {"alice", "bob", "carol", "dave", "erin"}) {
      std::string line;
      ASSERT_TRUE(MakePasswordEntryLine(user, std::string(user) + "-pw", kMinPasswordIterations,
                                        &line)
                      .ok());
      lines += line + "\n";
    }
    PasswordFile file;
    ASSERT_TRUE(PasswordFile::Parse(lines, "test", &file).ok());
    BasicAuthenticator::Options ao;
    ao.max_pending_verifications = max_pending;
    ao.before_verify = [this] { gate_.Pass(); };
    auth_ = std::make_unique<BasicAuthenticator>(std::move(file), ao);
    Webserver::Options o = TestOptions();
    o.authenticate = [a = auth_.get()](HttpRequest& req, HttpResponse* denied,
                                       const AuthDeferrer& defer) {
      return a->Check(req, denied, defer);
    };
    StartServer(o, [](Webserver& s) {
      s.RegisterHandler(http::verb::get, "/whoami", [](HttpRequest& req, ResponseCallback cb) {
        cb(HttpResponse::Text(200, req.authenticated_user));
      });
    });
  }

  static std::string WhoAmI(const std::string& user) {
    return Get("/whoami", "Authorization: Basic " + Base64Encode(user + ":" + user + "-pw") +
                              "\r\n");
  }

  /// Sends 'request' on 'c' with the verification threads held, waits until its password check
  /// waits at the gate (so it surely runs on a verification thread, after the I/O thread moved
  /// on), then lets it through. False if the check never reached the gate.
  [[nodiscard]] bool SendWithDeferredCheck(Client& c, const std::string& request) {
    gate_.Close();
    c.Send(request);
    const bool held = gate_.WaitForWaiting(1);
    gate_.Open();
    return held;
  }

  Gate gate_;
  std::unique_ptr<BasicAuthenticator> auth_;
};

TEST_F(WebserverAuthTest, CachedClientIsServedWhileVerificationsArePending) {
  StartAuthServer(64);
  Client fast(server_->port());
  ASSERT_EQ(RoundTrip(fast, WhoAmI("alice")).body, "alice");  // Verified once, then cached.
  gate_.Close();
  // Four first logins: one verifying (held at the gate), three queued.
  std::vector<std::unique_ptr<Client>> slow;
  for (const char* user : {"bob", "carol", "dave", "erin"}) {
    slow.push_back(std::make_unique<Client>(server_->port()));
    slow.back()->Send(WhoAmI(user));
  }
  ASSERT_TRUE(gate_.WaitForWaiting(1));
  ASSERT_TRUE(WaitFor([&] { return auth_->pending_verifications() == 4; }));
  // With both I/O threads free, the cached client is answered while all four still wait.
  constexpr int kRequests = 50;
  int answered = 0;
  for (int i = 0; i < kRequests; ++i) {
    Response r = RoundTrip(fast, WhoAmI("alice"));
    if (r.status == 200 && r.body == "alice") ++answered;
  }
  EXPECT_EQ(answered, kRequests);
  EXPECT_EQ(auth_->pending_verifications(), 4u);
  EXPECT_EQ(auth_->verifications(), 1u);
  gate_.Open();
  const char* users[] = {"bob", "carol", "dave", "erin"};
  for (size_t i = 0; i < slow.size(); ++i) {
    Response r;
    ASSERT_TRUE(slow[i]->Read(&r));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, users[i]);
  }
  EXPECT_EQ(auth_->verifications(), 5u);
  EXPECT_EQ(auth_->pending_verifications(), 0u);
}

TEST_F(WebserverAuthTest, NextRequestOnTheConnectionWaitsForTheVerification) {
  StartAuthServer(64);
  Client c(server_->port());
  ASSERT_TRUE(SendWithDeferredCheck(c, WhoAmI("bob") + WhoAmI("bob")));  // Answered in order.
  Response first, second;
  ASSERT_TRUE(c.Read(&first));
  ASSERT_TRUE(c.Read(&second));
  EXPECT_EQ(first.body, "bob");
  EXPECT_EQ(second.body, "bob");
  EXPECT_EQ(auth_->verifications(), 1u);
  EXPECT_EQ(auth_->cache_hits(), 1u);
}

TEST_F(WebserverAuthTest, FullVerificationQueueAnswers503WithRetryAfter) {
  StartAuthServer(2);
  gate_.Close();
  Client a(server_->port()), b(server_->port());
  a.Send(WhoAmI("bob"));
  b.Send(WhoAmI("carol"));
  ASSERT_TRUE(WaitFor([&] { return auth_->pending_verifications() == 2; }));
  Client c(server_->port());
  Response busy = RoundTrip(c, WhoAmI("dave"));
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.Header("retry-after"), "1");
  EXPECT_EQ(auth_->verify_queue_full(), 1u);
  // Missing credentials are still answered at once, without a slot.
  EXPECT_EQ(RoundTrip(c, Get("/whoami")).status, 401);
  gate_.Open();
  Response r;
  ASSERT_TRUE(a.Read(&r));
  EXPECT_EQ(r.body, "bob");
  ASSERT_TRUE(b.Read(&r));
  EXPECT_EQ(r.body, "carol");
  EXPECT_EQ(RoundTrip(c, WhoAmI("dave")).body, "dave");  // A slot is free again.
  EXPECT_EQ(auth_->verify_queue_full(), 1u);
}

TEST_F(WebserverAuthTest, WrongPasswordIsAnswered401FromTheVerificationThread) {
  StartAuthServer(64);
  Client c(server_->port());
  Response r = RoundTrip(
      c, Get("/whoami", "Authorization: Basic " + Base64Encode("bob:nope") + "\r\n"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.Header("www-authenticate"), "Basic realm=\"coordinatord\"");
  EXPECT_EQ(RoundTrip(c, WhoAmI("bob")).body, "bob");  // The connection stays usable.
  EXPECT_EQ(auth_->failures(), 1u);
}

/// The head of a POST /echo announcing 'length' body bytes, with 'credentials' ("user:pw";
/// none if empty) and 'extra' header lines.
std::string PostHead(const std::string& credentials, size_t length, const std::string& extra = "") {
  std::string head = "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                     std::to_string(length) + "\r\n" + extra;
  if (!credentials.empty()) head += "Authorization: Basic " + Base64Encode(credentials) + "\r\n";
  return head + "\r\n";
}

TEST_F(WebserverAuthTest, RefusedRequestIsAnsweredBeforeItsBodyIsRead) {
  StartAuthServer(64);
  // Heads announcing 512 KiB that never comes: the answer cannot wait for the body, and the
  // connection closes after it (the unread body is not a request).
  for (const std::string credentials : {"", "bob:nope"}) {
    SCOPED_TRACE("credentials: '" + credentials + "'");
    Client c(server_->port());
    c.Send(PostHead(credentials, 512 * 1024));
    Response r;
    ASSERT_TRUE(c.Read(&r));
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_TRUE(c.WaitForClose());
  }
  EXPECT_EQ(auth_->failures(), 1u);  // The wrong password; missing credentials are no check.
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
}

TEST_F(WebserverAuthTest, ContinueIsSentOnlyToAnAuthenticatedClient) {
  StartAuthServer(64);
  const std::string expect = "Expect: 100-continue\r\n";
  {
    // A wrong password: the first answer is the 401, never a 100 that would invite the body.
    Client c(server_->port());
    ASSERT_TRUE(SendWithDeferredCheck(c, PostHead("bob:nope", 5, expect)));
    Response r;
    ASSERT_TRUE(c.Read(&r));
    EXPECT_EQ(r.status, 401);
    EXPECT_TRUE(c.WaitForClose());
  }
  // The right one, verified on a verification thread: 100, then the body is read and served,
  // and the connection stays open for the next request.
  Client c(server_->port());
  ASSERT_TRUE(SendWithDeferredCheck(c, PostHead("bob:bob-pw", 5, expect)));
  Response r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.status, 100);
  c.Send("hello");
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("body=hello"), std::string::npos) << r.body;
  EXPECT_EQ(RoundTrip(c, WhoAmI("bob")).body, "bob");
  EXPECT_EQ(auth_->failures(), 1u);
}

TEST_F(WebserverAuthTest, BodyOfAnAdmittedRequestIsReadAfterTheVerification) {
  StartAuthServer(64);
  Client c(server_->port());
  // Head and body at once, then a second request: the body is read once the verification
  // admitted the first, and the second is parsed after it.
  ASSERT_TRUE(SendWithDeferredCheck(c, PostHead("carol:carol-pw", 4) + "ping" + WhoAmI("carol")));
  Response r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("body_size=4\nbody=ping"), std::string::npos) << r.body;
  EXPECT_NE(r.Header("connection"), "close");
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.body, "carol");
}

TEST_F(WebserverAuthTest, ClientGoneDuringVerificationIsHarmless) {
  StartAuthServer(64);
  gate_.Close();
  {
    Client c(server_->port());
    c.Send(WhoAmI("bob"));
    ASSERT_TRUE(gate_.WaitForWaiting(1));
  }  // Disconnects while its verification is held.
  gate_.Open();
  ASSERT_TRUE(WaitFor([&] { return auth_->pending_verifications() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
  // The verification completed (and was cached) for nobody; the server keeps serving.
  EXPECT_EQ(OneShot(WhoAmI("bob")).body, "bob");
  EXPECT_EQ(auth_->verifications(), 1u);
  EXPECT_EQ(auth_->cache_hits(), 1u);
}

TEST_F(WebserverAuthTest, StopsWithVerificationsRunningAndQueued) {
  StartAuthServer(64);
  gate_.Close();
  Client a(server_->port()), b(server_->port());
  a.Send(WhoAmI("bob"));
  b.Send(WhoAmI("carol"));
  ASSERT_TRUE(gate_.WaitForWaiting(1));
  ASSERT_TRUE(WaitFor([&] { return auth_->pending_verifications() == 2; }));
  server_->Stop();
  EXPECT_TRUE(a.WaitForClose());
  EXPECT_TRUE(b.WaitForClose());
  gate_.Open();
  auth_->Stop();  // The queued one is answered 503 to a stopped server; the running one ends.
  EXPECT_EQ(auth_->pending_verifications(), 0u);
  server_.reset();
  auth_.reset();
}

}  // namespace
}  // namespace qr
