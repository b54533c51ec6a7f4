// IpNetworks, ClientIp (X-Forwarded-For behind trusted proxies) and AddressKey.

#include "http/client-address.h"

#include <gtest/gtest.h>

namespace qr {
namespace {

IpNetworks Networks(const std::string& list) {
  IpNetworks n;
  Status s = IpNetworks::Parse(list, &n);
  EXPECT_TRUE(s.ok()) << list << ": " << s.message();
  return n;
}

TEST(IpNetworksTest, ParsesAddressesAndCidrs) {
  IpNetworks n = Networks(" 10.0.0.0/8,192.0.2.7 , 2001:db8::/32, ::1,");
  EXPECT_TRUE(n.Contains("10.200.3.4"));
  EXPECT_FALSE(n.Contains("11.0.0.1"));
  EXPECT_TRUE(n.Contains("192.0.2.7"));
  EXPECT_FALSE(n.Contains("192.0.2.8"));
  EXPECT_TRUE(n.Contains("2001:db8:ffff::1"));
  EXPECT_FALSE(n.Contains("2001:db9::1"));
  EXPECT_TRUE(n.Contains("::1"));
  EXPECT_TRUE(n.Contains("::ffff:10.1.1.1"));  // IPv4-mapped.
  EXPECT_FALSE(n.Contains("not-an-ip"));
  EXPECT_TRUE(Networks("").empty());
  EXPECT_TRUE(Networks("0.0.0.0/0").Contains("8.8.8.8"));
  EXPECT_TRUE(Networks("10.1.2.3/8").Contains("10.9.9.9"));  // Host bits are ignored.
}

TEST(IpNetworksTest, RejectsMalformedEntriesNamingThem) {
  for (const char* bad : {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "localhost",
                          "10.0.0.1, 300.1.1.1", "10.0.0.0/8/8", "10.0.0.0/-1"}) {
    IpNetworks n;
    Status s = IpNetworks::Parse(bad, &n);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("expected an IPv4 or IPv6 address or a CIDR"), std::string::npos)
        << s.message();
  }
  IpNetworks n;
  EXPECT_NE(IpNetworks::Parse("10.0.0.1,bogus", &n).message().find("'bogus'"), std::string::npos);
}

TEST(ClientIpTest, TakesTheLastUntrustedHopOfATrustedPeer) {
  IpNetworks proxies = Networks("127.0.0.1, 10.0.0.0/8");
  EXPECT_EQ(ClientIp("127.0.0.1", "198.51.100.7", proxies), "198.51.100.7");
  EXPECT_EQ(ClientIp("127.0.0.1", "1.1.1.1, 198.51.100.7, 10.0.0.2", proxies), "198.51.100.7");
  EXPECT_EQ(ClientIp("127.0.0.1", "198.51.100.7:4242", proxies), "198.51.100.7");
  EXPECT_EQ(ClientIp("127.0.0.1", "[2001:db8::5]:4242", proxies), "2001:db8::5");
  EXPECT_EQ(ClientIp("127.0.0.1", "2001:db8::5", proxies), "2001:db8::5");
  EXPECT_EQ(ClientIp("127.0.0.1", "10.0.0.3, 10.0.0.2", proxies), "10.0.0.3");  // All trusted.
  EXPECT_EQ(ClientIp("127.0.0.1", "198.51.100.7, garbage", proxies), "127.0.0.1");
  EXPECT_EQ(ClientIp("127.0.0.1", " , ", proxies), "127.0.0.1");
  EXPECT_EQ(ClientIp("127.0.0.1", "", proxies), "127.0.0.1");
  EXPECT_EQ(ClientIp("192.0.2.1", "198.51.100.7", proxies), "192.0.2.1");  // Untrusted peer.
}

TEST(AddressKeyTest, AggregatesLoopbackAndIpv6Subnets) {
  EXPECT_EQ(AddressKey("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(AddressKey("127.0.0.1"), "loopback");
  EXPECT_EQ(AddressKey("127.200.1.1"), "loopback");
  EXPECT_EQ(AddressKey("::1"), "loopback");
  EXPECT_EQ(AddressKey("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(AddressKey("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(AddressKey("2001:db8:1:2::9"), AddressKey("2001:db8:1:2:ffff::1"));
  EXPECT_NE(AddressKey("2001:db8:1:2::9"), AddressKey("2001:db8:1:3::9"));
  EXPECT_EQ(AddressKey("not-an-ip"), "not-an-ip");
}

}  // namespace
}  // namespace qr
