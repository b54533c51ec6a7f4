// The webserver's threading: one io_context per I/O thread, connections pinned to one.

#include "http/webserver.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "util/mutex.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;

// Each I/O thread runs an io_context of its own: connections are handed out in turn, every
// request of a connection runs on its one thread, and io_context() called from a handler is
// that thread's (so a long poll's timer fires where its connection lives).
TEST_F(WebserverTest, ConnectionsAreSpreadOverTheIoThreadsAndStayOnTheirs) {
  Mutex mu;
  std::map<std::string, std::set<std::thread::id>> threads_by_conn;
  std::map<std::string, std::set<const boost::asio::io_context*>> iocs_by_conn;
  StartServer(TestOptions(), [&](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/who", [&](HttpRequest& req, ResponseCallback respond) {
      {
        MutexLock l(&mu);
        threads_by_conn[req.remote_address].insert(std::this_thread::get_id());
        iocs_by_conn[req.remote_address].insert(&s.io_context());
      }
      respond(HttpResponse::Text(200, "ok"));
    });
  });
  constexpr int kConnections = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    // One request at once, so that the connections are accepted in this order.
    ASSERT_EQ(RoundTrip(*clients.back(), Get("/who")).status, 200);
  }
  for (int round = 0; round < 5; ++round) {
    for (auto& c : clients) ASSERT_EQ(RoundTrip(*c, Get("/who")).status, 200);
  }
  MutexLock l(&mu);
  ASSERT_EQ(threads_by_conn.size(), static_cast<size_t>(kConnections));
  std::set<std::thread::id> all_threads;
  std::set<const boost::asio::io_context*> all_iocs;
  for (const auto& [conn, threads] : threads_by_conn) {
    EXPECT_EQ(threads.size(), 1u) << conn << " was served by more than one thread";
    EXPECT_EQ(iocs_by_conn[conn].size(), 1u) << conn;
    all_threads.insert(threads.begin(), threads.end());
    all_iocs.insert(iocs_by_conn[conn].begin(), iocs_by_conn[conn].end());
  }
  EXPECT_EQ(all_threads.size(), 2u) << "4 connections over 2 I/O threads use both";
  EXPECT_EQ(all_iocs.size(), 2u) << "each I/O thread has its own io_context";
  EXPECT_NE(all_iocs.count(&server_->io_context()), 0u)
      << "outside a handler, io_context() is one of the server's";
}

// on_io_thread_start runs once on each I/O thread, before it serves a request (the daemon
// asks for its scheduler slice there).
TEST_F(WebserverTest, EachIoThreadRunsTheStartHookOnceBeforeServing) {
  Mutex mu;
  std::map<std::thread::id, int> hook_calls;
  std::set<std::thread::id> serving;
  Webserver::Options options = TestOptions();
  options.num_threads = 3;
  options.on_io_thread_start = [&] {
    MutexLock l(&mu);
    ++hook_calls[std::this_thread::get_id()];
  };
  StartServer(options, [&](Webserver& s) {
    s.RegisterHandler(http::verb::get, "/who", [&](HttpRequest&, ResponseCallback respond) {
      {
        MutexLock l(&mu);
        serving.insert(std::this_thread::get_id());
      }
      respond(HttpResponse::Text(200, "ok"));
    });
  });
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_EQ(RoundTrip(*clients.back(), Get("/who")).status, 200);
  }
  MutexLock l(&mu);
  EXPECT_EQ(serving.size(), 3u) << "3 connections over 3 I/O threads use all three";
  EXPECT_EQ(hook_calls.size(), 3u);
  for (const auto& [thread, calls] : hook_calls) EXPECT_EQ(calls, 1);
  for (const std::thread::id& t : serving) {
    EXPECT_EQ(hook_calls.count(t), 1u) << "a thread served before its hook ran";
  }
}

}  // namespace
}  // namespace qr
