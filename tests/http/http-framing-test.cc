// Request framing (RFC 9112: Transfer-Encoding, Content-Length, Host, trailers, bare CR),
// percent-decoded paths and routes that refuse HEAD. Each refusal must close the connection
// without serving what followed the refused header: that is where a smuggled request would be.

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "http/http-framing.h"
#include "http/http-message.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;

/// A request that would be served if a server took the bytes after a refused header for the
/// next request on the connection.
constexpr std::string_view kSmuggled = "GET /echo?name=smuggled HTTP/1.1\r\nHost: t\r\n\r\n";

class HttpFramingTest : public WebserverTest {
 protected:
  /// Sends 'raw' and expects one answer with 'status', "Connection: close", and then the
  /// close, with nothing else answered.
  void ExpectRefused(const std::string& raw, int status) {
    SCOPED_TRACE(raw);
    Client c(server_->port());
    c.Send(raw);
    Response r;
    ASSERT_TRUE(c.Read(&r));
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_EQ(r.body.find("smuggled"), std::string::npos);
    Response next;
    EXPECT_FALSE(c.Read(&next)) << "a second answer: " << next.status << " " << next.body;
  }

  /// Sends 'raw' and expects a 200 whose echo holds 'expected'.
  void ExpectServed(const std::string& raw, const std::string& expected) {
    SCOPED_TRACE(raw);
    Response r = OneShot(raw);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(expected), std::string::npos) << r.body;
  }
};

std::string PostWithTe(std::string_view te, std::string_view body) {
  return "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: " + std::string(te) +
         "\r\n\r\n" + std::string(body);
}

TEST_F(HttpFramingTest, TransferCodingOtherThanChunkedIs501AndCloses) {
  StartServer();
  // Each body is a complete request of its own, served today as the next request.
  for (std::string_view te : {"xchunked", "chunked, identity", "identity", "gzip", "gzip, chunked",
                              "deflate,chunked", "gzip;q=1, chunked"}) {
    ExpectRefused(PostWithTe(te, kSmuggled), 501);
  }
}

TEST_F(HttpFramingTest, MalformedTransferEncodingIs400AndCloses) {
  StartServer();
  // A chunked body's end, then a request smuggled after it.
  std::string body = "0\r\n\r\n";
  body += kSmuggled;
  for (std::string_view te : {"", ",", "chunked,", ", chunked", "chunked, chunked", "chunked;a=b",
                              "chu nked", "\"chunked\""}) {
    ExpectRefused(PostWithTe(te, body), 400);
  }
  // Two field lines, even when they would make "gzip, chunked".
  ExpectRefused(
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400);
}

TEST_F(HttpFramingTest, ChunkedInAnyCaseIsAccepted) {
  StartServer();
  ExpectServed(PostWithTe("Chunked", "5\r\nhello\r\n0\r\n\r\n"), "body=hello");
  ExpectServed(PostWithTe("CHUNKED  ", "3\r\nabc\r\n0\r\n\r\n"), "body=abc");
}

TEST_F(HttpFramingTest, TransferEncodingWithContentLengthIs400AndCloses) {
  StartServer();
  const std::string smuggle = "5\r\nhello\r\n0\r\n\r\n" + std::string(kSmuggled);
  ExpectRefused(
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n"
      "hello" + std::string(kSmuggled),
      400);
  ExpectRefused(
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nTransfer-Encoding: xchunked\r\n\r\n" +
          std::string(kSmuggled),
      400);
  // Already refused by Beast; kept so that no change lets them through.
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                "Content-Length: 30\r\n\r\n" + smuggle, 400);
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" + smuggle, 400);
}

TEST_F(HttpFramingTest, TransferEncodingInHttp10Is400AndCloses) {
  StartServer();
  ExpectRefused("POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked"
                "\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + std::string(kSmuggled), 400);
  ExpectRefused("POST /echo HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
}

TEST_F(HttpFramingTest, TrailerFieldsNeverBecomeHeaders) {
  StartServer();
  Client c(server_->port());
  Response r = RoundTrip(c,
                         "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                         "Trailer: X-Trino-User\r\n\r\n"
                         "5\r\nhello\r\n0\r\nX-Trino-User: mallory\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\nuser=\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("body=hello"), std::string::npos) << r.body;
  // A header of the same name is kept, and the trailer does not override it.
  r = RoundTrip(c,
                "POST /echo HTTP/1.1\r\nHost: t\r\nX-Trino-User: ann\r\n"
                "Transfer-Encoding: chunked\r\n\r\n0\r\nX-Trino-User: mallory\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\nuser=ann\n"), std::string::npos) << r.body;
  // The connection is still in sync.
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(HttpFramingTest, EndlessChunkLinesAndTrailersAre400NotBuffered) {
  // Beast bounds neither a chunk-size line nor the trailer section: each is buffered until
  // its end arrives. The read buffer holds at most --max_header_bytes (16 KiB here) plus
  // 64 KiB, so 256 KiB of either is refused once the buffer is full, not kept.
  StartServer();
  const std::string endless(256 << 10, 'a');
  const std::string head = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& raw : {head + "1;a=" + endless, head + "0\r\nX-Long: " + endless,
                                 head + "5\r\nhello\r\n0\r\nX-A: 1\r\nX-B: " + endless}) {
    Client c(server_->port());
    c.Send(raw);
    Response r;
    ASSERT_TRUE(c.Read(&r)) << raw.substr(0, 90);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("--max_header_bytes"), std::string::npos) << r.body;
    EXPECT_EQ(r.Header("connection"), "close");
  }
  // A body of many chunks, and a long trailer section within the bound, are served.
  std::string chunks;
  for (int i = 0; i < 2000; ++i) chunks += "40\r\n" + std::string(64, 'x') + "\r\n";
  ExpectServed(head + chunks + "0\r\nX-T: " + std::string(8 << 10, 't') + "\r\n\r\n",
               "body=xxxx");
}

TEST_F(HttpFramingTest, Http11NeedsExactlyOneHost) {
  StartServer();
  ExpectRefused("GET /echo HTTP/1.1\r\n\r\n", 400);
  ExpectRefused("GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
  ExpectRefused("GET /echo HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
  ExpectRefused("GET /echo HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400);
  // HTTP/1.0 needs none.
  ExpectServed("GET /echo HTTP/1.0\r\n\r\n", "path=/echo");
}

TEST_F(HttpFramingTest, ContentLengthMustBeOneNumberOnOneLine) {
  StartServer();
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
                "hello", 400);
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", 400);
  // Leading zeros are a number.
  ExpectServed("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 005\r\n\r\nhello",
               "body=hello");
}

TEST_F(HttpFramingTest, BareCrIs400Not505) {
  StartServer();
  ExpectRefused("GET /echo HTTP/1.1\rHost: t\r\n\r\n", 400);
  ExpectRefused("GET /echo HTTP/1.1\r\nHost: t\rX: y\r\n\r\n", 400);
  ExpectRefused("GET /echo\r HTTP/1.1\r\nHost: t\r\n\r\n", 400);
  // A well-formed unsupported version is still 505.
  ExpectRefused("GET /echo HTTP/1.2\r\nHost: t\r\n\r\n", 505);
}

TEST_F(HttpFramingTest, FoldedHeaderLinesAre400AndClose) {
  StartServer();
  // Beast unfolds these into "chunked" and "5": a proxy that does not would frame otherwise.
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"
                "0\r\n\r\n" + std::string(kSmuggled), 400);
  ExpectRefused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:\r\n\t5\r\n\r\nhello", 400);
  ExpectRefused("GET /echo HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n 2\r\n\r\n", 400);
  ExpectRefused("GET /echo HTTP/1.1\r\n Host: t\r\n\r\n", 400);
  // Whitespace inside a line is not folding.
  ExpectServed("GET /echo HTTP/1.1\r\nHost: t\r\nX-A:  1 \t 2\r\n\r\n", "path=/echo");
}

TEST_F(HttpFramingTest, ChunkExtensionsWithWhitespaceAre400AndClose) {
  StartServer();
  for (std::string_view chunk : {"5 ;a=b", "5\t;a", "5;a = b", "5;a =b", "5;=b", "5;a="}) {
    ExpectRefused(PostWithTe("chunked", std::string(chunk) + "\r\nhello\r\n0\r\n\r\n"), 400);
  }
  ExpectServed(PostWithTe("chunked", "5;a=b;c;d=\"x y\\\"\"\r\nhello\r\n0;e\r\n\r\n"), "body=hello");
}

TEST(HttpFramingCheckTest, NamesTheProblemAndTheAcceptedForm) {
  boost::beast::http::fields fields;
  fields.insert("Host", "h");
  fields.insert("Transfer-Encoding", "gzip, chunked");
  FramingError error;
  ASSERT_FALSE(CheckRequestFraming(fields, 11, &error));
  EXPECT_EQ(error.status, 501u);
  EXPECT_NE(error.message.find("'gzip, chunked'"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("only accepted transfer coding is \"chunked\""), std::string::npos)
      << error.message;
  fields.set("Transfer-Encoding", "chunked");
  EXPECT_TRUE(CheckRequestFraming(fields, 11, &error));
  EXPECT_FALSE(CheckRequestFraming(fields, 10, &error));
  EXPECT_EQ(error.status, 400u);
}

TEST(HttpFramingCheckTest, StrictChunkExtensions) {
  for (std::string_view ok : {"", ";a", ";a=b", ";a=b;c", ";a=\"\"", ";a=\"x y\\\"\"", ";a=1;b=\"2\""}) {
    EXPECT_TRUE(IsStrictChunkExtension(ok)) << ok;
  }
  for (std::string_view bad : {" ;a", ";", ";a=", ";=b", "; a", ";a =b", ";a= b", ";a=\"x",
                               ";a=b ", "a", ";a=\"x\\\"", ";a=b\"c\""}) {
    EXPECT_FALSE(IsStrictChunkExtension(bad)) << bad;
  }
}

TEST(PercentDecodePathTest, DecodesAndRefusesMalformedOrSlash) {
  std::string out, error;
  ASSERT_TRUE(PercentDecodePath("/v1/query/a%3Ab%3a%20c", &out, &error));
  EXPECT_EQ(out, "/v1/query/a:b: c");
  ASSERT_TRUE(PercentDecodePath("/plain+path", &out, &error));
  EXPECT_EQ(out, "/plain+path");  // '+' is a space only in query strings.
  for (std::string_view bad : {"/a%G1", "/a%3", "/a%", "/a%%41", "/a%2Fb", "/a%2fb", "/a%00"}) {
    SCOPED_TRACE(bad);
    error.clear();
    EXPECT_FALSE(PercentDecodePath(bad, &out, &error));
    EXPECT_NE(error.find("path"), std::string::npos) << error;
  }
  EXPECT_FALSE(PercentDecodePath("/a%G1", &out, &error));
  EXPECT_NE(error.find("two hex digits"), std::string::npos) << error;
  EXPECT_FALSE(PercentDecodePath("/a%2F", &out, &error));
  EXPECT_NE(error.find("encoded '/'"), std::string::npos) << error;
}

TEST_F(HttpFramingTest, PathIsPercentDecodedBeforeRouting) {
  StartServer();
  ExpectServed(Get("/ec%68o?name=a%2Fb"), "path=/echo\nquery=name=a%2Fb\ntarget=/ec%68o");
  ExpectServed(Get("/ec%68o?name=a%2Fb"), "\nname=a/b\n");
  Response r = OneShot(Get("/echo%G1"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("two hex digits"), std::string::npos) << r.body;
  EXPECT_EQ(OneShot(Get("/echo%3")).status, 400);
  r = OneShot(Get("/ech%2Fo"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("encoded '/'"), std::string::npos) << r.body;
}

TEST_F(HttpFramingTest, DisallowedHeadIs405WithoutRunningTheGetHandler) {
  std::atomic<int> gets{0};
  StartServer(TestOptions(), [&](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/cursor/", [&](HttpRequest&, ResponseCallback respond) {
      ++gets;
      respond(HttpResponse::Text(200, "page"));
    });
    s.RegisterHandler(http::verb::delete_, "/cursor/",
                      [](HttpRequest&, ResponseCallback respond) {
                        respond(HttpResponse::Text(204, ""));
                      });
    s.DisallowHead("/cursor/");
  });
  Client c(server_->port());
  c.Send("HEAD /cursor/1 HTTP/1.1\r\nHost: t\r\n\r\n");
  Response r;
  ASSERT_TRUE(c.Read(&r, /*head=*/true));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow"), "GET, DELETE");
  EXPECT_EQ(RoundTrip(c, Get("/cursor/1")).body, "page");
  EXPECT_EQ(gets, 1);
  // Other routes still answer HEAD through their GET handler.
  c.Send("HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(c.Read(&r, /*head=*/true));
  EXPECT_EQ(r.status, 200);
}

}  // namespace
}  // namespace qr
