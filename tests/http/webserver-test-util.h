#pragma once

// The raw-socket HTTP test client and the Webserver fixture shared by webserver-test.cc and
// webserver-auth-test.cc.

#include "http/webserver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/ascii.h>
#include <gtest/gtest.h>

#include "http/http-message.h"
#include "testutil/wait.h"
#include "util/mutex.h"

namespace qr::webserver_test {

using namespace std::chrono_literals;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

// Every wait in this file is bounded by this; a passing run never comes near it.
constexpr auto kDeadline = 10s;

/// One HTTP response as the test client parsed it.
struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;

  bool Has(const std::string& name) const { return headers.count(name) != 0; }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

/// A blocking HTTP client over a raw POSIX socket, so tests can send any bytes. Every read
/// waits with poll() up to a deadline: no test can hang, and none sleeps.
class Client {
 public:
  explicit Client(int port) : Client(port, socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  /// Connects 'socket_fd' (a TCP socket the caller opened; the client owns it from now on).
  Client(int port, int socket_fd) : fd_(socket_fd) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (!connected_) error_ = std::string(fd_ < 0 ? "socket: " : "connect: ") + strerror(errno);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  /// Why connected() is false ("socket: ..." or "connect: ..."); empty when connected.
  const std::string& error() const { return error_; }

  void Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // The server closed; the following read reports it.
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  /// Reads one response; 'head': the request was a HEAD (no body follows the headers).
  bool Read(Response* out, bool head = false) {
    *out = Response();
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    std::string header_block = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    size_t line_end = header_block.find("\r\n");
    std::string status_line = header_block.substr(0, line_end);
    if (status_line.rfind("HTTP/1.1 ", 0) != 0) return false;
    out->status = std::stoi(status_line.substr(9, 3));
    for (size_t pos = line_end + 2; pos < header_block.size();) {
      size_t eol = header_block.find("\r\n", pos);
      std::string line = header_block.substr(pos, eol - pos);
      pos = eol + 2;
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      absl::AsciiStrToLower(&name);
      size_t value_start = line.find_first_not_of(' ', colon + 1);
      out->headers[name] = value_start == std::string::npos ? "" : line.substr(value_start);
    }
    if (head || out->status < 200 || out->status == 204 || out->status == 304) return true;
    if (!out->Has("content-length")) return false;
    size_t length = std::stoul(out->Header("content-length"));
    while (buf_.size() < length) {
      if (!Fill()) return false;
    }
    out->body = buf_.substr(0, length);
    buf_.erase(0, length);
    return true;
  }

  /// True when the server closes the connection (EOF or reset) within 'timeout'; data that
  /// arrives meanwhile is discarded.
  bool WaitForClose(std::chrono::milliseconds timeout = kDeadline) {
    auto deadline = Clock::now() + timeout;
    buf_.clear();
    for (;;) {
      int r = Poll(deadline);
      if (r <= 0) return false;
      char tmp[4096];
      ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  }

 private:
  int Poll(Clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      pollfd p{fd_, POLLIN, 0};
      int r = poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
  }

  bool Fill() {
    if (Poll(Clock::now() + kDeadline) <= 0) return false;
    char tmp[16384];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string error_;
  std::string buf_;
};

inline std::string Get(std::string_view target, std::string_view extra_headers = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n" +
         std::string(extra_headers) + "\r\n";
}

/// Requests whose handlers park their ResponseCallback here, for tests to complete later.
class Parking {
 public:
  void Park(ResponseCallback cb) {
    MutexLock l(&mu_);
    parked_.push_back(std::move(cb));
    cv_.NotifyAll();
  }
  /// Waits until 'n' callbacks are parked; false at the deadline.
  bool WaitForParked(size_t n) {
    MutexLock l(&mu_);
    auto deadline = Clock::now() + kDeadline;
    while (parked_.size() < n) {
      if (!cv_.WaitUntil(&mu_, deadline) && parked_.size() < n) return false;
    }
    return true;
  }
  ResponseCallback Take() {
    MutexLock l(&mu_);
    ResponseCallback cb = std::move(parked_.front());
    parked_.erase(parked_.begin());
    return cb;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<ResponseCallback> parked_ QR_GUARDED_BY(mu_);
};

/// Answers with the request's fields as "key=value" lines.
inline void EchoHandler(HttpRequest& req, ResponseCallback respond) {
  std::string out = "method=" + req.method_string + "\npath=" + req.path +
                    "\nquery=" + req.query + "\ntarget=" + req.target +
                    "\nauthority=" + req.absolute_authority + "\nname=" + req.QueryParam("name") +
                    "\nuser=" + std::string(req.Header("x-trino-user")) +
                    "\nbody_size=" + std::to_string(req.body.size()) + "\nbody=" + req.body;
  respond(HttpResponse::Text(200, std::move(out)));
}

class WebserverTest : public ::testing::Test {
 protected:
  static Webserver::Options TestOptions() {
    Webserver::Options o;
    o.port = 0;
    o.num_threads = 2;
    return o;
  }

  /// Creates the server with the echo routes plus whatever 'extra' registers, and starts it.
  void StartServer(Webserver::Options options = TestOptions(),
                   const std::function<void(Webserver&)>& extra = nullptr) {
    server_ = std::make_unique<Webserver>(options);
    server_->RegisterHandler(http::verb::get, "/echo", EchoHandler);
    server_->RegisterHandler(http::verb::post, "/echo", EchoHandler);
    server_->RegisterHandler(http::verb::get, "/park", [this](HttpRequest&, ResponseCallback cb) {
      parking_.Park(std::move(cb));
    });
    if (extra) extra(*server_);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_GT(server_->port(), 0);
  }

  Response RoundTrip(Client& c, std::string_view request) {
    c.Send(request);
    Response r;
    EXPECT_TRUE(c.Read(&r)) << "no complete response to " << request;
    return r;
  }

  Response OneShot(std::string_view request) {
    Client c(server_->port());
    return RoundTrip(c, request);
  }

  std::unique_ptr<Webserver> server_;
  Parking parking_;
};

}  // namespace qr::webserver_test
