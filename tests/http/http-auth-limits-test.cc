// BasicAuthenticator through its webserver hook (Check()): verifications in flight count
// against the login limit, and the client address behind a trusted proxy.

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http/client-address.h"
#include "http/http-auth.h"
#include "util/mutex.h"
#include "http/webserver.h"
#include "http-auth-test-util.h"

namespace qr {
namespace {

using Result = BasicAuthenticator::Result;

/// glog timestamps every LOG line through mktime(), which re-reads TZ (free + strdup) under a
/// glibc lock that TSan cannot see: with TZ unset, verification threads logging failures at
/// once are reported as a race. Naming the default zone explicitly (same local time) makes
/// glibc skip the re-read; set before any test starts a thread (as debug-pages-test.cc does).
class FixedTimeZone : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TZ", ":/etc/localtime", /*overwrite=*/0); }
};
const auto* const kFixedTimeZone = ::testing::AddGlobalTestEnvironment(new FixedTimeZone);

HttpRequest Request(const std::string& authorization, const std::string& remote,
                    const std::vector<std::string>& forwarded_for = {}) {
  HttpRequest req;
  req.headers.set("Authorization", authorization);
  for (const std::string& f : forwarded_for) req.headers.insert("X-Forwarded-For", f);
  req.remote_address = remote;
  return req;
}

/// Runs Check() and waits for a deferred verdict: 200 when allowed, else the denial's status.
unsigned CheckAndWait(BasicAuthenticator& auth, HttpRequest req) {
  Mutex mu;
  CondVar cv;
  bool done = false;
  unsigned status = 0;
  HttpResponse denied;
  AuthVerdict verdict = auth.Check(req, &denied, [&]() -> AuthCallback {
    return [&](bool ok, std::string, HttpResponse r) {
      MutexLock l(&mu);
      status = ok ? 200 : r.status;
      done = true;
      cv.NotifyAll();
    };
  });
  if (verdict == AuthVerdict::kAllow) return 200;
  if (verdict == AuthVerdict::kDeny) return denied.status;
  MutexLock l(&mu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done && cv.WaitUntil(&mu, deadline)) {
  }
  EXPECT_TRUE(done) << "no verdict within 30 s";
  return status;
}

// 150 concurrent guesses for one (user, address) pair, all arriving while the first
// verifications still run: only 'max_failures' of them are verified, the others get 429.
TEST(BasicAuthenticatorLimitsTest, ConcurrentGuessesVerifyAtMostMaxFailures) {
  constexpr int kThreads = 5, kGuessesPerThread = 30, kMaxFailures = 10;
  Mutex mu;
  CondVar cv;
  bool release = false;  // Holds every verification until all guesses were checked.
  int answered = 0, unauthorized = 0;
  BasicAuthenticator::Options o = Limits(kMaxFailures);
  o.verify_threads = 4;
  o.max_pending_verifications = 1000;
  o.before_verify = [&] {
    MutexLock l(&mu);
    while (!release) cv.Wait(&mu);
  };
  BasicAuthenticator auth(Users(), o);
  std::atomic<int> deferred{0}, limited{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kGuessesPerThread; ++i) {
        HttpRequest req = Request(Basic("alice", "guess-" + std::to_string(t * 100 + i)),
                                  "127.0.0.1:" + std::to_string(1000 + t));
        HttpResponse denied;
        AuthVerdict v = auth.Check(req, &denied, [&]() -> AuthCallback {
          return [&](bool, std::string, HttpResponse r) {
            MutexLock l(&mu);
            ++answered;
            unauthorized += r.status == 401;
            cv.NotifyAll();
          };
        });
        if (v == AuthVerdict::kDeferred) {
          ++deferred;
        } else if (v == AuthVerdict::kDeny && denied.status == 429) {
          EXPECT_FALSE(denied.headers.empty());  // Retry-After.
          ++limited;
        } else {
          ++other;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(deferred.load(), kMaxFailures);
  EXPECT_EQ(limited.load(), kThreads * kGuessesPerThread - kMaxFailures);
  EXPECT_EQ(other.load(), 0);
  {
    MutexLock l(&mu);
    release = true;
    cv.NotifyAll();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (answered < deferred.load() && cv.WaitUntil(&mu, deadline)) {
    }
    EXPECT_EQ(answered, deferred.load());
    EXPECT_EQ(unauthorized, deferred.load());
  }
  EXPECT_EQ(auth.verifications(), static_cast<uint64_t>(kMaxFailures));
  EXPECT_EQ(auth.failures(), static_cast<uint64_t>(kMaxFailures));
  EXPECT_EQ(auth.pending_verifications(), 0u);
  // Now limited by its failures; another user from the address is not.
  std::string user;
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "127.0.0.1:1", &user),
            Result::kRateLimited);
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "127.0.0.1:1", &user), Result::kOk);
}

// A successful verification gives its reservation back: a user who logs in right is never
// short of budget because of it.
TEST(BasicAuthenticatorLimitsTest, SuccessfulVerificationsLeaveTheBudget) {
  BasicAuthenticator::Options o = Limits(1);
  o.cache_capacity = 1;
  BasicAuthenticator auth(Users(), o);
  for (int i = 0; i < 5; ++i) {
    // alice and bob evict each other from the cache: every login is verified.
    EXPECT_EQ(CheckAndWait(auth, Request(Basic("alice", "alice-pw"), "10.0.0.1:1")), 200u);
    EXPECT_EQ(CheckAndWait(auth, Request(Basic("bob", "bob-pw"), "10.0.0.1:1")), 200u);
  }
  EXPECT_EQ(auth.verifications(), 10u);
  EXPECT_EQ(auth.tracked_addresses(), 0u);
}

TEST(BasicAuthenticatorLimitsTest, ClientAddressComesFromTrustedProxiesOnly) {
  BasicAuthenticator::Options o = Limits(3);
  ASSERT_TRUE(IpNetworks::Parse("127.0.0.1, 10.0.0.0/8, ::1", &o.trusted_proxies).ok());
  BasicAuthenticator auth(Users(), o);
  const std::string creds = Basic("alice", "x");
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "127.0.0.1:5", {"198.51.100.7"})),
            "198.51.100.7");
  // What the client wrote itself (the left part) is not believed.
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "127.0.0.1:5", {"203.0.113.9, 198.51.100.7"})),
            "198.51.100.7");
  // Trusted hops are skipped; several headers are one list.
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "[::1]:5", {"198.51.100.7", "10.1.2.3:80"})),
            "198.51.100.7");
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "127.0.0.1:5")), "127.0.0.1");
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "127.0.0.1:5", {"unknown"})), "127.0.0.1");
  // An untrusted peer cannot name another client.
  EXPECT_EQ(auth.ClientAddressOf(Request(creds, "192.0.2.1:5", {"198.51.100.7"})), "192.0.2.1");
  BasicAuthenticator no_proxies(Users(), Limits(3));
  EXPECT_EQ(no_proxies.ClientAddressOf(Request(creds, "127.0.0.1:5", {"198.51.100.7"})),
            "127.0.0.1");
}

// Behind a same-host proxy every connection is 127.0.0.1: the failures of one client through
// it limit that client only, however it rotates what it writes into X-Forwarded-For.
TEST(BasicAuthenticatorLimitsTest, FailuresBehindATrustedProxyLimitTheClientOnly) {
  BasicAuthenticator::Options o = Limits(3);
  ASSERT_TRUE(IpNetworks::Parse("127.0.0.1", &o.trusted_proxies).ok());
  BasicAuthenticator auth(Users(), o);
  for (int i = 0; i < 3; ++i) {
    const std::string spoofed = "203.0.113." + std::to_string(i) + ", 198.51.100.7";
    EXPECT_EQ(CheckAndWait(auth, Request(Basic("alice", "guess"), "127.0.0.1:5", {spoofed})),
              401u);
  }
  EXPECT_EQ(CheckAndWait(auth, Request(Basic("alice", "alice-pw"), "127.0.0.1:5",
                                       {"203.0.113.99, 198.51.100.7"})),
            429u);
  EXPECT_EQ(CheckAndWait(auth, Request(Basic("alice", "alice-pw"), "127.0.0.1:5",
                                       {"198.51.100.8"})),
            200u);
  // The proxy's own address (cached now).
  EXPECT_EQ(CheckAndWait(auth, Request(Basic("alice", "alice-pw"), "127.0.0.1:5")), 200u);
  EXPECT_EQ(auth.verifications(), 4u);
}

}  // namespace
}  // namespace qr
