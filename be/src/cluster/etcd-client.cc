#include "cluster/etcd-client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <charconv>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>

#include "cluster/cluster-tls.h"
#include "cluster/maybe-tls-stream.h"

namespace qr {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

/// No etcd answer we read (a member list, a lease) comes near this; a larger one is not etcd.
constexpr uint64_t kMaxResponseBytes = 16 << 20;

constexpr std::string_view kHttp = "http://";
constexpr std::string_view kHttps = "https://";

/// TCP keep-alive of the connections to etcd: a machine that lost power or was cut off
/// never reports an error by itself, and a watch reads its stream without a deadline (it may
/// be quiet for hours). After this many seconds of silence the kernel probes the peer every
/// second, and three unanswered probes fail the connection (so the watch reconnects, to the
/// next endpoint if this one stays unreachable): a dead etcd is found within ~5 s, well
/// within a lease TTL. A live peer's kernel answers the probes: a quiet watch stays.
constexpr int kKeepAliveIdleS = 2;
constexpr int kKeepAliveIntervalS = 1;
constexpr int kKeepAliveProbes = 3;

void EnableKeepAlive(int fd) {
  const int on = 1;
  // Best effort: without it a stream can only wait, as before.
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepAliveIdleS, sizeof(kKeepAliveIdleS));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepAliveIntervalS,
                   sizeof(kKeepAliveIntervalS));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepAliveProbes, sizeof(kKeepAliveProbes));
}

/// "[http[s]://]host:port" -> host (without IPv6 brackets) and port; false when malformed.
bool SplitHostPort(std::string_view endpoint, std::string* host, std::string* port) {
  if (endpoint.starts_with(kHttps)) {
    endpoint.remove_prefix(kHttps.size());
  } else if (endpoint.starts_with(kHttp)) {
    endpoint.remove_prefix(kHttp.size());
  }
  if (endpoint.find('/') != std::string_view::npos) return false;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = endpoint.substr(0, colon);
  std::string_view p = endpoint.substr(colon + 1);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string_view::npos) {
    return false;  // an IPv6 address needs brackets
  }
  int port_value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port_value);
  if (ec != std::errc() || end != p.data() + p.size() || port_value < 1 || port_value > 65535) {
    return false;
  }
  *host = std::string(h);
  *port = std::string(p);
  return true;
}

}  // namespace

Status ParseEtcdEndpoints(std::string_view list, std::vector<std::string>* out) {
  out->clear();
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    std::string host, port;
    if (!SplitHostPort(entry, &host, &port)) {
      return InvalidArgument("etcd endpoint " + QuoteForError(entry) +
                             " is not [http[s]://]host:port (e.g. 127.0.0.1:2379, "
                             "https://etcd-1:2379 or [::1]:2379, comma-separated)");
    }
    out->emplace_back(entry);
  }
  if (out->empty()) return InvalidArgument("no etcd endpoint given (host:port,...)");
  return Status::OK();
}

bool IsTlsEtcdEndpoint(std::string_view endpoint) { return endpoint.starts_with(kHttps); }

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout,
                       std::shared_ptr<net::ssl::context> tls)
    : endpoints_(std::move(endpoints)), timeout_(timeout), tls_(std::move(tls)) {}

EtcdClient::~EtcdClient() = default;

void EtcdClient::ReplaceTlsContext(std::shared_ptr<net::ssl::context> tls) {
  MutexLock l(&tls_mu_);
  tls_ = std::move(tls);
}

void EtcdClient::Cancel() {
  canceled_.store(true);
  // Runs on the client's thread, inside Run(): the stream is never touched from two threads.
  net::post(ioc_, [this] {
    if (conn_ != nullptr) conn_->tcp().cancel();
  });
}

Status EtcdClient::Cancelled() const { return Status(StatusCode::kCancelled, "canceled"); }

void EtcdClient::Run() {
  ioc_.restart();
  ioc_.run();
}

void EtcdClient::CloseConnection() {
  if (conn_ != nullptr) {
    // No TLS close_notify: etcd needs none, and waiting for its answer would stall the retry.
    beast::error_code ignored;
    conn_->tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    conn_->tcp().close();
  }
  buffer_.clear();
  connected_ = false;
}

void EtcdClient::Fail() {
  CloseConnection();
  current_ = (current_ + 1) % endpoints_.size();
}

Status EtcdClient::Connect() {
  if (connected_) return Status::OK();
  if (canceled_.load()) return Cancelled();
  const std::string& endpoint = endpoints_[current_];
  std::string host, port;
  if (!SplitHostPort(endpoint, &host, &port)) {
    return InvalidArgument("bad etcd endpoint " + QuoteForError(endpoint));
  }
  if (IsTlsEtcdEndpoint(endpoint)) {
    std::shared_ptr<net::ssl::context> tls;
    {
      MutexLock l(&tls_mu_);
      tls = tls_;
    }
    if (tls == nullptr) return InvalidArgument("no TLS context for " + endpoint);
    conn_ = std::make_unique<MaybeTlsStream>(ioc_, std::move(tls));
  } else {
    conn_ = std::make_unique<MaybeTlsStream>(ioc_);
  }
  Status s = ConnectTo(host, port);
  if (!s.ok()) {
    conn_->tcp().close();
    return s;
  }
  connected_ = true;
  return Status::OK();
}

Status EtcdClient::ConnectTo(const std::string& host, const std::string& port) {
  tcp::resolver resolver(ioc_);
  beast::error_code ec;
  tcp::resolver::results_type results;
  resolver.async_resolve(host, port, [&](beast::error_code e, tcp::resolver::results_type r) {
    ec = e;
    results = std::move(r);
  });
  Run();
  if (canceled_.load()) return Cancelled();
  if (ec) return Status(StatusCode::kUnavailable, "resolving " + host + ": " + ec.message());
  conn_->tcp().expires_after(timeout_);
  conn_->tcp().async_connect(results, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  Run();
  if (canceled_.load()) return Cancelled();
  if (ec) return Status(StatusCode::kUnavailable, "connecting: " + ec.message());
  EnableKeepAlive(conn_->tcp().socket().native_handle());
  MaybeTlsStream::TlsStream* tls = conn_->tls();
  if (tls == nullptr) return Status::OK();
  if (!SetTlsPeerName(tls->native_handle(), host)) {
    return InvalidArgument("cannot verify TLS peer name " + QuoteForError(host));
  }
  tls->async_handshake(net::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
  Run();
  if (canceled_.load()) return Cancelled();
  if (ec) {
    return Status(StatusCode::kUnavailable,
                  "TLS handshake failed: " + TlsHandshakeFailure(tls->native_handle(),
                                                                 ec.message()));
  }
  return Status::OK();
}

Status EtcdClient::WriteRequest(std::string_view path, const std::string& body) {
  http::request<http::string_body> req{http::verb::post, std::string(path), 11};
  std::string_view authority = endpoints_[current_];
  if (authority.starts_with(kHttps)) authority.remove_prefix(kHttps.size());
  if (authority.starts_with(kHttp)) authority.remove_prefix(kHttp.size());
  req.set(http::field::host, beast::string_view(authority.data(), authority.size()));
  req.set(http::field::content_type, "application/json");
  // gRPC metadata "hasleader": an etcd member that has no leader (cut off from the quorum, or
  // the quorum is lost) answers "no leader" at once instead of serving stale reads or letting
  // a request wait out the timeout, and ends a watch within a few election timeouts (~5 s)
  // instead of keeping it open, silent, for as long as it stays cut off: the client then
  // moves to the next endpoint.
  req.set("Grpc-Metadata-Hasleader", "true");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  conn_->tcp().expires_after(timeout_);
  conn_->Visit([&](auto& s) {
    http::async_write(s, req, [&](beast::error_code e, size_t) { ec = e; });
  });
  Run();
  if (canceled_.load()) return Cancelled();
  if (ec) return Status(StatusCode::kUnavailable, "writing: " + ec.message());
  return Status::OK();
}

Status EtcdClient::Call(std::string_view path, const std::string& body, std::string* response) {
  Status last;
  for (size_t failures = 0; failures < endpoints_.size();) {
    if (canceled_.load()) return Cancelled();
    const std::string endpoint = endpoints_[current_];
    // A kept-alive connection the server closed while idle fails at once: one more try on a
    // fresh connection to the same endpoint before it counts as that endpoint's failure.
    const bool reused = connected_;
    Status s = Connect();
    if (s.ok()) s = WriteRequest(path, body);
    if (s.ok()) {
      http::response_parser<http::string_body> parser;
      parser.body_limit(kMaxResponseBytes);
      beast::error_code ec;
      conn_->tcp().expires_after(timeout_);
      conn_->Visit([&](auto& s) {
        http::async_read(s, buffer_, parser, [&](beast::error_code e, size_t) { ec = e; });
      });
      Run();
      if (canceled_.load()) return Cancelled();
      if (ec) {
        s = Status(StatusCode::kUnavailable, "reading: " + ec.message());
      } else if (parser.get().result_int() != 200) {
        s = Status(StatusCode::kUnavailable,
                   "HTTP " + std::to_string(parser.get().result_int()) + ": " +
                       QuoteForError(parser.get().body(), 200));
      } else {
        if (!parser.get().keep_alive()) Fail();
        *response = std::move(parser.get().body());
        return Status::OK();
      }
    }
    if (s.code() == StatusCode::kCancelled) return s;
    last = Status(s.code(), "etcd " + endpoint + std::string(path) + ": " + s.message());
    if (reused) {
      CloseConnection();  // the same endpoint again, now on a fresh connection
      continue;
    }
    Fail();
    ++failures;
  }
  return last;
}

Status EtcdClient::Stream(std::string_view path, const std::string& body,
                          const std::function<Status(std::string_view)>& on_message) {
  const std::string endpoint = endpoints_[current_];
  auto fail = [&](Status s) {
    if (s.code() != StatusCode::kCancelled) {
      s = Status(s.code(), "etcd " + endpoint + std::string(path) + ": " + s.message());
    }
    Fail();  // a stream is never reused
    return s;
  };
  Status s = Connect();
  if (s.ok()) s = WriteRequest(path, body);
  if (!s.ok()) return fail(s);
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);  // a watch runs for as long as it is not canceled
  beast::error_code ec;
  conn_->tcp().expires_after(timeout_);
  conn_->Visit([&](auto& s) {
    http::async_read_header(s, buffer_, parser, [&](beast::error_code e, size_t) { ec = e; });
  });
  Run();
  if (canceled_.load()) return fail(Cancelled());
  if (ec) return fail(Status(StatusCode::kUnavailable, "reading: " + ec.message()));
  if (parser.get().result_int() != 200) {
    return fail(Status(StatusCode::kUnavailable,
                       "HTTP " + std::to_string(parser.get().result_int())));
  }
  conn_->tcp().expires_never();
  std::string& pending = parser.get().body();
  while (!parser.is_done()) {
    conn_->Visit([&](auto& s) {
      http::async_read_some(s, buffer_, parser, [&](beast::error_code e, size_t) { ec = e; });
    });
    Run();
    if (canceled_.load()) return fail(Cancelled());
    if (ec) return fail(Status(StatusCode::kUnavailable, "reading: " + ec.message()));
    // The body reader appends at the string's end, so consumed messages may be erased.
    size_t start = 0;
    for (size_t nl = pending.find('\n'); nl != std::string::npos;
         nl = pending.find('\n', start)) {
      std::string_view message(pending.data() + start, nl - start);
      start = nl + 1;
      if (message.find_first_not_of(" \r\t") == std::string_view::npos) continue;
      s = on_message(message);
      if (!s.ok()) return fail(s);
    }
    pending.erase(0, start);
    if (pending.size() > kMaxResponseBytes) {
      return fail(InvalidArgument("a watch message is larger than 16 MiB"));
    }
  }
  // The last message may end without a newline (the gateway's error that ends the stream).
  if (pending.find_first_not_of(" \r\t") != std::string::npos) {
    s = on_message(pending);
    if (!s.ok()) return fail(s);
  }
  return fail(Status(StatusCode::kUnavailable, "the stream ended"));
}

}  // namespace qr
