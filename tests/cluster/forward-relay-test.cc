// The forwarder's streaming relay (issue 19 item 2): a member (a Webserver whose handler calls
// Forwarder::Forward()) relays the answers of a fake owner (a raw socket server each test
// scripts) to a raw client. A multi-megabyte answer streams intact (the client has part of
// it before the owner sent the rest), a chunked one too, a small one is relayed whole; the
// owner's connection is pooled after a complete keep-alive answer and not after a truncated
// one; an owner that stalls mid-body cuts the relayed answer short within the bound.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/forwarder.h"
#include "http/webserver.h"
#include "util/mutex.h"
#include "util/unique-id.h"

namespace qr {
namespace {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

/// Every wait of a passing test ends long before this.
constexpr auto kDeadline = 30s;

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// Reads from 'fd' into '*buf' until 'done(*buf)'; false at EOF, an error or the deadline
/// (then '*timed_out' is set).
template <class Done>
bool ReadUntil(int fd, std::string* buf, Done done, bool* timed_out = nullptr) {
  while (!done(*buf)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(kDeadline / 1ms)) <= 0) {
      if (timed_out != nullptr) *timed_out = true;
      return false;
    }
    char tmp[65536];
    const ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf->append(tmp, static_cast<size_t>(n));
  }
  return true;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// An owner on a loopback port: each request read on a connection (a GET: its head) is
/// answered by the script, which returns whether the connection serves another one.
class FakeOwner {
 public:
  using Script = std::function<bool(int fd)>;

  explicit FakeOwner(Script script) : script_(std::move(script)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        listen(listen_fd_, 16) == 0 &&
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeOwner() {
    shutdown(listen_fd_, SHUT_RDWR);  // Wakes accept().
    acceptor_.join();
    {
      MutexLock l(&mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);  // Wakes the connections' reads.
    }
    for (std::thread& t : threads_) t.join();
    close(listen_fd_);
  }

  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  /// The heads of the requests read so far, in lower case.
  std::vector<std::string> heads() const {
    MutexLock l(&mu_);
    return heads_;
  }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      connections_.fetch_add(1);
      MutexLock l(&mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string buf;
    for (;;) {
      if (!ReadUntil(fd, &buf, [](const std::string& b) {
            return b.find("\r\n\r\n") != std::string::npos;
          })) {
        break;
      }
      std::string head = buf.substr(0, buf.find("\r\n\r\n") + 4);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      {
        MutexLock l(&mu_);
        heads_.push_back(std::move(head));
      }
      buf.erase(0, buf.find("\r\n\r\n") + 4);
      requests_.fetch_add(1);
      if (!script_(fd)) break;
    }
    shutdown(fd, SHUT_RDWR);  // Closed for good by the destructor (no fd reuse meanwhile).
  }

  const Script script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  mutable Mutex mu_;
  std::vector<int> fds_ QR_GUARDED_BY(mu_);
  std::vector<std::string> heads_ QR_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // Only the acceptor adds; joined after it.
};

/// 'n' bytes of a pattern that a shifted or dropped piece would break.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

std::string Head(size_t content_length) {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Owner: yes\r\nContent-Length: " +
         std::to_string(content_length) + "\r\n\r\n";
}

class ForwardRelayTest : public ::testing::Test {
 protected:
  void Start(FakeOwner::Script script, std::chrono::milliseconds timeout = 10s) {
    owner_ = std::make_unique<FakeOwner>(std::move(script));
    ASSERT_GT(owner_->port(), 0);
    Forwarder::Options fo;
    fo.timeout = timeout;
    fo.cluster_name = "relay-test";
    forwarder_ = std::make_unique<Forwarder>(fo);
    Webserver::Options o;
    o.port = 0;
    o.num_threads = 1;
    server_ = std::make_unique<Webserver>(o);
    server_->RegisterHandler(http::verb::get, "/v1/query/", [this](HttpRequest& req,
                                                                   ResponseCallback respond) {
      ClusterMember member;
      member.id = 2;
      member.uri = "http://127.0.0.1:" + std::to_string(owner_->port());
      forwarder_->Forward(member, UniqueId{1, 2}, req, 0ms,
                          [](const std::string& msg) { return HttpResponse::Text(502, msg); },
                          server_->io_context(), std::move(respond));
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    if (forwarder_ != nullptr) forwarder_->Close();
    server_.reset();
    forwarder_.reset();
    owner_.reset();
  }

  /// Sends a GET on 'fd' (a connection to the member).
  static void Get(int fd) { SendAll(fd, "GET /v1/query/x HTTP/1.1\r\nHost: lb:8080\r\n\r\n"); }

  std::unique_ptr<FakeOwner> owner_;
  std::unique_ptr<Forwarder> forwarder_;
  std::unique_ptr<Webserver> server_;
};

bool HasHead(const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }

TEST_F(ForwardRelayTest, MultiMegabyteAnswerStreamsIntactAndPoolsTheConnection) {
  const std::string body = Pattern((4u << 20) + 12345);
  auto client_has_some = std::make_shared<std::promise<void>>();
  std::shared_future<void> has_some = client_has_some->get_future().share();
  Start([body, has_some](int fd) {
    // The first MiB, then the rest only once the client has part of the answer: a relay that
    // waited for the whole answer would never get there.
    if (!SendAll(fd, Head(body.size()) + body.substr(0, 1 << 20))) return false;
    if (has_some.wait_for(kDeadline) != std::future_status::ready) return false;
    return SendAll(fd, std::string_view(body).substr(1 << 20));
  });
  const int fd = ConnectLoopback(server_->port());
  ASSERT_GE(fd, 0);
  Get(fd);
  std::string got;
  ASSERT_TRUE(ReadUntil(fd, &got, [](const std::string& b) {
    return HasHead(b) && b.size() - (b.find("\r\n\r\n") + 4) >= (512u << 10);
  }));
  client_has_some->set_value();
  const size_t head_end = got.find("\r\n\r\n") + 4;
  const std::string head = got.substr(0, head_end);
  EXPECT_NE(head.find("HTTP/1.1 200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(body.size())), std::string::npos)
      << head;
  EXPECT_NE(head.find("X-Owner: yes"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/plain"), std::string::npos) << head;
  ASSERT_TRUE(ReadUntil(fd, &got, [&](const std::string& b) {
    return b.size() >= head_end + body.size();
  }));
  EXPECT_EQ(got.size(), head_end + body.size());
  EXPECT_TRUE(got.compare(head_end, std::string::npos, body) == 0) << "the body differs";
  // Pooled before the last bytes went to the client.
  Forwarder::Stats s = forwarder_->GetStats();
  EXPECT_EQ(s.connections_idle, 1);
  EXPECT_EQ(s.connections_busy, 0);
  EXPECT_EQ(s.bytes_relayed, static_cast<int64_t>(body.size()));
  EXPECT_EQ(s.results[Forwarder::kOk], 1);

  // The next request takes the pooled connection.
  Get(fd);
  got.clear();
  ASSERT_TRUE(ReadUntil(fd, &got, [&](const std::string& b) {
    return HasHead(b) && b.size() >= b.find("\r\n\r\n") + 4 + body.size();
  }));
  EXPECT_EQ(owner_->connections(), 1);
  EXPECT_EQ(owner_->requests(), 2);
  EXPECT_EQ(forwarder_->GetStats().connections_opened, 1);
  close(fd);
}

TEST_F(ForwardRelayTest, ChunkedAnswerStreamsChunked) {
  const std::string body = Pattern(300000);
  Start([body](int fd) {
    std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (size_t pos = 0; pos < body.size(); pos += 70000) {
      const std::string part = body.substr(pos, 70000);
      char size[32];
      snprintf(size, sizeof(size), "%zx\r\n", part.size());
      out += size + part + "\r\n";
    }
    return SendAll(fd, out + "0\r\n\r\n");
  });
  const int fd = ConnectLoopback(server_->port());
  ASSERT_GE(fd, 0);
  Get(fd);
  std::string got;
  ASSERT_TRUE(ReadUntil(fd, &got, [](const std::string& b) {
    return b.size() >= 5 && b.compare(b.size() - 5, 5, "0\r\n\r\n") == 0 && HasHead(b);
  }));
  const size_t head_end = got.find("\r\n\r\n") + 4;
  EXPECT_NE(got.substr(0, head_end).find("Transfer-Encoding: chunked"), std::string::npos);
  std::string decoded;
  for (size_t pos = head_end;;) {
    const size_t eol = got.find("\r\n", pos);
    ASSERT_NE(eol, std::string::npos);
    const size_t n = std::stoul(got.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    decoded += got.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  EXPECT_TRUE(decoded == body) << "the body differs";
  EXPECT_EQ(forwarder_->GetStats().connections_idle, 1);
  close(fd);
}

TEST_F(ForwardRelayTest, SmallAnswerIsRelayedWhole) {
  Start([](int fd) { return SendAll(fd, Head(5) + "hello"); });
  const int fd = ConnectLoopback(server_->port());
  ASSERT_GE(fd, 0);
  Get(fd);
  std::string got;
  ASSERT_TRUE(ReadUntil(fd, &got, [](const std::string& b) {
    return HasHead(b) && b.size() >= b.find("\r\n\r\n") + 4 + 5;
  }));
  EXPECT_NE(got.find("Content-Length: 5\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.size() - 5), "hello");
  const Forwarder::Stats s = forwarder_->GetStats();
  EXPECT_EQ(s.connections_idle, 1);
  EXPECT_EQ(s.bytes_relayed, 5);
  close(fd);
}

TEST_F(ForwardRelayTest, ExpectIsNotForwardedAndInterimAnswersAreSkipped) {
  // An owner that sends 100 Continue before each answer (one behind another proxy might),
  // and numbers its answers: taking the 100 for the answer would leave the final one in the
  // pooled connection, where the next request would read it as its own.
  auto answers = std::make_shared<std::atomic<int>>(0);
  Start([answers](int fd) {
    const std::string body = "answer" + std::to_string(++*answers);
    return SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n" + Head(body.size()) + body);
  });
  for (int i = 1; i <= 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const int fd = ConnectLoopback(server_->port());
    ASSERT_GE(fd, 0);
    SendAll(fd, "GET /v1/query/x HTTP/1.1\r\nHost: lb:8080\r\nExpect: 100-continue\r\n\r\n");
    std::string got;
    ASSERT_TRUE(ReadUntil(fd, &got, [](const std::string& b) {
      return HasHead(b) && b.size() >= b.find("\r\n\r\n") + 4 + 7;
    }));
    EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
    EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "answer" + std::to_string(i));
    close(fd);
  }
  EXPECT_EQ(owner_->connections(), 1);  // One pooled connection, in step throughout.
  const std::vector<std::string> heads = owner_->heads();
  ASSERT_EQ(heads.size(), 3u);
  for (const std::string& head : heads) {
    EXPECT_EQ(head.find("\r\nexpect:"), std::string::npos) << head;
  }
}

TEST_F(ForwardRelayTest, TruncatedAnswerIsCutShortAndNotPooled) {
  Start([](int fd) {
    SendAll(fd, Head(1 << 20) + Pattern(100000));
    return false;  // Closes mid-body.
  });
  for (int i = 1; i <= 2; ++i) {
    const int fd = ConnectLoopback(server_->port());
    ASSERT_GE(fd, 0);
    Get(fd);
    std::string got;
    bool timed_out = false;
    EXPECT_FALSE(ReadUntil(fd, &got, [](const std::string&) { return false; }, &timed_out));
    EXPECT_FALSE(timed_out);
    ASSERT_TRUE(HasHead(got)) << got;
    EXPECT_LT(got.size(), got.find("\r\n\r\n") + 4 + (1u << 20));
    const Forwarder::Stats s = forwarder_->GetStats();
    EXPECT_EQ(s.connections_idle, 0);
    EXPECT_EQ(s.connections_busy, 0);
    EXPECT_EQ(owner_->connections(), i);  // A fresh connection each time.
    close(fd);
  }
}

TEST_F(ForwardRelayTest, OwnerStallingMidBodyFailsTheRelayWithinTheBound) {
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  Start(
      [released](int fd) {
        SendAll(fd, Head(1 << 20) + "0123456789");
        released.wait_for(kDeadline);  // Stalls until the test ends.
        return false;
      },
      // The bound also covers connecting and the owner's header: long enough for a busy
      // machine under TSan, short enough to keep the test quick.
      /*timeout=*/2s);
  const int fd = ConnectLoopback(server_->port());
  ASSERT_GE(fd, 0);
  Get(fd);
  std::string got;
  // The relay ends (the member resets the client's connection) while the owner still stalls.
  bool timed_out = false;
  EXPECT_FALSE(ReadUntil(fd, &got, [](const std::string&) { return false; }, &timed_out));
  EXPECT_FALSE(timed_out);
  EXPECT_NE(released.wait_for(0s), std::future_status::ready);
  ASSERT_TRUE(HasHead(got)) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "0123456789");
  const Forwarder::Stats s = forwarder_->GetStats();
  EXPECT_EQ(s.connections_idle, 0);
  EXPECT_EQ(s.connections_busy, 0);
  release->set_value();
  close(fd);
}

}  // namespace
}  // namespace qr
