#include "http/webserver.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http/http-message.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;

TEST_F(WebserverTest, GetReturnsBodyAndHeaders) {
  StartServer(TestOptions(), [](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/json", [](HttpRequest&, ResponseCallback respond) {
      HttpResponse r = HttpResponse::Json(200, "{\"a\":1}");
      r.headers.emplace_back("X-Trino-Set-Session", "k=v");
      respond(std::move(r));
    });
  });
  Response r = OneShot(Get("/json"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"a\":1}");
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("content-length"), "7");
  EXPECT_EQ(r.Header("server"), "coordinatord");
  EXPECT_EQ(r.Header("x-trino-set-session"), "k=v");
  EXPECT_TRUE(r.Has("date"));
  EXPECT_FALSE(r.Has("connection"));  // HTTP/1.1 keeps alive by default.
}

TEST_F(WebserverTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  Client c(server_->port());
  for (int i = 0; i < 3; ++i) {
    Response r = RoundTrip(c, Get("/echo?name=" + std::to_string(i)));
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("name=" + std::to_string(i) + "\n"), std::string::npos) << r.body;
  }
  EXPECT_EQ(server_->connections_accepted(), 1u);
}

TEST_F(WebserverTest, BackToBackRequestsInOneWriteAreBothAnswered) {
  StartServer();
  Client c(server_->port());
  c.Send(Get("/echo?name=first") + Get("/echo?name=second"));
  Response first, second;
  ASSERT_TRUE(c.Read(&first));
  ASSERT_TRUE(c.Read(&second));
  EXPECT_NE(first.body.find("name=first\n"), std::string::npos);
  EXPECT_NE(second.body.find("name=second\n"), std::string::npos);
}

TEST_F(WebserverTest, Http10ClosesUnlessAskedToKeepAlive) {
  StartServer();
  {
    Client c(server_->port());
    Response r = RoundTrip(c, "GET /echo HTTP/1.0\r\n\r\n");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_TRUE(c.WaitForClose());
  }
  Client c(server_->port());
  Response r = RoundTrip(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(r.Header("connection"), "keep-alive");
  EXPECT_EQ(RoundTrip(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").status, 200);
}

TEST_F(WebserverTest, ConnectionCloseRequestIsHonoured) {
  StartServer();
  Client c(server_->port());
  Response r = RoundTrip(c, Get("/echo", "Connection: close\r\n"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("connection"), "close");
  EXPECT_TRUE(c.WaitForClose());
}

TEST_F(WebserverTest, RoutesExactPrefixAndLongestMatch) {
  auto named = [](std::string name) {
    return [name](HttpRequest&, ResponseCallback respond) {
      respond(HttpResponse::Text(200, name));
    };
  };
  StartServer(TestOptions(), [&](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/v1/statement", named("exact"));
    s.RegisterHandler(http::verb::get, "/v1/statement/", named("statement-prefix"));
    s.RegisterHandler(http::verb::get, "/v1/statement/executing/", named("executing-prefix"));
    s.RegisterHandler(http::verb::get, "/", named("root"));
  });
  Client c(server_->port());
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement")).body, "exact");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement?x=1")).body, "exact");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement/")).body, "statement-prefix");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement/queued/q/s/1")).body, "statement-prefix");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement/executing")).body, "statement-prefix");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statement/executing/q/s/2")).body, "executing-prefix");
  EXPECT_EQ(RoundTrip(c, Get("/v1/statementx")).body, "root");
  EXPECT_EQ(RoundTrip(c, Get("/")).body, "root");
}

TEST_F(WebserverTest, UnknownPathIs404WithQuotedPath) {
  StartServer();
  Client c(server_->port());
  // The path is percent-decoded; the 404 quotes it with control bytes escaped.
  Response r = RoundTrip(c, Get("/nope/%01<b>?q=1"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.body, "Not found: '/nope/\\x01<b>'");
  // A 404 does not cost the connection.
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, WrongMethodIs405WithAllow) {
  StartServer(TestOptions(), [](Webserver& s) {
    s.RegisterHandler(http::verb::post, "/only-post", EchoHandler);
  });
  Client c(server_->port());
  Response r = RoundTrip(c, "DELETE /echo HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow"), "GET, HEAD, POST");
  EXPECT_NE(r.body.find("'DELETE'"), std::string::npos) << r.body;
  r = RoundTrip(c, "BREW /only-post HTTP/1.1\r\nHost: t\r\n\r\n");  // Unknown to Beast.
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow"), "POST");
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, HeadIsServedByTheGetHandlerWithoutBody) {
  StartServer();
  Client c(server_->port());
  c.Send("HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n");
  Response head;
  ASSERT_TRUE(c.Read(&head, /*head=*/true));
  EXPECT_EQ(head.status, 200);
  EXPECT_GT(std::stoul(head.Header("content-length")), 0u);
  EXPECT_TRUE(head.body.empty());
  // Had a body been sent, this would parse it as the status line.
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

// Found by http-request-fuzzer: error answers to HEAD carried a body, which a kept-alive
// client reads as the next response.
TEST_F(WebserverTest, HeadErrorAnswersHaveNoBody) {
  StartServer();
  Client c(server_->port());
  for (std::string head : {std::string("HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n"),
                           std::string("HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n")}) {
    c.Send(head);
    Response r;
    ASSERT_TRUE(c.Read(&r, /*head=*/true));
    EXPECT_TRUE(r.status == 404 || r.status == 200) << r.status;
    EXPECT_TRUE(r.body.empty());
    // Had a body been sent, this would parse it as the status line.
    EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
  }
  Client bad(server_->port());
  bad.Send("HEAD \xff/x HTTP/1.1\r\nHost: t\r\n\r\n");
  Response r;
  ASSERT_TRUE(bad.Read(&r, /*head=*/true));
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(bad.WaitForClose());
}

TEST_F(WebserverTest, MalformedRequestsAre400AndClose) {
  StartServer();
  for (std::string bad : {std::string("GARBAGE\r\n\r\n"),
                          std::string("GET /echo HTTP/1.1\r\nBad Header\r\n\r\n"),
                          std::string("GET /echo HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n"),
                          std::string("OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n"),
                          std::string("GET ftp://h/echo HTTP/1.1\r\nHost: t\r\n\r\n"),
                          std::string("POST /echo HTTP/1.1\r\nHost: t\r\n"
                                      "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n")}) {
    SCOPED_TRACE(bad);
    Client c(server_->port());
    Response r = RoundTrip(c, bad);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_TRUE(c.WaitForClose());
  }
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
}

TEST_F(WebserverTest, UnsupportedHttpVersionIs505) {
  StartServer();
  Client c(server_->port());
  EXPECT_EQ(RoundTrip(c, "GET /echo HTTP/2.0\r\nHost: t\r\n\r\n").status, 505);
  EXPECT_TRUE(c.WaitForClose());
}

TEST_F(WebserverTest, OversizedHeadersAre431AndClose) {
  Webserver::Options o = TestOptions();
  o.max_header_bytes = 4096;
  StartServer(o);
  Client c(server_->port());
  Response r = RoundTrip(c, Get("/echo", "X-Big: " + std::string(8000, 'a') + "\r\n"));
  EXPECT_EQ(r.status, 431);
  EXPECT_NE(r.body.find("4096"), std::string::npos) << r.body;
  EXPECT_TRUE(c.WaitForClose());
  // Just under the limit is fine.
  EXPECT_EQ(OneShot(Get("/echo", "X-Big: " + std::string(3000, 'a') + "\r\n")).status, 200);
}

TEST_F(WebserverTest, OversizedContentLengthIs413WithoutReadingTheBody) {
  Webserver::Options o = TestOptions();
  o.max_body_bytes = 1000;
  StartServer(o);
  Client c(server_->port());
  // Only the header is sent: the answer must not wait for 10 MB that never come.
  Response r = RoundTrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.Header("connection"), "close");
  EXPECT_TRUE(c.WaitForClose());
  Response ok = OneShot("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" +
                        std::string(1000, 'x'));
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("body_size=1000\n"), std::string::npos);
}

TEST_F(WebserverTest, OversizedChunkedBodyIs413) {
  Webserver::Options o = TestOptions();
  o.max_body_bytes = 1000;
  StartServer(o);
  Client c(server_->port());
  std::string request = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) request += "258\r\n" + std::string(600, 'x') + "\r\n";
  request += "0\r\n\r\n";
  Response r = RoundTrip(c, request);
  EXPECT_EQ(r.status, 413);
  EXPECT_TRUE(c.WaitForClose());
}

TEST_F(WebserverTest, ChunkedBodyIsDechunked) {
  StartServer();
  Client c(server_->port());
  Response r = RoundTrip(c,
                         "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("body=hello world"), std::string::npos) << r.body;
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, ExpectContinueGets100BeforeTheBody) {
  StartServer();
  Client c(server_->port());
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2000\r\n\r\n");
  Response interim;
  ASSERT_TRUE(c.Read(&interim));
  EXPECT_EQ(interim.status, 100);
  c.Send(std::string(2000, 'b'));
  Response r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("body_size=2000\n"), std::string::npos);
}

TEST_F(WebserverTest, AbsoluteFormTargetRoutesByPath) {
  Mutex mu;
  HttpRequest seen_by_handler;  // QR_GUARDED_BY(mu)
  StartServer(TestOptions(), [&](Webserver& s) {
    s.RegisterHandler(http::verb::delete_, "/v1/statement/",
                      [&](HttpRequest& req, ResponseCallback respond) {
                        {
                          MutexLock l(&mu);
                          seen_by_handler = req;
                        }
                        respond(HttpResponse::Text(204, ""));
                      });
  });
  Client c(server_->port());
  std::string authority = "127.0.0.1:" + std::to_string(server_->port());
  Response r = RoundTrip(c, "DELETE http://" + authority +
                                "/v1/statement/executing/q1/slug/3?x=1&name=a%2Fb HTTP/1.1\r\n"
                                "Host: " + authority + "\r\nX-Trino-User: ann\r\n\r\n");
  EXPECT_EQ(r.status, 204);
  EXPECT_FALSE(r.Has("content-length"));
  HttpRequest seen;
  {
    MutexLock l(&mu);
    seen = seen_by_handler;
  }
  EXPECT_EQ(seen.method, http::verb::delete_);
  EXPECT_EQ(seen.method_string, "DELETE");
  EXPECT_EQ(seen.target, "/v1/statement/executing/q1/slug/3?x=1&name=a%2Fb");
  EXPECT_EQ(seen.path, "/v1/statement/executing/q1/slug/3");
  EXPECT_EQ(seen.query, "x=1&name=a%2Fb");
  EXPECT_EQ(seen.absolute_authority, authority);
  EXPECT_EQ(seen.QueryParam("name"), "a/b");
  EXPECT_EQ(seen.Header("X-TRINO-USER"), "ann");
  EXPECT_EQ(seen.remote_address.rfind("127.0.0.1:", 0), 0u) << seen.remote_address;
  // After a 204 (no body) the connection is still in sync.
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, TruncatedRequestsAreDroppedAndTheServerKeepsServing) {
  StartServer();
  {
    Client c(server_->port());
    c.Send("GET /echo HTT");
    c.ShutdownWrite();
    EXPECT_TRUE(c.WaitForClose());
  }
  {
    Client c(server_->port());
    c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
    c.ShutdownWrite();
    EXPECT_TRUE(c.WaitForClose());
  }
  {
    Client c(server_->port());
    c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    c.Close();  // Abrupt.
  }
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
}

TEST_F(WebserverTest, IdleConnectionIsClosedAfterIdleTimeout) {
  Webserver::Options o = TestOptions();
  o.idle_timeout = 200ms;
  StartServer(o);
  auto start = Clock::now();
  Client silent(server_->port());
  EXPECT_TRUE(silent.WaitForClose());
  EXPECT_GE(Clock::now() - start, 150ms);
  // Between keep-alive requests too.
  Client c(server_->port());
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
  EXPECT_TRUE(c.WaitForClose());
  // A header trickling in never completes in time either.
  Client slow(server_->port());
  slow.Send("GET /echo HTTP/1.1\r\n");
  EXPECT_TRUE(slow.WaitForClose());
}

TEST_F(WebserverTest, PendingHandlerOutlivesIdleTimeoutAndIsCompletedFromAnotherThread) {
  Webserver::Options o = TestOptions();
  o.idle_timeout = 200ms;
  StartServer(o);
  Client c(server_->port());
  c.Send(Get("/park"));
  ASSERT_TRUE(parking_.WaitForParked(1));
  // A silent connection opened after the request was dispatched is closed by the idle timer:
  // by then the parked request has waited longer than idle_timeout.
  Client clock(server_->port());
  ASSERT_TRUE(clock.WaitForClose());
  ResponseCallback cb = parking_.Take();
  std::thread completer([&] { cb(HttpResponse::Json(200, "{\"late\":true}")); });
  completer.join();
  Response r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"late\":true}");
  // The connection is usable afterwards.
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, CallbackAfterClientDisconnectIsHarmless) {
  StartServer();
  {
    Client c(server_->port());
    c.Send(Get("/park"));
    ASSERT_TRUE(parking_.WaitForParked(1));
  }
  ResponseCallback cb = parking_.Take();
  std::thread([&] { cb(HttpResponse::Text(200, "nobody listens")); }).join();
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
}

TEST_F(WebserverTest, CallbacksAfterStopAndDestructionAreHarmless) {
  StartServer();
  Client a(server_->port());
  Client b(server_->port());
  Client d(server_->port());
  a.Send(Get("/park"));
  b.Send(Get("/park"));
  d.Send(Get("/park"));
  ASSERT_TRUE(parking_.WaitForParked(3));
  server_->Stop();
  EXPECT_TRUE(a.WaitForClose());  // Stop() closes open connections.
  server_->Stop();                // Idempotent.
  parking_.Take()(HttpResponse::Text(200, "after stop"));
  ResponseCallback late = parking_.Take();
  ResponseCallback dropped = parking_.Take();
  server_.reset();
  late(HttpResponse::Text(200, "after destruction"));
  dropped = nullptr;  // Never called: would answer 500, but the server is gone.
}

TEST_F(WebserverTest, HandlerThatDropsItsCallbackYields500) {
  StartServer(TestOptions(), [](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/drop", [](HttpRequest&, ResponseCallback) {});
    s.RegisterHandler(http::verb::get, "/throw", [](HttpRequest&, ResponseCallback) {
      throw std::runtime_error("handler bug");
    });
  });
  Client c(server_->port());
  EXPECT_EQ(RoundTrip(c, Get("/drop")).status, 500);
  EXPECT_EQ(RoundTrip(c, Get("/throw")).status, 500);
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
}

TEST_F(WebserverTest, SharedBodyIsSentWithCorrectLength) {
  std::string page(1 << 20, '\0');
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<char>('a' + i % 26);
  auto shared = std::make_shared<const std::string>(page);
  StartServer(TestOptions(), [&](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/page", [shared](HttpRequest&, ResponseCallback respond) {
      HttpResponse r;
      r.body = "{\"data\":\"";
      r.shared_body = shared;
      r.body_tail = "\"}";
      respond(std::move(r));
    });
  });
  Client c(server_->port());
  for (int i = 0; i < 2; ++i) {
    Response r = RoundTrip(c, Get("/page"));
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("content-length"), std::to_string(page.size() + 11));
    ASSERT_EQ(r.body.size(), page.size() + 11);
    EXPECT_EQ(r.body, "{\"data\":\"" + page + "\"}");
  }
  // The server released its references once the writes completed (the handler keeps one,
  // the test another).
  EXPECT_TRUE(WaitFor([&] { return shared.use_count() == 2; }));
}

TEST_F(WebserverTest, CountersTrackResponsesAndConnections) {
  StartServer();
  EXPECT_EQ(server_->responses_with_status(200), 0u);
  Client c(server_->port());
  RoundTrip(c, Get("/echo"));
  RoundTrip(c, Get("/echo"));
  RoundTrip(c, Get("/missing"));
  EXPECT_EQ(server_->responses_with_status(200), 2u);
  EXPECT_EQ(server_->responses_with_status(404), 1u);
  EXPECT_EQ(server_->responses_with_status(999), 0u);
  EXPECT_EQ(server_->connections_accepted(), 1u);
  EXPECT_EQ(server_->connections_open(), 1u);
  c.Close();
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
}

TEST_F(WebserverTest, ConnectionsBeyondMaxAreClosed) {
  Webserver::Options o = TestOptions();
  o.max_connections = 1;
  StartServer(o);
  Client first(server_->port());
  EXPECT_EQ(RoundTrip(first, Get("/echo")).status, 200);
  Client second(server_->port());
  EXPECT_TRUE(second.WaitForClose());
  EXPECT_EQ(RoundTrip(first, Get("/echo")).status, 200);
  first.Close();
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 0; }));
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
}

TEST_F(WebserverTest, StopClosesOpenConnections) {
  StartServer();
  Client c(server_->port());
  EXPECT_EQ(RoundTrip(c, Get("/echo")).status, 200);
  server_->Stop();
  EXPECT_TRUE(c.WaitForClose());
  Client refused(server_->port());
  EXPECT_FALSE(refused.connected());
}

TEST_F(WebserverTest, ManyConcurrentClientsAllSucceed) {
  StartServer();
  constexpr int kThreads = 32;
  constexpr int kRequests = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = std::make_unique<Client>(server_->port());
      for (int i = 0; i < kRequests; ++i) {
        if (i % 10 == 9) client = std::make_unique<Client>(server_->port());  // Reconnect.
        std::string name = std::to_string(t) + "-" + std::to_string(i);
        client->Send(Get("/echo?name=" + name));
        Response r;
        if (client->Read(&r) && r.status == 200 &&
            r.body.find("name=" + name + "\n") != std::string::npos) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kRequests);
  EXPECT_EQ(server_->responses_with_status(200), uint64_t{kThreads * kRequests});
}

TEST_F(WebserverTest, StartReportsBadAddressesAndPortsInUse) {
  StartServer();
  Webserver::Options o = TestOptions();
  o.port = server_->port();
  Webserver clash(o);
  Status st = clash.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(o.port)), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("in use"), std::string::npos) << st.ToString();

  o = TestOptions();
  o.bind_address = "not an address";
  st = Webserver(o).Start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'not an address'"), std::string::npos) << st.ToString();

  o = TestOptions();
  o.num_threads = 0;
  EXPECT_EQ(Webserver(o).Start().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(server_->Start().code(), StatusCode::kAlreadyExists);
}

TEST(WebserverMessageTest, QueryParamDecodesAndHeaderIgnoresCase) {
  HttpRequest req;
  req.query = "a=1&name=x%20y+z&empty=&flag&name=second&bad=%zz%4&q%5Fid=7";
  bool present = false;
  EXPECT_EQ(req.QueryParam("a"), "1");
  EXPECT_EQ(req.QueryParam("name"), "x y z");  // The first occurrence wins.
  EXPECT_EQ(req.QueryParam("empty", &present), "");
  EXPECT_TRUE(present);
  EXPECT_EQ(req.QueryParam("flag", &present), "");
  EXPECT_TRUE(present);
  EXPECT_EQ(req.QueryParam("missing", &present), "");
  EXPECT_FALSE(present);
  EXPECT_EQ(req.QueryParam("bad"), "%zz%4");
  EXPECT_EQ(req.QueryParam("q_id"), "7");
  req.headers.set("X-Trino-User", "ann");
  EXPECT_EQ(req.Header("x-trino-user"), "ann");
  EXPECT_EQ(req.Header("X-TRINO-USER"), "ann");
  EXPECT_EQ(req.Header("x-missing"), "");
}

TEST(WebserverMessageTest, ParseRequestTargetForms) {
  HttpRequest req;
  ASSERT_TRUE(ParseRequestTarget("/a/b?x=1", &req));
  EXPECT_EQ(req.path, "/a/b");
  EXPECT_EQ(req.query, "x=1");
  EXPECT_EQ(req.absolute_authority, "");
  ASSERT_TRUE(ParseRequestTarget("HTTP://h:1", &req));
  EXPECT_EQ(req.target, "/");
  EXPECT_EQ(req.absolute_authority, "h:1");
  ASSERT_TRUE(ParseRequestTarget("https://h?q", &req));
  EXPECT_EQ(req.target, "/?q");
  EXPECT_EQ(req.path, "/");
  EXPECT_EQ(req.query, "q");
  ASSERT_TRUE(ParseRequestTarget("/p#frag", &req));
  EXPECT_EQ(req.target, "/p");
  EXPECT_FALSE(ParseRequestTarget("*", &req));
  EXPECT_FALSE(ParseRequestTarget("host:80", &req));
  EXPECT_FALSE(ParseRequestTarget("http:///x", &req));
  EXPECT_FALSE(ParseRequestTarget("", &req));
}

TEST(WebserverMessageTest, ResponseHeadDropsHeadersThatCouldSplitTheResponse) {
  HttpResponse resp = HttpResponse::Text(200, "x");
  resp.headers = {{"X-Ok", "fine"},
                  {"X-Evil", "a\r\nSet-Cookie: b"},
                  {"Bad Name", "v"},
                  {"content-length", "99"}};
  std::string head;
  AppendResponseHead(200, resp, 1, /*keep_alive=*/true, /*http10=*/false, &head);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(head.find("\r\nX-Ok: fine\r\n"), std::string::npos);
  EXPECT_EQ(head.find("Set-Cookie"), std::string::npos);
  EXPECT_EQ(head.find("Bad Name"), std::string::npos);
  EXPECT_EQ(head.find("99"), std::string::npos);
  EXPECT_NE(head.find("\r\nContent-Length: 1\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

}  // namespace
}  // namespace qr
