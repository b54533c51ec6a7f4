// The webserver's connection limits: per address, and out of file descriptors (EMFILE); and
// RaiseFileLimit().

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testutil/log-capture.h"
#include "http/file-limit.h"
#include "webserver-test-util.h"

namespace qr {
namespace {

using namespace webserver_test;
using qr::testing::LogCapture;
using Limit = Webserver::ConnectionLimit;

TEST_F(WebserverTest, ConnectionsBeyondThePerAddressLimitGet503) {
  LogCapture log;
  Webserver::Options o = TestOptions();
  o.max_connections_per_address = 2;
  StartServer(o);
  Client first(server_->port());
  Client second(server_->port());
  EXPECT_EQ(RoundTrip(first, Get("/echo")).status, 200);
  EXPECT_EQ(RoundTrip(second, Get("/echo")).status, 200);
  for (int i = 0; i < 20; ++i) {
    Client refused(server_->port());
    Response r;
    ASSERT_TRUE(refused.Read(&r)) << "refused connection " << i << " got no answer";
    EXPECT_EQ(r.status, 503);
    EXPECT_NE(r.body.find("--max_connections_per_address"), std::string::npos) << r.body;
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_TRUE(refused.WaitForClose());
  }
  EXPECT_EQ(server_->connections_refused(Limit::kPerAddress), 20u);
  EXPECT_EQ(server_->connections_refused(Limit::kMaxConnections), 0u);
  EXPECT_EQ(log.Matching("max_connections_per_address").size(), 1u) << "one line per 10 s";
  // The connections admitted still work; closing one frees its slot.
  EXPECT_EQ(RoundTrip(first, Get("/echo")).status, 200);
  first.Close();
  EXPECT_TRUE(WaitFor([&] { return server_->connections_open() == 1; }));
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
}

TEST_F(WebserverTest, TrustedPeersAreExemptFromThePerAddressLimit) {
  Webserver::Options o = TestOptions();
  o.max_connections_per_address = 1;
  ASSERT_TRUE(IpNetworks::Parse("127.0.0.1", &o.per_address_exempt).ok());
  StartServer(o);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    EXPECT_EQ(RoundTrip(*clients.back(), Get("/echo")).status, 200);
  }
  EXPECT_EQ(server_->connections_refused(Limit::kPerAddress), 0u);
}

TEST(WebserverOptionsTest, NegativePerAddressLimitIsRefused) {
  Webserver::Options o;
  o.port = 0;
  o.max_connections_per_address = -1;
  Webserver server(o);
  Status s = server.Start();
  EXPECT_NE(s.message().find("max_connections_per_address must be >= 0"), std::string::npos)
      << s.message();
}

/// Lowers the soft open-file limit for the test's duration and fills every free descriptor
/// below it with /dev/null, like a daemon that ran out.
class FileTableFiller {
 public:
  FileTableFiller() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    close(probe);
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(probe) + 64;
    ok_ = probe >= 0 && low.rlim_cur <= saved_.rlim_cur && setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (int fd; ok_ && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds_.push_back(fd);
    ok_ = ok_ && errno == EMFILE;
  }
  ~FileTableFiller() {
    Release();
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool ok() const { return ok_; }
  void Release() {
    for (int fd : fds_) close(fd);
    fds_.clear();
  }

 private:
  rlimit saved_{};
  bool ok_ = false;
  std::vector<int> fds_;
};

// Out of descriptors, a connection (a health check) gets an answer at once instead of
// hanging in the backlog, the acceptor logs one line, not ten a second, and it serves
// normally again as soon as descriptors are free.
TEST_F(WebserverTest, OutOfFileDescriptorsAnswers503LogsOnceAndRecovers) {
  StartServer(TestOptions(), [](Webserver& w) {
    w.RegisterHandler(http::verb::get, "/healthz", [](HttpRequest&, ResponseCallback respond) {
      respond(HttpResponse::Text(200, "OK\n"));
    });
  });
  LogCapture log;
  {
    // The clients' sockets are opened before the table is filled and stay open until the end:
    // a client that needed a free descriptor would race the server's accept() for it (the
    // kernel reserves the lowest free number for the length of an accept that then finds no
    // connection), and a client that closed its socket would free one for the server.
    constexpr int kConnections = 30;
    std::vector<int> sockets;
    for (int i = 0; i < kConnections; ++i) {
      sockets.push_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      ASSERT_GE(sockets.back(), 0) << strerror(errno);
    }
    std::vector<std::unique_ptr<Client>> clients;
    FileTableFiller filler;
    ASSERT_TRUE(filler.ok()) << "could not fill the file table";
    for (int i = 0; i < kConnections; ++i) {
      Client& c = *clients.emplace_back(std::make_unique<Client>(server_->port(), sockets[i]));
      ASSERT_TRUE(c.connected()) << "connection " << i << ": " << c.error();
      c.Send(Get("/healthz"));
      Response r;
      ASSERT_TRUE(c.Read(&r)) << "connection " << i << " got no answer";
      EXPECT_EQ(r.status, 503);
      EXPECT_EQ(r.Header("retry-after"), "1");
    }
    EXPECT_EQ(server_->connections_refused(Limit::kFileDescriptors),
              static_cast<uint64_t>(kConnections));
  }
  std::vector<std::string> lines = log.Matching("refused (file descriptors");
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_TRUE(log.Matching("accept failed").empty());
  // Descriptors free again: served. Not necessarily the very next connection: a freed
  // descriptor can first be taken by another thread of the process (the sanitizer runtime's,
  // under TSan), and the acceptor refuses until it has one of its own again.
  Response r;
  EXPECT_TRUE(WaitFor([&] {
    r = OneShot(Get("/healthz"));
    return r.status == 200;
  })) << "still refused: " << r.status << " " << r.body;
  EXPECT_EQ(r.body, "OK\n");
}

TEST(FileLimitTest, RaisesTheSoftLimitToTheHardLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_max, 256);
  if (low.rlim_cur == saved.rlim_max) GTEST_SKIP() << "hard limit " << saved.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  FileLimit limit;
  Status s = RaiseFileLimit(&limit);
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(limit.soft_before, 256u);
  EXPECT_EQ(limit.soft, saved.rlim_max);
  EXPECT_EQ(limit.hard, saved.rlim_max);
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
}

}  // namespace
}  // namespace qr
