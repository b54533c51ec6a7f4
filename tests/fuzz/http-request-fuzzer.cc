// The whole HTTP request path, as a client reaches it: two CoordinatorServers (webserver,
// Trino protocol handlers, debug pages, coordinator, SQLite engine over a tiny sample
// database) run in this process on free ports, one open and one with password authentication
// (users "alice" and "admin", passwords "alice-pw" and "admin-pw"; the seeds carry their
// Basic credentials), so that the authenticate hook, its deferred verification and the
// user-header rules are fuzzed too. Each input is written as is to a new connection to each
// server, whose write side is then shut down; the answer is read until the server closes.
//
// Properties:
//  - the server answers every input, or closes, within a deadline (no hang);
//  - what it sends is a sequence of well-formed HTTP/1.1 responses, one per request read
//    (HEAD answers carry no body), with nothing after the last one;
//  - no 500 from the server itself (a handler that never answered, threw, or set a bad
//    status), and every application/json body parses as JSON;
//  - every few inputs the server still answers GET /v1/info/state with 200, and no
//    connection stays open once its client is gone.
// http-parse-fuzzer covers the parsing functions alone, much faster.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "fuzz-util.h"
#include "server-read.h"
#include "service/coordinator-server.h"
#include "http/password-file.h"
#include "http/webserver.h"

namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;

/// No input may keep its connection open longer than this once it has been sent.
constexpr auto kDeadline = 10s;
/// Inputs between two health checks.
constexpr int kHealthCheckEvery = 64;

/// The open server, and the one with password authentication.
qr::CoordinatorServer* g_server = nullptr;
qr::CoordinatorServer* g_auth_server = nullptr;

qr::CoordinatorServer::Options ServerOptions() {
  qr::CoordinatorServer::Options o;
  o.data_dir = qr::fuzz::DataDir();
  o.sample_scale_factor = qr::fuzz::kSampleScale;
  o.num_query_threads = 1;
  o.admin_users = "admin";
  o.http.port = 0;
  o.http.num_threads = 2;
  o.http.idle_timeout = 2s;
  o.http.max_connections = 64;
  o.coordinator.max_running_queries = 2;
  o.coordinator.max_queued_queries = 16;
  o.coordinator.idle_query_timeout_ms = 1000;
  o.coordinator.exec_time_limit_ms = 200;
  o.coordinator.query_log_size = 20;
  o.coordinator.exec_defaults.result_buffer_max_bytes = 64 << 10;
  o.coordinator.exec_defaults.page_max_rows = 64;
  o.coordinator.exec_defaults.page_max_bytes = 16 << 10;
  o.protocol.default_max_wait = 50ms;
  o.protocol.max_max_wait = 500ms;
  return o;
}

/// ServerOptions() with a password file of two users (written into the data directory).
qr::CoordinatorServer::Options AuthServerOptions() {
  qr::CoordinatorServer::Options o = ServerOptions();
  std::string lines;
  for (const char* user : {"alice", "admin"}) {
    std::string line;
    const qr::Status s = qr::MakePasswordEntryLine(user, std::string(user) + "-pw",
                                                   qr::kMinPasswordIterations, &line);
    FUZZ_CHECK(s.ok(), "cannot make a password entry", s.message());
    lines += line + "\n";
  }
  o.auth_password_file = qr::fuzz::DataDir() + "/fuzz.passwd";
  std::ofstream(o.auth_password_file, std::ios::trunc) << lines;
  o.allow_insecure_auth = true;  // Loopback only; TLS has its own tests.
  // Every input comes from 127.0.0.1: with the default limit, ten wrong passwords would turn
  // every later input into a 429 and the rest of the path would go unfuzzed.
  o.auth.max_failures = 1 << 30;
  return o;
}

/// What one connection brought back.
struct Exchange {
  std::string received;
  bool timed_out = false;
  bool reset = false;  // the server reset the connection (its last response may be cut)
};

/// connect() to 'addr', finishing one that a signal interrupted: libFuzzer's -timeout alarm
/// (every timeout/2 + 1 seconds) can land in a connect() that waits for the server's backlog,
/// which then fails with EINTR while the kernel goes on connecting. Returns 0 or the error.
int ConnectToServer(int fd, const sockaddr_in& addr) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return 0;
  if (errno != EINTR) return errno;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ETIMEDOUT;
    pollfd pfd{fd, POLLOUT, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return errno;
    if (ready == 0) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
  }
}

/// Connects, sends 'request' (reading at the same time, so a server that answers early never
/// deadlocks against us), shuts down the write side and reads until the server closes.
Exchange Send(const qr::CoordinatorServer* server, std::string_view request) {
  Exchange ex;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0, "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int err = ConnectToServer(fd, addr);
  FUZZ_CHECK(err == 0, "cannot connect to the server", std::strerror(err));
  size_t sent = 0;
  bool write_shut = false;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  char buf[16384];
  for (;;) {
    if (!write_shut && sent == request.size()) {
      shutdown(fd, SHUT_WR);
      write_shut = true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ex.timed_out = true;
      break;
    }
    pollfd pfd{fd, static_cast<short>(POLLIN | (write_shut ? 0 : POLLOUT)), 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        ex.received.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        break;
      } else if (errno != EAGAIN && errno != EINTR) {
        ex.reset = true;
        break;
      }
    }
    if (!write_shut && (pfd.revents & POLLOUT)) {
      const ssize_t n =
          send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (errno != EAGAIN && errno != EINTR) {
        write_shut = true;  // the server stopped reading (it answered and closed)
      }
    }
  }
  close(fd);
  return ex;
}

/// The methods of the requests in 'input', as the server's parser reads them (same limits).
std::vector<http::verb> RequestMethods(std::string_view input) {
  std::vector<http::verb> methods;
  while (!input.empty()) {
    http::request_parser<http::string_body> parser;
    const qr::fuzz::ServerRead read = qr::fuzz::ReadLikeTheServer(&input, &parser);
    // The request line is known once the head is: that is all the server needs to answer
    // (a refused head is answered, and the connection closed).
    if (read == qr::fuzz::ServerRead::kNoHead) break;
    methods.push_back(parser.get().method());
    if (read != qr::fuzz::ServerRead::kRequest || !parser.get().keep_alive()) break;
  }
  return methods;
}

void CheckResponse(const http::response<http::string_body>& resp, std::string_view all) {
  const unsigned status = resp.result_int();
  FUZZ_CHECK(status >= 100 && status <= 599, "bad status", all);
  FUZZ_CHECK(!(status == 500 && resp.body().starts_with("Internal error")),
             "the server answered 500 on its own", all);
  const std::string_view type(resp[http::field::content_type].data(),
                              resp[http::field::content_type].size());
  if (type.starts_with("application/json") && !resp.body().empty()) {
    FUZZ_CHECK(nlohmann::json::accept(resp.body()), "a JSON body does not parse", resp.body());
  }
}

/// The server's bytes must be complete responses, one per request read, nothing else.
void CheckResponses(std::string_view input, const Exchange& ex) {
  const std::vector<http::verb> methods = RequestMethods(input);
  std::string_view rest = ex.received;
  size_t index = 0;  // the request the next final response answers
  while (!rest.empty()) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.eager(true);
    if (index < methods.size() && methods[index] == http::verb::head) parser.skip(true);
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    while (!ec && !parser.is_done() && used < rest.size()) {
      used += parser.put(boost::asio::buffer(rest.data() + used, rest.size() - used), ec);
    }
    if (ec == http::error::need_more || !parser.is_done()) {
      // Cut short: only a reset connection or an expired deadline may do that.
      FUZZ_CHECK(ex.reset || ex.timed_out, "a response is incomplete", ex.received);
      return;
    }
    FUZZ_CHECK(!ec, "the server sent a malformed response", ex.received);
    CheckResponse(parser.get(), ex.received);
    rest.remove_prefix(used);
    if (parser.get().result_int() >= 200) ++index;
  }
  FUZZ_CHECK(index <= methods.size() + 1, "more responses than requests", ex.received);
}

/// 'server' still serves, and has closed every connection whose client is gone.
void HealthCheck(qr::CoordinatorServer* server, const char* auth_header) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  // The server closes each connection once it sees its client gone: wait for that.
  while (server->webserver()->connections_open() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  FUZZ_CHECK(server->webserver()->connections_open() == 0,
             "connections stay open after their clients left");
  const Exchange ex = Send(server, std::string("GET /v1/info/state HTTP/1.1\r\nHost: localhost\r\n") +
                                       auth_header + "Connection: close\r\n\r\n");
  FUZZ_CHECK(ex.received.starts_with("HTTP/1.1 200 ") &&
                 ex.received.ends_with("\"ACTIVE\""),
             "the server no longer answers GET /v1/info/state", ex.received);
}

qr::CoordinatorServer* StartServer(qr::CoordinatorServer::Options options) {
  auto* server = new qr::CoordinatorServer(std::move(options));
  const qr::Status s = server->Start();
  FUZZ_CHECK(s.ok(), "the server does not start", s.message());
  return server;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // The server logs a warning for every odd request: keep the fuzzer's output readable.
  if (getenv("QR_FUZZ_VERBOSE") == nullptr) FLAGS_minloglevel = google::GLOG_ERROR;
  g_server = StartServer(ServerOptions());
  g_auth_server = StartServer(AuthServerOptions());
  atexit([] {
    for (qr::CoordinatorServer** server : {&g_server, &g_auth_server}) {
      (*server)->Shutdown(0);
      delete *server;
      *server = nullptr;
    }
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int inputs = 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const qr::CoordinatorServer* server : {g_server, g_auth_server}) {
    const Exchange ex = Send(server, input);
    FUZZ_CHECK(!ex.timed_out, "the server neither answered nor closed within the deadline",
               ex.received);
    CheckResponses(input, ex);
  }
  if (++inputs % kHealthCheckEvery == 0) {
    HealthCheck(g_server, "");
    HealthCheck(g_auth_server, "Authorization: Basic YWRtaW46YWRtaW4tcHc=\r\n");  // admin
  }
  return 0;
}
