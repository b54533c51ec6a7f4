// Webserver::Drain(): the graceful start of a stop.

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "http/webserver.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;

/// True when a new connection to 'port' is refused (nothing listens any more).
bool ConnectionRefused(int port) {
  Client c(port);
  return !c.connected();
}

class WebserverDrainTest : public WebserverTest {};

TEST_F(WebserverDrainTest, RequestUnderWayIsAnsweredAndIdleConnectionsClose) {
  StartServer();
  Client idle(server_->port());
  Response r = RoundTrip(idle, Get("/echo"));
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.Header("connection"), "close");  // Kept alive: now waiting for a request.
  Client busy(server_->port());
  busy.Send(Get("/park"));
  ASSERT_TRUE(parking_.WaitForParked(1));

  std::atomic<int> drained{-1};
  std::thread drainer([&] { drained = server_->Drain(kDeadline * 3) ? 1 : 0; });
  // The idle connection closes, the port stops listening, and the drain waits for the
  // parked request: only its answer can close the last connection.
  EXPECT_TRUE(idle.WaitForClose());
  EXPECT_TRUE(WaitFor([&] { return ConnectionRefused(server_->port()); }));
  EXPECT_EQ(drained.load(), -1);
  parking_.Take()(HttpResponse::Text(200, "late"));
  ASSERT_TRUE(busy.Read(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "late");
  EXPECT_EQ(r.Header("connection"), "close");
  EXPECT_TRUE(busy.WaitForClose());
  busy.Close();  // The server lingers until the client closes too (or for 2 s).
  drainer.join();
  EXPECT_EQ(drained.load(), 1);
  EXPECT_EQ(server_->connections_open(), 0u);
  server_->Stop();
}

TEST_F(WebserverDrainTest, GivesUpAtItsDeadlineAndStopClosesTheRest) {
  StartServer();
  Client busy(server_->port());
  busy.Send(Get("/park"));
  ASSERT_TRUE(parking_.WaitForParked(1));
  EXPECT_FALSE(server_->Drain(std::chrono::milliseconds(50)));  // The handler never answers.
  EXPECT_EQ(server_->connections_open(), 1u);
  server_->Stop();
  EXPECT_TRUE(busy.WaitForClose());
  EXPECT_EQ(server_->connections_open(), 0u);
  parking_.Take()(HttpResponse::Text(200, "too late"));  // Harmless after the stop.
  EXPECT_TRUE(server_->Drain(std::chrono::milliseconds(50)));  // Not running: nothing to do.
}

TEST_F(WebserverDrainTest, WithNothingUnderWayReturnsAtOnce) {
  StartServer();
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_EQ(RoundTrip(*idle.back(), Get("/echo")).status, 200);
  }
  // Idle connections do not hold the drain: it returns long before its deadline (the bound
  // here only keeps a broken drain from hanging the test).
  EXPECT_TRUE(server_->Drain(kDeadline * 3));
  for (auto& c : idle) EXPECT_TRUE(c->WaitForClose());
  EXPECT_TRUE(ConnectionRefused(server_->port()));
  server_->Stop();
}

}  // namespace
}  // namespace qr
