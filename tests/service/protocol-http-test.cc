// The protocol endpoints under malformed, oversized, truncated and idle HTTP traffic: the
// daemon answers what it can (400, 413, 431), drops what it cannot, and keeps serving.

#include <string>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

class ProtocolHttpTest : public ServiceTest {
 protected:
  void Start(CoordinatorServer::Options o) {
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }

  /// The server still runs statements end to end.
  void ExpectServing() {
    StatementResult r = RunStatement(port_, "SELECT * FROM region");
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_EQ(r.rows.size(), static_cast<size_t>(kRegionRows));
  }

  std::string Host() const { return "Host: 127.0.0.1:" + std::to_string(port_) + "\r\n"; }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

TEST_F(ProtocolHttpTest, MalformedRequestsAre400AndClose) {
  Start(DefaultOptions());
  for (const std::string raw :
       {"GARBAGE\r\n\r\n", "GET\r\n\r\n", "GET /v1/info HTTP/1.1 trailing\r\n\r\n",
        "POST /v1/statement HTTP/1.1\r\nContent-Length: abc\r\n\r\nSELECT 1",
        "POST /v1/statement HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nSE",
        "GET * HTTP/1.1\r\n\r\n", "GET /v1/info HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /v1/statement HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nSELECT\r\n"}) {
    TestHttpClient http(port_, 10s);
    ASSERT_TRUE(http.Connect());
    ASSERT_TRUE(http.SendRaw(raw));
    TestResponse r = http.ReadResponse();
    EXPECT_EQ(r.status, 400) << raw << ": " << r.error << r.body;
    EXPECT_TRUE(http.WaitForClose(10s)) << raw;
  }
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
  ExpectServing();
}

TEST_F(ProtocolHttpTest, OversizedHeadersAre431) {
  Start(DefaultOptions());
  TestHttpClient http(port_, 10s);
  TestRequest req;
  req.method = "POST";
  req.target = "/v1/statement";
  req.body = "SELECT 1";
  req.headers = {{"X-Trino-User", "u"}, {"X-Trino-Client-Info", std::string(40 * 1024, 'i')}};
  TestResponse r = http.Send(req);
  EXPECT_EQ(r.status, 431) << r.error;
  EXPECT_TRUE(http.WaitForClose(10s));
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
  ExpectServing();
}

TEST_F(ProtocolHttpTest, OversizedStatementIs413AndOneAtTheLimitIsAccepted) {
  CoordinatorServer::Options o = DefaultOptions();
  o.http.max_body_bytes = 1024;  // coordinatord's --max_statement_bytes
  Start(o);
  auto statement_of_size = [](size_t n) {
    std::string sql = "SELECT '";
    sql += std::string(n - sql.size() - 1, 'x');
    sql += "'";
    return sql;
  };
  for (bool chunked : {false, true}) {
    TestHttpClient http(port_, 10s);
    TestRequest req;
    req.method = "POST";
    req.target = "/v1/statement";
    req.headers = {{"X-Trino-User", "u"}};
    req.body = statement_of_size(4096);
    req.chunked = chunked;
    req.chunk_bytes = 1000;
    TestResponse r = http.Send(req);
    EXPECT_EQ(r.status, 413) << (chunked ? "chunked: " : "") << r.error;
    EXPECT_TRUE(http.WaitForClose(10s));
  }
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 0);
  for (bool chunked : {false, true}) {
    StatementOptions so;
    so.chunked_post = chunked;
    StatementResult r = RunStatement(port_, statement_of_size(1024), so);
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0][0].get<std::string>().size(), 1024u - 9);
  }
}

TEST_F(ProtocolHttpTest, TruncatedRequestsAreDroppedAndTheServerKeepsServing) {
  Start(DefaultOptions());
  const std::string head = "POST /v1/statement HTTP/1.1\r\n" + Host() + "X-Trino-User: u\r\n";
  for (const std::string& partial :
       {head + "Content-Length: 100\r\n\r\nSELECT * FROM na",
        head + "Transfer-Encoding: chunked\r\n\r\n6\r\nSELECT\r\n8\r\n * FR",
        head + "Transfer-Encoding: chunked\r\n\r\n6\r\nSELECT\r\n",
        std::string("POST /v1/statement HTTP/1.1\r\nX-Trino-Us"), std::string("GET /v1/in")}) {
    TestHttpClient http(port_, 10s);
    ASSERT_TRUE(http.Connect());
    ASSERT_TRUE(http.SendRaw(partial));
    http.Close();  // mid-request
  }
  // Half-closed mid-body: the server sees EOF and drops the request without answering.
  {
    TestHttpClient http(port_, 10s);
    ASSERT_TRUE(http.Connect());
    ASSERT_TRUE(http.SendRaw(head + "Content-Length: 100\r\n\r\nSELECT 1"));
    http.ShutdownWrite();
    std::string received;
    EXPECT_TRUE(http.WaitForClose(10s, &received));
    EXPECT_EQ(received.find("200 OK"), std::string::npos) << received;
  }
  ExpectServing();
  EXPECT_EQ(server_->coordinator()->GetMetrics().submitted, 1);  // ExpectServing()'s only
}

TEST_F(ProtocolHttpTest, IdleConnectionsAreClosedButLongPollsAreNot) {
  CoordinatorServer::Options o = DefaultOptions();
  o.http.idle_timeout = 300ms;
  Start(o);
  {
    TestHttpClient http(port_, 10s);
    ASSERT_TRUE(http.Connect());
    auto start = Clock::now();
    EXPECT_TRUE(http.WaitForClose(10s));  // nothing sent at all
    EXPECT_GE(Clock::now() - start, 250ms);
  }
  {
    TestHttpClient http(port_, 10s);
    ASSERT_EQ(http.Get("/v1/info").status, 200);
    EXPECT_TRUE(http.WaitForClose(10s));  // idle after a kept-alive response
  }
  {
    // A GET parked longer than the idle timeout is a request in progress, not idleness.
    StatementOptions so;
    so.max_wait = "1s";
    StatementClient c(port_, so);
    c.Submit(kEndlessQuery);
    TestResponse r = c.Advance();
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_FALSE(c.done());
    EXPECT_EQ(c.Cancel().status, 204);
  }
  // Clients reconnect and carry on.
  ExpectServing();
}

TEST_F(ProtocolHttpTest, AWholeStatementRunsOnOneKeptAliveConnection) {
  Start(DefaultOptions());
  const uint64_t before = server_->webserver()->connections_accepted();
  StatementResult r = RunStatement(port_, "SELECT * FROM orders");
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.rows.size(), static_cast<size_t>(kOrdersRows));
  EXPECT_GT(r.http_requests, 3);
  EXPECT_EQ(server_->webserver()->connections_accepted() - before, 1u);
}

TEST_F(ProtocolHttpTest, ExpectContinueHeadAndWrongMethods) {
  Start(DefaultOptions());
  TestHttpClient http(port_, 10s);
  ASSERT_TRUE(http.Connect());
  const std::string body = "SELECT 1";
  ASSERT_TRUE(http.SendRaw("POST /v1/statement HTTP/1.1\r\n" + Host() +
                           "X-Trino-User: u\r\nExpect: 100-continue\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  TestResponse r = http.ReadResponse();  // skips the interim 100
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.Json()["stats"]["state"], "QUEUED");

  TestRequest head;
  head.method = "HEAD";
  head.target = "/v1/info";
  r = http.Send(head);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body.empty());

  TestRequest put;
  put.method = "PUT";
  put.target = "/v1/statement";
  put.body = "SELECT 1";
  r = http.Send(put);
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.Header("Allow").find("POST"), std::string::npos);
  EXPECT_EQ(http.Get("/v1/statement").status, 405);
  EXPECT_EQ(http.Get("/v1/nothing-here").status, 404);
}

TEST_F(ProtocolHttpTest, HeadOfANextUriIs405AndConsumesNoPage) {
  Start(DefaultOptions());
  StatementClient c(port_);
  ASSERT_EQ(c.Submit("SELECT * FROM region").status, 200);
  int heads = 0;
  while (!c.done()) {
    // Before every GET, a HEAD of the same nextUri: refused, and the GET still gets the page.
    TestRequest head;
    head.method = "HEAD";
    head.target = TargetOf(c.next_uri());
    head.headers = c.UserHeaders();
    TestResponse h = c.http().Send(head);
    EXPECT_EQ(h.status, 405) << h.error;
    EXPECT_EQ(h.Header("Allow"), "GET, DELETE");
    ++heads;
    ASSERT_EQ(c.Advance().status, 200);
  }
  EXPECT_GT(heads, 1);
  StatementResult& r = c.result();
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED");
  EXPECT_EQ(r.rows.size(), static_cast<size_t>(kRegionRows));
}

TEST_F(ProtocolHttpTest, PercentEncodedPathSegmentsAreDecoded) {
  Start(DefaultOptions());
  StatementResult done = RunStatement(port_, "SELECT 1");
  ASSERT_TRUE(done.failure.empty()) << done.failure;
  const size_t colon = done.id.find(':');
  ASSERT_NE(colon, std::string::npos) << done.id;
  const std::string encoded = done.id.substr(0, colon) + "%3A" + done.id.substr(colon + 1);
  TestHttpClient http(port_, 10s);
  TestResponse r = http.Get("/v1/query/" + encoded);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["queryId"], done.id);
  // Malformed escapes and an encoded '/' are refused with the reason.
  for (const std::string bad : {"%3", "%G1", "%2F"}) {
    TestHttpClient c(port_, 10s);
    r = c.Get("/v1/query/" + done.id.substr(0, colon) + bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("path"), std::string::npos) << r.body;
  }
}

}  // namespace
}  // namespace qr::testing
