// BasicAuthenticator: verification, the credential cache, the per-address failure limit and
// what failed logins log.

#include "http/http-auth.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "testutil/log-capture.h"
#include "testutil/wait.h"
#include "util/mutex.h"
#include "http/webserver.h"
#include "http-auth-test-util.h"

namespace qr {
namespace {

using Result = BasicAuthenticator::Result;
using qr::testing::LogCapture;

TEST(BasicAuthenticatorTest, AcceptsOnlyTheRightPassword) {
  BasicAuthenticator auth(Users(), Limits(100));
  std::string user;
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
  EXPECT_EQ(user, "alice");
  EXPECT_EQ(auth.Authenticate(Basic("alice", "bob-pw"), "10.0.0.1:1", &user),
            Result::kWrongPassword);
  EXPECT_EQ(auth.Authenticate(Basic("carol", "alice-pw"), "10.0.0.1:1", &user),
            Result::kUnknownUser);
  EXPECT_EQ(auth.Authenticate("", "10.0.0.1:1", &user), Result::kMissing);
  EXPECT_EQ(auth.Authenticate("Bearer abc", "10.0.0.1:1", &user), Result::kMalformed);
  EXPECT_EQ(auth.Authenticate("Basic !!!!", "10.0.0.1:1", &user), Result::kMalformed);
  EXPECT_EQ(auth.Authenticate("Basic " + Base64Encode("no-colon"), "10.0.0.1:1", &user),
            Result::kMalformed);
  // The scheme name is case-insensitive (RFC 7617).
  EXPECT_EQ(auth.Authenticate("basic " + Base64Encode("bob:bob-pw"), "10.0.0.1:1", &user),
            Result::kOk);
  EXPECT_EQ(user, "bob");
}

TEST(BasicAuthenticatorTest, CachesSuccessfulVerificationsOnly) {
  BasicAuthenticator auth(Users(), Limits(100));
  std::string user;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
  }
  EXPECT_EQ(auth.verifications(), 1u);
  EXPECT_EQ(auth.cache_hits(), 49u);
  // A wrong password is verified every time (and never cached).
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(auth.Authenticate(Basic("alice", "x"), "10.0.0.2:1", &user), Result::kWrongPassword);
  }
  EXPECT_EQ(auth.verifications(), 4u);
  EXPECT_EQ(auth.cached_credentials(), 1u);
}

TEST(BasicAuthenticatorTest, CacheIsBounded) {
  BasicAuthenticator::Options o = Limits(1000);
  o.cache_capacity = 1;
  BasicAuthenticator auth(Users(), o);
  std::string user;
  ASSERT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
  ASSERT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kOk);
  EXPECT_EQ(auth.cached_credentials(), 1u);
  // alice was evicted: verified again.
  ASSERT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
  EXPECT_EQ(auth.verifications(), 3u);
}

TEST(BasicAuthenticatorTest, ReloadDropsTheCacheAndOldUsers) {
  BasicAuthenticator auth(Users(), Limits(100));
  std::string user;
  ASSERT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kOk);
  std::string carol;
  ASSERT_TRUE(MakePasswordEntryLine("carol", "c", kMinPasswordIterations, &carol).ok());
  PasswordFile file;
  ASSERT_TRUE(PasswordFile::Parse(carol, "new", &file).ok());
  auth.Reload(std::move(file));
  EXPECT_EQ(auth.cached_credentials(), 0u);
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kUnknownUser);
  EXPECT_EQ(auth.Authenticate(Basic("carol", "c"), "10.0.0.1:1", &user), Result::kOk);
}

// A verification of the old file that ends after a Reload() lets its own request through
// (it was right when the request came) but is not cached: otherwise a removed user or an old
// password would keep working until evicted.
TEST(BasicAuthenticatorTest, VerificationRacingAReloadIsNotCached) {
  BasicAuthenticator* self = nullptr;
  std::string alice_new;
  ASSERT_TRUE(MakePasswordEntryLine("alice", "new-pw", kMinPasswordIterations, &alice_new).ok());
  std::atomic<int> reloads{0};
  BasicAuthenticator::Options o = Limits(100);
  o.before_verify = [&] {
    if (reloads.fetch_add(1) > 0) return;  // Only the first verification races a reload.
    PasswordFile file;
    ASSERT_TRUE(PasswordFile::Parse(alice_new, "new", &file).ok());
    self->Reload(std::move(file));
  };
  BasicAuthenticator auth(Users(), o);
  self = &auth;

  HttpRequest req;
  req.headers.set("Authorization", Basic("alice", "alice-pw"));
  req.remote_address = "10.0.0.1:1";
  Mutex mu;
  CondVar cv;
  std::optional<bool> allowed;
  HttpResponse denied;
  AuthVerdict verdict = auth.Check(req, &denied, [&]() -> AuthCallback {
    return [&](bool ok, std::string, HttpResponse) {
      MutexLock l(&mu);
      allowed = ok;
      cv.NotifyAll();
    };
  });
  ASSERT_EQ(verdict, AuthVerdict::kDeferred);
  {
    MutexLock l(&mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!allowed && cv.WaitUntil(&mu, deadline)) {
    }
    ASSERT_TRUE(allowed.has_value()) << "no verdict within 30 s";
    EXPECT_TRUE(*allowed) << "checked against the users as the request arrived";
  }
  EXPECT_EQ(auth.cached_credentials(), 0u) << "a success against a replaced file was cached";
  std::string user;
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user),
            Result::kWrongPassword);
  EXPECT_EQ(auth.Authenticate(Basic("alice", "new-pw"), "10.0.0.1:1", &user), Result::kOk);
  EXPECT_EQ(auth.cached_credentials(), 1u);
}

TEST(BasicAuthenticatorTest, LimitsFailuresPerUserAndAddressWithoutVerifying) {
  BasicAuthenticator auth(Users(), Limits(3));
  std::string user;
  ASSERT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kOk);
  ASSERT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), "10.0.0.1:" + std::to_string(i), &user),
              Result::kWrongPassword);
  }
  const uint64_t verified = auth.verifications();
  const uint64_t hits = auth.cache_hits();
  // The pair is limited: even the right password, cached, is refused, and nothing is verified
  // or looked up any more (a cache hit would confirm a guess for free).
  EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), "10.0.0.1:9", &user),
            Result::kRateLimited);
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:9", &user),
            Result::kRateLimited);
  EXPECT_EQ(auth.verifications(), verified);
  EXPECT_EQ(auth.cache_hits(), hits);
  EXPECT_EQ(auth.rate_limited(), 2u);
  // Another user from that address is not limited: cached or verified.
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:9", &user), Result::kOk);
  EXPECT_EQ(auth.cache_hits(), hits + 1);
  EXPECT_EQ(auth.Authenticate(Basic("bob", "wrong"), "10.0.0.1:9", &user),
            Result::kWrongPassword);
  // Nor is the same user from another address.
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.2:1", &user), Result::kOk);
  // An IPv6 address is keyed without its port.
  for (int i = 0; i < 3; ++i) {
    auth.Authenticate(Basic("bob", "guess"), "[2001:db8::1]:" + std::to_string(100 + i), &user);
  }
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "[2001:db8::1]:200", &user),
            Result::kRateLimited);
}

// A local client rotating through 127.0.0.0/8 (or ::1), or a host through its IPv6 /64,
// gets no fresh budget.
TEST(BasicAuthenticatorTest, LoopbackAndIpv6SubnetShareOneBudget) {
  BasicAuthenticator auth(Users(), Limits(3));
  std::string user;
  for (const char* from : {"127.0.0.1:1", "127.0.0.2:1", "127.1.2.3:1"}) {
    EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), from, &user), Result::kWrongPassword);
  }
  EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), "127.9.9.9:1", &user),
            Result::kRateLimited);
  EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), "[::1]:1", &user), Result::kRateLimited);
  EXPECT_EQ(auth.Authenticate(Basic("alice", "guess"), "[::ffff:127.0.0.5]:1", &user),
            Result::kRateLimited);
  for (const char* from : {"[2001:db8:1:2::1]:1", "[2001:db8:1:2::2]:1", "[2001:db8:1:2::3]:1"}) {
    EXPECT_EQ(auth.Authenticate(Basic("bob", "guess"), from, &user), Result::kWrongPassword);
  }
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "[2001:db8:1:2:ffff::9]:1", &user),
            Result::kRateLimited);
  // The next /64, and other IPv4 addresses, have budgets of their own.
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "[2001:db8:1:3::1]:1", &user), Result::kOk);
  EXPECT_EQ(auth.Authenticate(Basic("alice", "alice-pw"), "10.0.0.1:1", &user), Result::kOk);
}

TEST(BasicAuthenticatorTest, LimitEndsWithItsWindow) {
  BasicAuthenticator::Options o = Limits(1);
  o.failure_window = std::chrono::seconds(1);
  BasicAuthenticator auth(Users(), o);
  std::string user;
  ASSERT_EQ(auth.Authenticate(Basic("bob", "x"), "10.0.0.1:1", &user), Result::kWrongPassword);
  ASSERT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kRateLimited);
  auto limited = [&] {
    return auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user) == Result::kRateLimited;
  };
  EXPECT_TRUE(WaitFor([&] { return !limited(); }, std::chrono::seconds(10),
                      "the one-second window to end"));
  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw"), "10.0.0.1:1", &user), Result::kOk);
}

TEST(BasicAuthenticatorTest, TrackedAddressesAreBounded) {
  BasicAuthenticator::Options o = Limits(100);
  o.max_tracked_addresses = 8;
  BasicAuthenticator auth(Users(), o);
  std::string user;
  for (int i = 0; i < 50; ++i) {
    auth.Authenticate("Basic !", "10.1.0." + std::to_string(i) + ":1", &user);
    ASSERT_LE(auth.tracked_addresses(), 8u);
  }
  // So are (user, address) pairs of one address.
  for (int i = 0; i < 50; ++i) {
    auth.Authenticate(Basic("user" + std::to_string(i), "x"), "10.2.0.1:1", &user);
    ASSERT_LE(auth.tracked_addresses(), 8u);
  }
  EXPECT_EQ(auth.failures(), 100u);
}

TEST(BasicAuthenticatorTest, FailedLoginLogNamesUserAndAddressNotPassword) {
  LogCapture log;
  BasicAuthenticator auth(Users(), Limits(2));
  std::string user;
  auth.Authenticate(Basic("alice", "Tr0ub4dor&3"), "192.0.2.7:4242", &user);
  auth.Authenticate(Basic("mallory", "correct-horse"), "192.0.2.7:4243", &user);
  auth.Authenticate(Basic("alice", "Tr0ub4dor&3"), "192.0.2.7:4244", &user);
  std::vector<std::string> failed = log.Matching("Authentication failed");
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[0], "Authentication failed for user 'alice' from 192.0.2.7: wrong password");
  EXPECT_EQ(failed[1], "Authentication failed for user 'mallory' from 192.0.2.7: unknown user");
  EXPECT_EQ(log.Matching("Too many failed logins for user 'alice' from 192.0.2.7").size(), 1u);
  EXPECT_EQ(log.Matching("Too many failed logins").size(), 1u);
  for (const std::string& line : log.Lines()) {
    EXPECT_EQ(line.find("Tr0ub4dor"), std::string::npos) << line;
    EXPECT_EQ(line.find("correct-horse"), std::string::npos) << line;
  }
  // A long user name (perhaps a password typed into the wrong field) is cut.
  BasicAuthenticator other(Users(), Limits(100));
  other.Authenticate(Basic(std::string(100, 'u'), "pw"), "192.0.2.8:1", &user);
  ASSERT_EQ(log.Matching("192.0.2.8").size(), 1u);
  EXPECT_NE(log.Matching("192.0.2.8")[0].find("...(100 bytes)"), std::string::npos);
}

TEST(RemoteIpTest, StripsThePort) {
  EXPECT_EQ(RemoteIp("127.0.0.1:8080"), "127.0.0.1");
  EXPECT_EQ(RemoteIp("[::1]:8080"), "::1");
}

}  // namespace
}  // namespace qr
