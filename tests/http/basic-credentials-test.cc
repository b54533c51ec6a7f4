// The one base64 (strict decoding) and the one Basic credentials parser (RFC 7617 with the
// whitespace of RFC 9110: a case-insensitive scheme, one or more SP, surrounding OWS).

#include "http/basic-credentials.h"

#include <string>

#include <gtest/gtest.h>

#include "http/base64.h"

namespace qr {
namespace {

TEST(Base64Test, RoundTripsEveryLength) {
  std::string data;
  for (int n = 0; n < 40; ++n) {
    std::string decoded;
    ASSERT_TRUE(Base64Decode(Base64Encode(data), &decoded)) << n;
    EXPECT_EQ(decoded, data);
    data.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ(Base64Encode("user:pass"), "dXNlcjpwYXNz");
  EXPECT_EQ(Base64Encode(std::string("\x00\xff\x10", 3)), "AP8Q");
}

TEST(Base64Test, DecodeIsStrict) {
  std::string out;
  EXPECT_FALSE(Base64Decode("dXNlcjpwYXN", &out));     // not a multiple of 4
  EXPECT_FALSE(Base64Decode("dXNl cjpw", &out));       // junk
  EXPECT_FALSE(Base64Decode(" dXNlcjpw", &out));       // leading whitespace
  EXPECT_FALSE(Base64Decode("dXNlcjp\n", &out));       // trailing whitespace
  EXPECT_FALSE(Base64Decode("dXNlcjpwYXNzZ===", &out));  // too much padding
  EXPECT_FALSE(Base64Decode("YQ==YQ==", &out));        // padding inside
  EXPECT_FALSE(Base64Decode("YR==", &out));  // non-zero unused bits: a second encoding of "a"
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(Base64Decode("YQ==", &out));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(Base64Decode("", &out));
  EXPECT_EQ(out, "");
}

std::string Parsed(std::string_view header) {
  BasicCredentials c;
  if (!ParseBasicCredentials(header, &c)) return "<malformed>";
  return std::string(c.user()) + "|" + std::string(c.password());
}

TEST(BasicCredentialsTest, SplitsUserAndPasswordAtTheFirstColon) {
  EXPECT_EQ(Parsed("Basic " + Base64Encode("alice:pw")), "alice|pw");
  EXPECT_EQ(Parsed("Basic " + Base64Encode("alice:p:w")), "alice|p:w");
  EXPECT_EQ(Parsed("Basic " + Base64Encode("alice:")), "alice|");
  BasicCredentials c;
  ASSERT_TRUE(ParseBasicCredentials("Basic " + Base64Encode("bob:x"), &c));
  EXPECT_EQ(c.decoded, "bob:x");
  EXPECT_EQ(c.colon, 3u);
}

TEST(BasicCredentialsTest, SchemeIsCaseInsensitiveAndWhitespaceFollowsRfc9110) {
  const std::string token = Base64Encode("alice:pw");
  EXPECT_EQ(Parsed("basic " + token), "alice|pw");
  EXPECT_EQ(Parsed("BASIC " + token), "alice|pw");
  EXPECT_EQ(Parsed("Basic   " + token), "alice|pw");        // 1*SP
  EXPECT_EQ(Parsed(" \tBasic " + token + " \t"), "alice|pw");  // surrounding OWS
  EXPECT_EQ(Parsed("Basic" + token), "<malformed>");         // no SP
  EXPECT_EQ(Parsed("Basic\t" + token), "<malformed>");       // HTAB is not SP
  EXPECT_EQ(Parsed("Basic " + token + " x"), "<malformed>");  // junk after the token
  EXPECT_EQ(Parsed("Basic"), "<malformed>");
  EXPECT_EQ(Parsed("Basic "), "<malformed>");
}

TEST(BasicCredentialsTest, RejectsOtherSchemesAndBadTokens) {
  EXPECT_EQ(Parsed(""), "<malformed>");
  EXPECT_EQ(Parsed("Bearer " + Base64Encode("alice:pw")), "<malformed>");
  EXPECT_EQ(Parsed("Basicx " + Base64Encode("alice:pw")), "<malformed>");
  EXPECT_EQ(Parsed("Basic !!!!"), "<malformed>");
  EXPECT_EQ(Parsed("Basic " + Base64Encode("no-colon")), "<malformed>");
  EXPECT_EQ(Parsed("Basic " + Base64Encode(":pw")), "<malformed>");  // empty user
  BasicCredentials c;
  c.decoded = "stale";
  EXPECT_FALSE(ParseBasicCredentials("Basic %%%", &c));
  EXPECT_TRUE(c.decoded.empty());
}

}  // namespace
}  // namespace qr
