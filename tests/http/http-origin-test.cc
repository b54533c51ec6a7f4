#include "http/http-origin.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

namespace http = boost::beast::http;

HttpRequest Request(http::verb method, std::vector<std::pair<std::string, std::string>> headers) {
  HttpRequest req;
  req.method = method;
  req.method_string = std::string(http::to_string(method));
  for (auto& [name, value] : headers) req.headers.set(name, value);
  return req;
}

TEST(HttpOriginTest, AllowedHostsAreLocalhostIpAddressesAndTheListedNames) {
  const std::vector<std::string> none;
  for (const char* host : {"", "127.0.0.1", "127.0.0.1:8080", "192.168.1.9:1", "[::1]",
                           "[::1]:8080", "[2001:db8::1]:443", "localhost", "LocalHost:99",
                           "localhost.", "a.b.localhost:8080"}) {
    EXPECT_TRUE(IsAllowedHost(host, none)) << host;
  }
  for (const char* host : {"example.com", "example.com:8080", "localhost.example.com",
                           "xlocalhost", "[::1", "[bad]:80", "1.2.3.4.5", "evil\"><x",
                           ".localhost"}) {
    EXPECT_FALSE(IsAllowedHost(host, none)) << host;
  }
  const std::vector<std::string> listed = {"db.internal", "Coordinator"};
  EXPECT_TRUE(IsAllowedHost("DB.Internal:8443", listed));
  EXPECT_TRUE(IsAllowedHost("coordinator", listed));
  EXPECT_FALSE(IsAllowedHost("db.internal.example", listed));
  EXPECT_TRUE(IsAllowedHost("anything.at.all:1", {"*"}));
}

TEST(HttpOriginTest, ForeignOriginOnAStateChangingRequestIsRefused) {
  for (http::verb v : {http::verb::post, http::verb::delete_, http::verb::put, http::verb::patch}) {
    std::string why;
    EXPECT_TRUE(IsCrossOriginWrite(
        Request(v, {{"Host", "db.example:8080"}, {"Origin", "https://evil.example"}}), &why))
        << http::to_string(v);
    EXPECT_NE(why.find("evil.example"), std::string::npos) << why;
    EXPECT_NE(why.find("Cross-origin"), std::string::npos) << why;
  }
}

TEST(HttpOriginTest, SameOriginAndNoOriginAreAccepted) {
  std::string why;
  // Scheme and path do not matter, host and port compare case-insensitively.
  EXPECT_FALSE(IsCrossOriginWrite(
      Request(http::verb::post, {{"Host", "db.example:8080"}, {"Origin", "http://DB.example:8080"}}),
      &why));
  // Behind a proxy that rewrites Host.
  EXPECT_FALSE(IsCrossOriginWrite(Request(http::verb::post, {{"Host", "127.0.0.1:8080"},
                                                             {"X-Forwarded-Host", "db.example"},
                                                             {"Origin", "https://db.example"}}),
                                  &why));
  // The Trino clients and curl send neither Origin nor Referer.
  EXPECT_FALSE(IsCrossOriginWrite(Request(http::verb::post, {{"Host", "db.example"}}), &why));
  // Reading is never refused: a cross-site GET cannot change anything.
  EXPECT_FALSE(IsCrossOriginWrite(
      Request(http::verb::get, {{"Host", "db.example"}, {"Origin", "https://evil.example"}}),
      &why));
}

TEST(HttpOriginTest, OtherPortOrNullOriginIsForeign) {
  std::string why;
  EXPECT_TRUE(IsCrossOriginWrite(
      Request(http::verb::post, {{"Host", "db.example:8080"}, {"Origin", "http://db.example:9090"}}),
      &why));
  // Sandboxed frames and some redirects send "null": no same-origin page does.
  EXPECT_TRUE(IsCrossOriginWrite(
      Request(http::verb::post, {{"Host", "db.example"}, {"Origin", "null"}}), &why));
  // Garbage is not this server either.
  EXPECT_TRUE(IsCrossOriginWrite(
      Request(http::verb::post, {{"Host", "db.example"}, {"Origin", "db.example"}}), &why));
}

TEST(HttpOriginTest, RefererIsTheFallbackWithoutOrigin) {
  std::string why;
  EXPECT_TRUE(IsCrossOriginWrite(Request(http::verb::delete_,
                                         {{"Host", "db.example"},
                                          {"Referer", "https://evil.example/page?x=1"}}),
                                 &why));
  EXPECT_NE(why.find("Referer"), std::string::npos) << why;
  EXPECT_FALSE(IsCrossOriginWrite(Request(http::verb::delete_,
                                          {{"Host", "db.example"},
                                           {"Referer", "https://db.example/queries"}}),
                                  &why));
}

}  // namespace
}  // namespace qr
