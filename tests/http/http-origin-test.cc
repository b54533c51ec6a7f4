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
