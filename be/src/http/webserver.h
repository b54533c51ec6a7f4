#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include "http/client-address.h"
#include "util/status.h"

namespace boost::asio::ssl {
class context;
}

namespace qr {

/// One parsed HTTP request, as a handler sees it.
struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  /// The method as sent (for 405 messages), e.g. "DELETE".
  std::string method_string;
  /// The target in origin form: an absolute-form target ("http://host:port/p?q") is reduced
  /// to "/p?q" here, its authority kept in 'absolute_authority'.
  std::string target;
  /// 'target' without the query string, percent-decoded (PercentDecodePath()) by the server
  /// before routing: "/v1/query/a%3Ab" is routed and handled as "/v1/query/a:b". An encoded
  /// '/' (%2F) or NUL, or a malformed escape, is answered 400 before routing.
  std::string path;
  /// The raw query string after '?', or empty.
  std::string query;
  std::string absolute_authority;
  boost::beast::http::fields headers;
  /// The body, already de-chunked.
  std::string body;
  /// "127.0.0.1:54321".
  std::string remote_address;
  /// Set by Options::authenticate for an authenticated request; empty otherwise.
  std::string authenticated_user;
  /// The request arrived over TLS.
  bool secure = false;

  /// A header's value, or empty. Case-insensitive name.
  std::string_view Header(std::string_view name) const;
  /// The value of query parameter 'name' (percent-decoded, '+' as space), or nullopt-like empty
  /// with 'present' false.
  std::string QueryParam(std::string_view name, bool* present = nullptr) const;
};

/// The body of a streamed response (HttpResponse::body_source), produced incrementally: the
/// server asks for the next chunk only after the previous one was written, so a slow client
/// holds back the source (back-pressure), and what is buffered is one chunk.
/// Thread-safety: Pull() and Cancel() are called on the I/O thread of the connection (Cancel()
/// also from Webserver::Stop() once the I/O threads are joined). The PullCallback is best
/// called on that thread (during Pull() is allowed): from another thread the chunk is posted
/// to it.
class BodySource {
 public:
  /// What one Pull() delivers.
  struct Chunk {
    /// Bytes of the body, valid until the next Pull() or Cancel() (or the source's end).
    /// Not empty unless 'last' or 'failed'.
    std::string_view data;
    /// The end of the body ('data', if any, is its last part). Nothing is pulled afterwards.
    bool last = false;
    /// The body cannot be completed: the server closes the connection at once (with a reset),
    /// so the client sees a truncated answer, never a complete-looking one. 'data' is ignored.
    bool failed = false;
  };
  using PullCallback = std::function<void(Chunk)>;

  virtual ~BodySource() = default;
  /// Asks for the next chunk: call 'done' exactly once (unless Cancel() comes first). At most
  /// one Pull() is outstanding.
  virtual void Pull(PullCallback done) = 0;
  /// The body will not be pulled to its end: the client went away, a write failed, the server
  /// stopped, or the answer has no body (HEAD, 204, 304). An outstanding PullCallback is to be
  /// dropped uncalled. Not called after a chunk with 'last' or 'failed'; a source dropped
  /// without Cancel() (the response was never written) is cancelled as well.
  virtual void Cancel() = 0;
};

/// A response. 'body' is sent as is; when 'shared_body' is set the response body is
/// body + *shared_body + body_tail, written with one gathered write and without copying the
/// shared buffer (used to send a cached result page). When 'body_source' is set, the body is
/// streamed from it instead ('body', 'shared_body' and 'body_tail' must be empty): with
/// Content-Length when 'body_length' is known (a source that delivers another count fails the
/// response), else chunked (close-delimited for an HTTP/1.0 client, and the connection is
/// closed after it). The head and the first chunk go out in one write.
struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::shared_ptr<const std::string> shared_body;
  std::string body_tail;
  std::shared_ptr<BodySource> body_source;
  /// The streamed body's length, when known in advance.
  std::optional<uint64_t> body_length;

  static HttpResponse Text(unsigned status, std::string text);
  static HttpResponse Json(unsigned status, std::string json);
};

/// Completes a request. Call exactly once, from any thread, at any later time (a long-poll
/// handler stores it and calls it when data arrives or its timer fires). Calling it after the
/// client went away or the server stopped is harmless.
using ResponseCallback = std::function<void(HttpResponse)>;
/// Runs on an I/O thread. 'req' is valid only during the call: move out what a deferred
/// response needs. A handler that lets every copy of 'respond' die uncalled answers 500.
using HttpHandler = std::function<void(HttpRequest& req, ResponseCallback respond)>;

/// What Webserver::Options::authenticate decided about a request.
enum class AuthVerdict {
  /// Serve it (req.authenticated_user is set).
  kAllow,
  /// Answer it with '*denied'.
  kDeny,
  /// Decided later, through the AuthCallback the hook took from its 'defer' argument.
  kDeferred,
};
/// Completes a deferred authentication. Call exactly once, from any thread: 'ok' with the
/// authenticated 'user', or not with the answer in 'denied'. Calling it after the client went
/// away or the server stopped is harmless; letting it die uncalled leaves the connection
/// waiting until the server stops.
using AuthCallback = std::function<void(bool ok, std::string user, HttpResponse denied)>;
/// Given to the authenticate hook; call it (at most once, during the hook) to defer the
/// decision: the connection then reads nothing more until the AuthCallback is called.
using AuthDeferrer = std::function<AuthCallback()>;

/// An asynchronous HTTP/1.1 server (Boost.Beast over Asio) with a fixed pool of I/O threads.
/// Each I/O thread runs an io_context of its own and serves the connections handed to it
/// (round robin at accept), so a connection needs no strand and no I/O thread wakes another.
///
/// Keep-alive; limits on header size (431), body size (413) and idle connections (closed after
/// 'idle_timeout'); malformed requests get 400 and the connection is closed, and so do requests
/// whose framing is ambiguous (CheckRequestHead() in http-framing.h: Transfer-Encoding other
/// than exactly chunked is 501, with Content-Length or in HTTP/1.0 400, Host missing in
/// HTTP/1.1 or repeated 400, folded lines 400; trailer fields are dropped); paths are
/// percent-decoded before routing; unknown paths 404;
/// a known path with the wrong method 405 with an Allow header. Handlers run on an I/O thread
/// and must not block: slow work is handed off and completed through the ResponseCallback, so no
/// thread is parked per waiting request. Every response carries Content-Length (or is chunked
/// if needed), "Server", and "Connection: close" when the server closes.
///
/// Connections beyond 'max_connections', or beyond 'max_connections_per_address' from one
/// address, get a minimal 503 and are closed at accept (counted, logged at most every 10 s).
/// Out of file descriptors (EMFILE, ENFILE), the acceptor frees a spare descriptor it keeps
/// from Start(), accepts the waiting connection, answers it the same 503, closes it and takes
/// the spare back: clients (and health checks) get an answer instead of hanging in the listen
/// backlog, and the acceptor neither spins nor logs more than once per 10 s. Without the spare
/// (taken meanwhile) it retries after a delay that doubles up to 1 s.
/// Thread-safety: Register*() before Start(); everything else is thread-safe.
class Webserver {
 public:
  struct Options {
    std::string bind_address = "127.0.0.1";
    /// 0 picks a free port (see port()).
    int port = 8080;
    int num_threads = 2;
    size_t max_header_bytes = 16 * 1024;
    size_t max_body_bytes = 1 << 20;
    std::chrono::milliseconds idle_timeout{60000};
    /// Maximum simultaneous connections; beyond it a new connection gets a minimal 503 (plain
    /// HTTP only) and is closed at once.
    int max_connections = 10000;
    /// Maximum simultaneous connections from one client address, keyed by AddressKey() (all of
    /// loopback as one, IPv6 by /64); beyond it likewise. 0: no limit.
    int max_connections_per_address = 0;
    /// Peers that 'max_connections_per_address' does not apply to (trusted proxies, which
    /// carry the connections of many clients).
    IpNetworks per_address_exempt;
    /// When set, runs for every request except those to 'open_paths', once its head is read
    /// and before its body is (req.body is empty: a refused request costs no body read, and
    /// its answer closes the connection), on an I/O thread, and must not block: returns
    /// kAllow (having set req.authenticated_user), kDeny with the answer (401, 429, 503...)
    /// in '*denied', or kDeferred after calling 'defer' and handing the callback to slow work
    /// (a password check on another thread); the request resumes on its connection's I/O
    /// thread when the callback is called (a client that sent "Expect: 100-continue" gets its
    /// 100 only then).
    std::function<AuthVerdict(HttpRequest& req, HttpResponse* denied, const AuthDeferrer& defer)>
        authenticate;
    /// When set, runs after 'authenticate' allowed a request, on an I/O thread, before its
    /// body is read: returns true to serve it, or false with the answer (e.g. 403) in
    /// '*denied'.
    std::function<bool(HttpRequest& req, HttpResponse* denied)> authorize;
    /// Exact paths served without 'authenticate' (e.g. "/healthz").
    std::vector<std::string> open_paths;
    /// When set, a request whose Host is not allowed by IsAllowedHost() (http-origin.h) gets
    /// a 403 before anything else (a DNS rebinding defence); unset: any Host.
    std::optional<std::vector<std::string>> allowed_hosts;
    /// When set, every connection speaks TLS (HTTPS) with this context (see
    /// CreateTlsServerContext()); plain HTTP otherwise.
    std::shared_ptr<boost::asio::ssl::context> tls_context;
    /// When set, each I/O thread calls it once when it starts (before serving anything);
    /// the daemon asks for a short scheduler slice there (runtime/thread-schedule.h).
    std::function<void()> on_io_thread_start;
  };

  explicit Webserver(Options options);
  ~Webserver();  // Stop()s.

  /// Routes requests whose path equals 'path' (or, when 'path' ends with '/', starts with it)
  /// and whose method is 'method'. The longest matching path wins.
  void RegisterHandler(boost::beast::http::verb method, std::string path, HttpHandler handler);
  /// HEAD on the route 'path' (as registered) is answered 405, with an Allow header without
  /// HEAD, instead of running its GET handler without sending the body: for GET handlers with
  /// side effects (the statement protocol's nextUri consumes a page).
  void DisallowHead(std::string path);

  /// Binds, listens and starts the I/O threads. An address in use or a bad bind address is an
  /// error naming it.
  Status Start();
  /// Stops accepting, closes connections, joins the I/O threads. Idempotent. A response
  /// being written is cut off: Drain() first to let it go out.
  void Stop();
  /// The start of a graceful stop: stops accepting (the listening socket is closed), closes
  /// the connections that wait for a request of which nothing arrived, and lets every other
  /// connection finish its request, whose response then says "Connection: close"; returns
  /// when no connection is open (true) or after 'timeout' (false). Handlers keep running
  /// meanwhile. Then call Stop(), which closes what is left. Not from an I/O thread; true at
  /// once when the server is not running.
  bool Drain(std::chrono::milliseconds timeout);

  /// Serves every connection accepted from now on with 'context' (a certificate renewed on
  /// SIGHUP); a connection keeps the context it started with until it closes. Thread-safe,
  /// from any thread, while running or not. NotSupported for a server started without
  /// Options::tls_context (plain HTTP stays plain).
  Status ReplaceTlsContext(std::shared_ptr<boost::asio::ssl::context> context);

  /// The bound port (after Start()).
  int port() const;
  /// For timers and posting work: called from a handler, the io_context of the I/O thread
  /// running it (the connection's own, so a timer's handler runs on that thread with no
  /// hand-off); from any other thread, the first I/O thread's.
  boost::asio::io_context& io_context();

  /// Responses sent, by status code (index = status code, 100..599), for /metrics.
  uint64_t responses_with_status(unsigned status) const;
  uint64_t connections_accepted() const;
  uint64_t connections_open() const;
  /// Why a connection was refused at accept.
  enum class ConnectionLimit {
    kMaxConnections,  // Options::max_connections.
    kPerAddress,  // Options::max_connections_per_address.
    kFileDescriptors,  // The process is out of file descriptors (EMFILE, ENFILE).
  };
  static constexpr int kNumConnectionLimits = 3;
  /// Connections refused because of 'limit' so far.
  uint64_t connections_refused(ConnectionLimit limit) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qr
