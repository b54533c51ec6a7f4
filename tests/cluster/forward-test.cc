// Forwarding between members (issue 19 item 2): the signed principal, the cluster secret
// file, the routing decision and the REMOTE_HOST_GONE message.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "cluster/forward-auth.h"
#include "cluster/forwarder.h"
#include "util/unique-id.h"

namespace qr {
namespace {

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";
constexpr int64_t kNow = 1790000000000;
constexpr int64_t kWindow = 30000;

PrincipalCheck Verify(const std::string& header, const std::string& method = "GET",
                      const std::string& target = "/v1/query/x", int64_t now = kNow,
                      std::string* principal = nullptr, const std::string& secret = kSecret) {
  std::string p;
  PrincipalCheck c = VerifyForwardedPrincipal(secret, header, method, target, now, kWindow, &p);
  if (principal != nullptr) *principal = p;
  return c;
}

TEST(ForwardAuthTest, SignedPrincipalRoundTrips) {
  for (const char* name : {"alice", "bob;semi colon", "ü n i c ø d e", "a\nb"}) {
    const std::string h = SignForwardedPrincipal(kSecret, name, "GET", "/v1/query/x", kNow);
    std::string principal;
    EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow, &principal), PrincipalCheck::kOk) << h;
    EXPECT_EQ(principal, name);
  }
}

TEST(ForwardAuthTest, EveryFieldIsCovered) {
  const std::string h = SignForwardedPrincipal(kSecret, "alice", "GET", "/v1/query/x", kNow);
  EXPECT_EQ(Verify(h, "DELETE"), PrincipalCheck::kBadMac);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/y"), PrincipalCheck::kBadMac);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow, nullptr, std::string(kSecret) + "!"),
            PrincipalCheck::kBadMac);
  // Another principal or time under the same MAC.
  std::string other_user = h.substr(0, h.rfind(';') + 1) + "Ym9i";  // "bob"
  EXPECT_EQ(Verify(other_user), PrincipalCheck::kBadMac);
  std::string other_time = h;
  other_time.replace(3, 13, std::to_string(kNow + 1));
  EXPECT_EQ(Verify(other_time), PrincipalCheck::kBadMac);
  // The method and target are not confused across the field boundary.
  const std::string shifted = SignForwardedPrincipal(kSecret, "alice", "GE", "T/v1/query/x", kNow);
  EXPECT_EQ(Verify(shifted), PrincipalCheck::kBadMac);
}

TEST(ForwardAuthTest, SignedClientAddressRoundTripsAndIsNotAPrincipal) {
  const std::string h = SignForwardedClient(kSecret, "192.0.2.7:51234", "DELETE", "/v1/q", kNow);
  std::string address;
  EXPECT_EQ(VerifyForwardedClient(kSecret, h, "DELETE", "/v1/q", kNow, kWindow, &address),
            PrincipalCheck::kOk);
  EXPECT_EQ(address, "192.0.2.7:51234");
  EXPECT_EQ(VerifyForwardedClient(kSecret, h, "GET", "/v1/q", kNow, kWindow, &address),
            PrincipalCheck::kBadMac);
  // Each signature holds only for its own kind: a signed client address is no user, and a
  // signed user no address.
  std::string principal;
  EXPECT_EQ(VerifyForwardedPrincipal(kSecret, h, "DELETE", "/v1/q", kNow, kWindow, &principal),
            PrincipalCheck::kBadMac);
  const std::string user = SignForwardedPrincipal(kSecret, "alice", "GET", "/v1/q", kNow);
  EXPECT_EQ(VerifyForwardedClient(kSecret, user, "GET", "/v1/q", kNow, kWindow, &address),
            PrincipalCheck::kBadMac);
  EXPECT_EQ(VerifyForwardedClient(kSecret, h, "DELETE", "/v1/q", kNow + kWindow + 1, kWindow,
                                  &address),
            PrincipalCheck::kExpired);
}

TEST(ForwardAuthTest, OnlyWithinTheWindow) {
  const std::string h = SignForwardedPrincipal(kSecret, "alice", "GET", "/v1/query/x", kNow);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow + kWindow), PrincipalCheck::kOk);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow - kWindow), PrincipalCheck::kOk);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow + kWindow + 1), PrincipalCheck::kExpired);
  EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow - kWindow - 1), PrincipalCheck::kExpired);
}

TEST(ForwardAuthTest, MalformedHeadersAreRefused) {
  const std::string mac(64, 'a');
  for (const std::string& h :
       {std::string(""), std::string("alice"), "v1;" + std::to_string(kNow) + ";" + mac,
        "v2;" + std::to_string(kNow) + ";" + mac + ";YWxpY2U=",
        "v1;" + std::to_string(kNow) + ";" + mac.substr(1) + ";YWxpY2U=",
        "v1;-5;" + mac + ";YWxpY2U=", "v1;;" + mac + ";YWxpY2U=",
        "v1;12x;" + mac + ";YWxpY2U=", "v1;" + std::to_string(kNow) + ";" + mac + ";YWxp!2U=",
        "v1;" + std::to_string(kNow) + ";" + mac + ";",
        "v1;" + std::to_string(kNow) + ";" + mac + ";YWxpY2U=;extra"}) {
    std::string principal = "unchanged";
    EXPECT_EQ(Verify(h, "GET", "/v1/query/x", kNow, &principal), PrincipalCheck::kMalformed)
        << h;
    EXPECT_EQ(principal, "");
  }
}

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/qr-forward-test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::remove(path().c_str());
    rmdir(dir_.c_str());
  }
  std::string path() const { return dir_ + "/secret"; }
  void Write(const std::string& text, mode_t mode) {
    std::ofstream(path(), std::ios::binary | std::ios::trunc) << text;
    ASSERT_EQ(chmod(path().c_str(), mode), 0);
  }
  std::string dir_;
};

TEST_F(SecretFileTest, ValidatesTheFile) {
  std::string secret;
  Status s = LoadClusterSecret(path(), &secret);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path()), std::string::npos) << s.message();
  EXPECT_FALSE(LoadClusterSecret(dir_, &secret).ok());  // a directory

  Write(std::string(kSecret) + "\n", 0644);
  s = LoadClusterSecret(path(), &secret);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("readable by every user"), std::string::npos) << s.message();

  Write("short\n", 0600);
  s = LoadClusterSecret(path(), &secret);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at least 16"), std::string::npos) << s.message();
  Write("", 0600);
  EXPECT_FALSE(LoadClusterSecret(path(), &secret).ok());

  Write(std::string(kSecret) + "\n", 0640);
  ASSERT_TRUE(LoadClusterSecret(path(), &secret).ok());
  EXPECT_EQ(secret, kSecret);  // the trailing newline dropped
}

/// A member view for DecideRoute(): live members 2 and 3, member 4 departed, 5 never seen.
bool Lookup(uint32_t id, ClusterMember* live, DepartedMember* departed) {
  static const std::map<uint32_t, std::string> kLive = {{2, "http://10.0.0.2:8080"},
                                                        {3, "http://10.0.0.3:8080"}};
  auto it = kLive.find(id);
  if (it != kLive.end()) {
    live->id = id;
    live->uri = it->second;
    return true;
  }
  *departed = DepartedMember{};
  departed->member.id = id;
  if (id == 4) {
    departed->member.uri = "http://10.0.0.4:8080";
    departed->gone_since_ms = kNow;
  }
  return false;
}

TEST(DecideRouteTest, LocalForwardOrGone) {
  using Kind = RouteDecision::Kind;
  // No owner (alone, or no member id yet), or this member: served here as always.
  EXPECT_EQ(DecideRoute(0, 2, false, Lookup).kind, Kind::kLocal);
  EXPECT_EQ(DecideRoute(2, 2, false, Lookup).kind, Kind::kLocal);
  // Already forwarded once: never again, even to a live owner.
  EXPECT_EQ(DecideRoute(3, 2, true, Lookup).kind, Kind::kLocal);
  EXPECT_EQ(DecideRoute(4, 2, true, Lookup).kind, Kind::kLocal);

  RouteDecision d = DecideRoute(3, 2, false, Lookup);
  EXPECT_EQ(d.kind, Kind::kForward);
  EXPECT_EQ(d.member.uri, "http://10.0.0.3:8080");
  // Before its own registration a member still forwards.
  EXPECT_EQ(DecideRoute(3, 0, false, Lookup).kind, Kind::kForward);

  d = DecideRoute(4, 2, false, Lookup);
  EXPECT_EQ(d.kind, Kind::kGone);
  EXPECT_EQ(d.member.id, 4u);
  EXPECT_EQ(d.member.uri, "http://10.0.0.4:8080");
  EXPECT_EQ(d.gone_since_ms, kNow);
  d = DecideRoute(5, 2, false, Lookup);
  EXPECT_EQ(d.kind, Kind::kGone);
  EXPECT_EQ(d.member.id, 5u);
  EXPECT_EQ(d.gone_since_ms, 0);
}

TEST(DecideRouteTest, GoneMessageNamesTheMemberItsUriAndSinceWhen) {
  const UniqueId id = WithQueryOwner(UniqueId{0x1234, 0}, 4);
  std::string msg = RemoteHostGoneMessage(id, DecideRoute(4, 2, false, Lookup), "prod");
  EXPECT_NE(msg.find(PrintId(id)), std::string::npos) << msg;
  EXPECT_NE(msg.find("member 4 of cluster 'prod'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("http://10.0.0.4:8080"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gone since 2026-09-21T"), std::string::npos) << msg;  // kNow, UTC
  msg = RemoteHostGoneMessage(id, DecideRoute(5, 2, false, Lookup), "prod");
  EXPECT_NE(msg.find("member 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a live member"), std::string::npos) << msg;
}

}  // namespace
}  // namespace qr
