#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "util/mutex.h"
#include "util/status.h"
#include "util/thread-annotations.h"

namespace boost::asio::ssl {
class context;
}

namespace qr {

class MaybeTlsStream;

/// A client of etcd's v3 HTTP/JSON gateway (POST /v3/...; etcd-json.h builds the bodies) for
/// one thread: one keep-alive HTTP/1.1 connection (Boost.Beast) to one of the endpoints at a
/// time, on an io_context of its own, so a slow or unreachable etcd blocks only the thread
/// that asked, never an I/O thread of the HTTP server. A failed request closes the connection
/// and moves on to the next endpoint. An endpoint given as https://host:port is reached over
/// TLS: its certificate must chain to the context's CAs and match 'host' (a failed
/// verification is that endpoint's failure, never a fall-back to plain HTTP).
/// Thread-safety: Call() and Stream() from one thread at a time; Cancel() and
/// ReplaceTlsContext() from any thread.
class EtcdClient {
 public:
  /// 'endpoints' are "[http[s]://]host:port" (at least one, ParseEtcdEndpoints()); 'timeout'
  /// bounds each Call() attempt and the connect, handshake and header of a Stream(); 'tls'
  /// (CreateClusterTlsContext()) is needed for https:// endpoints: without it they fail.
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout,
             std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~EtcdClient();

  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  /// POSTs 'body' to 'path' and returns the 200 answer's body in '*response'; tries each
  /// endpoint once (a kept-alive connection found closed is retried once on a fresh one).
  /// kUnavailable when none answered, kCancelled after Cancel().
  Status Call(std::string_view path, const std::string& body, std::string* response);

  /// POSTs 'body' to a streaming 'path' (/v3/watch) and calls 'on_message' with each
  /// newline-delimited message until the stream ends or fails (an error), 'on_message' fails
  /// (its error), or Cancel(). Messages may come at any pace: only the connect and the
  /// response header are bounded by the timeout.
  Status Stream(std::string_view path, const std::string& body,
                const std::function<Status(std::string_view)>& on_message);

  /// Makes the running request and every later one fail with kCancelled. Idempotent.
  void Cancel();

  /// Connections opened from now on use 'tls' (SIGHUP's reload of --etcd_ca_file and the
  /// client certificate); the open one keeps the context it was opened with. Thread-safe.
  void ReplaceTlsContext(std::shared_ptr<boost::asio::ssl::context> tls);

  /// The endpoint the connection is (or will next be) opened to.
  const std::string& endpoint() const { return endpoints_[current_]; }

 private:
  /// Connects to the current endpoint unless connected (with the TLS handshake for https://).
  Status Connect();
  /// Connects 'conn_' to 'host':'port' and shakes hands when it is TLS.
  Status ConnectTo(const std::string& host, const std::string& port);
  /// Writes one POST request on the connection.
  Status WriteRequest(std::string_view path, const std::string& body);
  void CloseConnection();
  /// Closes the connection and moves to the next endpoint.
  void Fail();
  /// Runs the io_context until the started operation's handler has run.
  void Run();
  Status Cancelled() const;

  const std::vector<std::string> endpoints_;
  const std::chrono::milliseconds timeout_;
  size_t current_ = 0;
  /// Replaced from another thread (ReplaceTlsContext()); read when a connection opens.
  mutable Mutex tls_mu_;
  std::shared_ptr<boost::asio::ssl::context> tls_ QR_GUARDED_BY(tls_mu_);
  std::atomic<bool> canceled_{false};
  boost::asio::io_context ioc_;
  /// The open connection (connected_), else null or closed.
  std::unique_ptr<MaybeTlsStream> conn_;
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
};

/// Splits "host:port,host:port" (IPv6 hosts in brackets; each may start with http:// or
/// https://, plain HTTP when it does not) into endpoints; an error naming the bad entry when
/// one has no host or no port in [1, 65535], or another scheme, or the list is empty.
Status ParseEtcdEndpoints(std::string_view list, std::vector<std::string>* out);

/// True when 'endpoint' (one of ParseEtcdEndpoints()') is reached over TLS.
bool IsTlsEtcdEndpoint(std::string_view endpoint);

}  // namespace qr
