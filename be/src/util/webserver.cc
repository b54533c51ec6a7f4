#include "util/webserver.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <glog/logging.h>

#include "util/http-message.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Strand = asio::strand<asio::io_context::executor_type>;
using StrandSocket = tcp::socket::rebind_executor<Strand>::other;

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";
// After a response that closes the connection, the server stops sending and reads (and
// discards) what the client still sends for at most this long / this many bytes before it
// closes: closing with unread input makes the kernel send a RST, which can destroy the
// response (e.g. a 413) before the client has read it.
constexpr std::chrono::milliseconds kMaxLinger{2000};
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr size_t kLingerReadBytes = 16 * 1024;
// Pause before accepting again after accept() failed (e.g. out of file descriptors), so the
// acceptor does not spin.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

// The peer went away or the connection was closed on purpose: not worth a warning.
bool IsDisconnect(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::not_connected || ec == asio::error::connection_aborted ||
         ec == asio::error::bad_descriptor || ec == beast::error::timeout;
}

// Beast 1.74's string_view is boost::string_view.
std::string_view ToStd(beast::string_view s) { return std::string_view(s.data(), s.size()); }

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

// Whether the request line in 'buffer' ends with a syntactically valid "HTTP/d.d" (which
// Beast rejects unless it is 1.0 or 1.1): then the answer is 505, not 400.
bool HasWellFormedVersion(const beast::flat_buffer& buffer) {
  std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
  std::string_view line = data.substr(0, data.find('\r'));
  if (line.size() < 9) return false;
  std::string_view v = line.substr(line.size() - 9);
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return v.substr(0, 6) == " HTTP/" && digit(v[6]) && v[7] == '.' && digit(v[8]);
}

std::string EndpointString(const tcp::endpoint& ep) {
  std::string address = ep.address().to_string();
  if (ep.address().is_v6()) address = "[" + address + "]";
  return address + ":" + std::to_string(ep.port());
}

Status ValidateOptions(const Webserver::Options& o) {
  if (o.port < 0 || o.port > 65535) {
    return InvalidArgument("HTTP port " + std::to_string(o.port) +
                           " is out of range: expected 0 (any free port) to 65535");
  }
  if (o.num_threads < 1) {
    return InvalidArgument("the number of HTTP threads must be at least 1, got " +
                           std::to_string(o.num_threads));
  }
  if (o.max_header_bytes < 256 || o.max_header_bytes > (1u << 30)) {
    return InvalidArgument("max_header_bytes must be between 256 and 2^30, got " +
                           std::to_string(o.max_header_bytes));
  }
  if (o.idle_timeout.count() <= 0 || o.max_connections < 1) {
    return InvalidArgument("idle_timeout and max_connections must be positive");
  }
  return Status::OK();
}

// Resolves the bind address: a numeric IPv4/IPv6 address, or a host name such as "localhost"
// (start-up only, so a blocking lookup is fine).
Status ResolveBindAddress(const Webserver::Options& o, tcp::endpoint* out) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(o.bind_address, ec);
  if (!ec) {
    *out = tcp::endpoint(address, static_cast<uint16_t>(o.port));
    return Status::OK();
  }
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(o.bind_address, std::to_string(o.port),
                                  tcp::resolver::numeric_service | tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return InvalidArgument("bad HTTP bind address " + QuoteForError(o.bind_address) + ": " +
                           (ec ? ec.message() : std::string("no address")) +
                           "; expected an IP address (127.0.0.1, 0.0.0.0, ::) or a host name");
  }
  *out = results.begin()->endpoint();
  return Status::OK();
}

}  // namespace

/// The server's state. Lifecycle: RegisterHandler()* -> Start() -> Stop() -> destruction.
/// Thread-safety: the counters are atomics; 'routes' is written only before Start() and
/// read-only afterwards (starting the I/O threads orders the writes before every read); the
/// acceptor and its retry timer are used by Start()/Stop() and by the one accept chain
/// running on the I/O threads, never at the same time (Stop() joins the threads first).
/// Lock order: lifecycle_mu -> control->mu -> sessions_mu. None is held while a handler runs.
struct Webserver::Impl {
  class Session;
  struct PendingResponse;

  /// Shared by the server and every ResponseCallback; outlives the server, so that a callback
  /// fired after Stop() or after destruction finds 'stopped' and does nothing.
  struct Control {
    Mutex mu;
    /// Once true, no callback touches a session or posts to the io_context.
    bool stopped GUARDED_BY(mu) = false;
  };

  struct Route {
    std::string path;
    /// The path ends with '/': it also matches every path it prefixes.
    bool prefix = false;
    std::vector<std::pair<http::verb, HttpHandler>> handlers;
    /// The value of the Allow header for a 405 ("GET, HEAD, POST").
    std::string allow;

    /// The handler for 'method'; HEAD falls back to GET (*head_as_get set).
    const HttpHandler* Find(http::verb method, bool* head_as_get) const;
  };

  enum class State { kNew, kRunning, kStopped };

  explicit Impl(Options o) : options(std::move(o)), ioc(std::max(1, options.num_threads)) {}

  const Route* FindRoute(std::string_view path) const;
  /// Sorts the routes longest path first and computes their Allow headers.
  void FinishRoutes();
  void DoAccept();
  void OnAccept(const beast::error_code& ec, StrandSocket socket);
  void RunIoThread(int index);
  void CountResponse(unsigned status) {
    responses[status < responses.size() ? status : 0].fetch_add(1, std::memory_order_relaxed);
  }
  /// Closes every open connection. REQUIRES: the I/O threads are joined.
  void CloseAllSessions();

  const Options options;
  std::vector<Route> routes;

  // Statistics only, so relaxed: nothing is ordered by them.
  std::array<std::atomic<uint64_t>, 600> responses{};
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> connections_rejected{0};
  std::atomic<int> port{0};

  const std::shared_ptr<Control> control = std::make_shared<Control>();

  /// Serializes Start() and Stop() (which joins threads: never held by an I/O thread).
  Mutex lifecycle_mu ACQUIRED_BEFORE(sessions_mu);
  State state GUARDED_BY(lifecycle_mu) = State::kNew;

  /// Protects 'sessions', the registry of open connections Stop() closes.
  Mutex sessions_mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions GUARDED_BY(sessions_mu);

  // Declared after everything a Session's destructor touches: sessions owned by handlers
  // still queued in the io_context die when it is destroyed.
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work
      GUARDED_BY(lifecycle_mu);
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry_timer{ioc};
  std::vector<std::thread> threads GUARDED_BY(lifecycle_mu);
};

/// One connection: reads a request, dispatches it, writes the response, and repeats while the
/// connection is kept alive.
/// Thread-safety: every member is used only on the connection's strand, except Close() from
/// Stop() after the I/O threads are joined, and OnStrand()/executor() from any thread.
/// Ownership: shared; each pending asynchronous operation holds a reference, and while a
/// handler owns the request (no I/O is pending then) the session holds one to itself, dropped
/// when the response is written or the connection is closed. A ResponseCallback holds only a
/// weak reference, so a callback kept after Stop() never keeps a connection alive.
class Webserver::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  using Stream = beast::basic_stream<tcp, Strand>;

  Session(Impl* server, Stream::socket_type socket, std::string remote_address)
      : server_(server), strand_(socket.get_executor()), stream_(std::move(socket)) {
    req_.remote_address = std::move(remote_address);
  }
  ~Session();

  void Start() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->DoReadHeader(); });
  }
  bool OnStrand() const { return strand_.running_in_this_thread(); }
  const Strand& executor() const { return strand_; }

  /// Writes the response of the pending request number 'seq'; ignored when the connection
  /// is closed or has moved on. 'dropped': the handler never called its ResponseCallback.
  void Complete(uint64_t seq, HttpResponse resp, bool dropped);
  void Close();

 private:
  void DoReadHeader();
  void OnReadHeader(const beast::error_code& ec);
  void DoReadBody();
  void OnReadError(const beast::error_code& ec);
  void Dispatch();
  void CallHandler(const HttpHandler& handler);
  void SendErrorAndClose(unsigned status, std::string text);
  void WriteResponse(HttpResponse resp);
  void OnWrite(const beast::error_code& ec);
  void LingeringClose();
  void DoDrain();

  Impl* const server_;
  /// The socket's executor, kept apart so that other threads may read it (const).
  const Strand strand_;
  Stream stream_;
  /// The read buffer, reused for every request (it may hold the start of the next one).
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  /// The request being served; handlers get a reference valid during their call.
  HttpRequest req_;
  /// The serialized status line and headers of the response being written.
  std::string head_;
  /// The response being written: owns the buffers (and shared_body) until the write ends.
  HttpResponse resp_;
  std::chrono::steady_clock::time_point request_start_;
  /// Numbers the dispatched requests, so a late callback cannot answer a later request.
  uint64_t seq_ = 0;
  size_t lingered_bytes_ = 0;
  /// Set while 'pending_': keeps the session alive with no I/O outstanding.
  std::shared_ptr<Session> self_while_pending_;
  /// A handler owns the current request; reads and the idle timer are off meanwhile.
  bool pending_ = false;
  bool keep_alive_ = false;
  bool http10_ = false;
  bool head_request_ = false;
  bool closed_ = false;
};

/// The state shared by the copies of one ResponseCallback. Delivers the response exactly
/// once; if every copy is destroyed without a call, the client gets a 500.
struct Webserver::Impl::PendingResponse {
  PendingResponse(std::shared_ptr<Control> c, std::weak_ptr<Session> s, uint64_t n)
      : control(std::move(c)), session(std::move(s)), seq(n) {}
  ~PendingResponse() {
    if (!delivered.load(std::memory_order_acquire)) {
      Deliver(HttpResponse::Text(500, "Internal error: the request was dropped by its handler"),
              /*dropped=*/true);
    }
  }

  /// Returns false when a response was delivered before.
  bool Deliver(HttpResponse resp, bool dropped);

  const std::shared_ptr<Control> control;
  const std::weak_ptr<Session> session;
  const uint64_t seq;
  std::atomic<bool> delivered{false};
};

bool Webserver::Impl::PendingResponse::Deliver(HttpResponse resp, bool dropped) {
  if (delivered.exchange(true, std::memory_order_acq_rel)) return false;
  std::shared_ptr<Session> on_strand;
  {
    // Under control->mu, a session reference is taken and handed to the io_context only
    // while the server runs, so no session outlives the io_context's destruction in a
    // callback's hands.
    MutexLock l(&control->mu);
    if (control->stopped) return true;
    std::shared_ptr<Session> s = session.lock();
    if (s == nullptr) return true;  // The connection is gone.
    if (!s->OnStrand()) {
      Strand ex = s->executor();  // A copy: 's' is moved below.
      asio::post(ex, [s = std::move(s), n = seq, r = std::move(resp), dropped]() mutable {
        s->Complete(n, std::move(r), dropped);
      });
      return true;
    }
    on_strand = std::move(s);
  }
  // Called from the handler itself (the common synchronous case), or from other work on the
  // strand: answer without a round trip through the queue. An I/O thread is running, so the
  // server is not destroyed meanwhile.
  on_strand->Complete(seq, std::move(resp), dropped);
  return true;
}

Webserver::Impl::Session::~Session() {
  if (!closed_) server_->connections_open.fetch_sub(1, std::memory_order_relaxed);
  MutexLock l(&server_->sessions_mu);
  server_->sessions.erase(this);
}

void Webserver::Impl::Session::Close() {
  if (closed_) return;
  closed_ = true;
  // Dropped when this function returns (every caller holds another reference).
  std::shared_ptr<Session> self = std::move(self_while_pending_);
  stream_.close();  // Also cancels the timer; pending operations complete with an error.
  server_->connections_open.fetch_sub(1, std::memory_order_relaxed);
}

void Webserver::Impl::Session::DoReadHeader() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
  parser_->body_limit(server_->options.max_body_bytes);
  req_.method_string.clear();
  req_.target.clear();
  head_request_ = false;
  request_start_ = std::chrono::steady_clock::now();  // Error answers measure from here.
  stream_.expires_after(server_->options.idle_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnReadHeader(ec); });
}

void Webserver::Impl::Session::OnReadHeader(const beast::error_code& ec) {
  if (ec) return OnReadError(ec);
  request_start_ = std::chrono::steady_clock::now();
  const auto& msg = parser_->get();
  req_.method = msg.method();
  req_.method_string.assign(ToStd(msg.method_string()));
  // An answer to HEAD never has a body, whatever it is (404, 405, 400 included): a body would
  // be read as the start of the next response on a kept-alive connection.
  head_request_ = req_.method == http::verb::head;
  keep_alive_ = msg.keep_alive();
  http10_ = msg.version() == 10;
  if (!ParseRequestTarget(ToStd(msg.target()), &req_)) {
    req_.target.assign(ToStd(msg.target()));
    return SendErrorAndClose(
        400, "Bad request target " + QuoteForError(req_.target, 128) +
                 ": expected a path (/path?query) or an absolute URL (http://host/path)");
  }
  if (parser_->is_done()) return Dispatch();
  if (msg.version() >= 11 && beast::iequals(msg[http::field::expect], "100-continue")) {
    asio::async_write(stream_, asio::buffer(k100Continue),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->OnReadError(ec);
                        self->DoReadBody();
                      });
    return;
  }
  DoReadBody();
}

void Webserver::Impl::Session::DoReadBody() {
  stream_.expires_after(server_->options.idle_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->OnReadError(ec);
                     self->Dispatch();
                   });
}

void Webserver::Impl::Session::OnReadError(const beast::error_code& ec) {
  if (closed_) return;
  const Options& o = server_->options;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
    VLOG(2) << req_.remote_address << ": connection closed by the client";
  } else if (ec == beast::error::timeout) {
    VLOG(1) << req_.remote_address << ": closing an idle connection";
  } else if (ec == http::error::header_limit) {
    return SendErrorAndClose(431, "Request header fields too large: at most " +
                                      std::to_string(o.max_header_bytes) + " bytes are accepted");
  } else if (ec == http::error::body_limit) {
    return SendErrorAndClose(413, "Request body too large: at most " +
                                      std::to_string(o.max_body_bytes) + " bytes are accepted");
  } else if (ec == http::error::bad_version && HasWellFormedVersion(buffer_)) {
    return SendErrorAndClose(505, "HTTP version not supported: use HTTP/1.0 or HTTP/1.1");
  } else if (IsHttpParseError(ec)) {
    return SendErrorAndClose(400, "Malformed HTTP request: " + ec.message());
  } else if (!IsDisconnect(ec)) {
    LOG(WARNING) << "HTTP read from " << req_.remote_address << " failed: " << ec.message();
  }
  Close();
}

void Webserver::Impl::Session::Dispatch() {
  auto& msg = parser_->get();
  req_.headers = std::move(static_cast<http::fields&>(msg));
  req_.body = std::move(msg.body());
  const Route* route = server_->FindRoute(req_.path);
  if (route == nullptr) {
    return WriteResponse(HttpResponse::Text(404, "Not found: " + QuoteForError(req_.path, 200)));
  }
  bool head_as_get = false;
  const HttpHandler* handler = route->Find(req_.method, &head_as_get);
  if (handler == nullptr) {
    HttpResponse r = HttpResponse::Text(
        405, "Method " + QuoteForError(req_.method_string, 32) + " is not allowed for " +
                 QuoteForError(req_.path, 200) + "; allowed: " + route->allow);
    r.headers.emplace_back("Allow", route->allow);
    return WriteResponse(std::move(r));
  }
  CallHandler(*handler);
}

void Webserver::Impl::Session::CallHandler(const HttpHandler& handler) {
  pending_ = true;
  self_while_pending_ = shared_from_this();
  ++seq_;
  // The handler bounds its own wait (a long poll answers within its timeout).
  stream_.expires_never();
  auto pending = std::make_shared<PendingResponse>(server_->control, weak_from_this(), seq_);
  try {
    handler(req_, [pending](HttpResponse resp) {
      bool first = pending->Deliver(std::move(resp), /*dropped=*/false);
      DCHECK(first) << "a ResponseCallback was called twice; the second call is ignored";
    });
  } catch (const std::exception& e) {
    LOG(WARNING) << "HTTP handler for " << QuoteForError(req_.path, 200)
                 << " threw: " << e.what();
    pending->Deliver(HttpResponse::Text(500, "Internal error"), /*dropped=*/false);
  }
}

void Webserver::Impl::Session::Complete(uint64_t seq, HttpResponse resp, bool dropped) {
  if (closed_ || !pending_ || seq != seq_) return;
  if (dropped) {
    LOG(WARNING) << "the handler of " << req_.method_string << " "
                 << QuoteForError(req_.target, 200) << " never responded; answering 500";
  }
  pending_ = false;
  // The write below holds the session from now on.
  std::shared_ptr<Session> self = std::move(self_while_pending_);
  WriteResponse(std::move(resp));
}

void Webserver::Impl::Session::SendErrorAndClose(unsigned status, std::string text) {
  keep_alive_ = false;
  WriteResponse(HttpResponse::Text(status, std::move(text)));
}

void Webserver::Impl::Session::WriteResponse(HttpResponse resp) {
  unsigned status = resp.status;
  if (status < 200 || status > 599) {
    LOG(WARNING) << "HTTP handler answered status " << status << " to "
                 << QuoteForError(req_.target, 200) << "; sending 500";
    resp = HttpResponse::Text(500, "Internal error: bad response status");
    status = 500;
  }
  const bool no_body = StatusHasNoBody(status);
  const uint64_t length = resp.body.size() + (resp.shared_body ? resp.shared_body->size() : 0) +
                          resp.body_tail.size();
  head_.clear();
  AppendResponseHead(status, resp, no_body ? std::nullopt : std::optional<uint64_t>(length),
                     keep_alive_, http10_, &head_);
  resp_ = std::move(resp);  // Only now take the body addresses: moving a string moves them.
  server_->CountResponse(status);
  VLOG(1) << req_.remote_address << " " << req_.method_string << " "
          << QuoteForError(req_.target, 200) << " -> " << status << ", " << length << " bytes, "
          << std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::steady_clock::now() - request_start_)
                 .count()
          << " us";
  std::array<asio::const_buffer, 4> buffers{asio::buffer(head_)};
  if (!no_body && !head_request_) {
    buffers[1] = asio::buffer(resp_.body);
    if (resp_.shared_body) buffers[2] = asio::buffer(*resp_.shared_body);
    buffers[3] = asio::buffer(resp_.body_tail);
  }
  // A client that does not read its response is dropped like an idle one.
  stream_.expires_after(server_->options.idle_timeout);
  asio::async_write(stream_, buffers, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnWrite(ec);
  });
}

void Webserver::Impl::Session::OnWrite(const beast::error_code& ec) {
  resp_ = HttpResponse();  // Releases the shared body as soon as it is sent.
  if (closed_) return;
  if (ec) {
    if (!IsDisconnect(ec)) {
      LOG(WARNING) << "HTTP write to " << req_.remote_address << " failed: " << ec.message();
    }
    return Close();
  }
  if (!keep_alive_) return LingeringClose();
  DoReadHeader();
}

void Webserver::Impl::Session::LingeringClose() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  stream_.expires_after(std::min<std::chrono::milliseconds>(server_->options.idle_timeout,
                                                            kMaxLinger));
  buffer_.consume(buffer_.size());
  lingered_bytes_ = 0;
  DoDrain();
}

void Webserver::Impl::Session::DoDrain() {
  stream_.async_read_some(buffer_.prepare(kLingerReadBytes),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->lingered_bytes_ += n;
                            if (ec || self->lingered_bytes_ > kMaxLingerBytes) {
                              return self->Close();
                            }
                            self->DoDrain();
                          });
}

const HttpHandler* Webserver::Impl::Route::Find(http::verb method, bool* head_as_get) const {
  *head_as_get = false;
  if (method == http::verb::unknown) return nullptr;
  for (const auto& [verb, handler] : handlers) {
    if (verb == method) return &handler;
  }
  if (method != http::verb::head) return nullptr;
  for (const auto& [verb, handler] : handlers) {
    if (verb == http::verb::get) {
      *head_as_get = true;
      return &handler;
    }
  }
  return nullptr;
}

const Webserver::Impl::Route* Webserver::Impl::FindRoute(std::string_view path) const {
  for (const Route& r : routes) {  // Longest path first.
    if (r.prefix ? path.starts_with(r.path) : path == r.path) return &r;
  }
  return nullptr;
}

void Webserver::Impl::FinishRoutes() {
  std::stable_sort(routes.begin(), routes.end(), [](const Route& a, const Route& b) {
    return a.path.size() > b.path.size();
  });
  for (Route& r : routes) {
    r.allow.clear();
    bool has_head = false;
    for (const auto& entry : r.handlers) has_head |= entry.first == http::verb::head;
    for (const auto& entry : r.handlers) {
      if (!r.allow.empty()) r.allow += ", ";
      r.allow += ToStd(http::to_string(entry.first));
      if (entry.first == http::verb::get && !has_head) r.allow += ", HEAD";
    }
  }
}

void Webserver::Impl::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, StrandSocket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void Webserver::Impl::OnAccept(const beast::error_code& ec, StrandSocket socket) {
  if (ec == asio::error::operation_aborted) return;
  if (ec) {
    LOG(WARNING) << "HTTP accept failed: " << ec.message() << "; retrying";
    accept_retry_timer.expires_after(kAcceptRetryDelay);
    accept_retry_timer.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) DoAccept();
    });
    return;
  }
  beast::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);
  tcp::endpoint remote = socket.remote_endpoint(opt_ec);
  if (opt_ec) {  // Reset before we looked at it.
    socket.close(opt_ec);
    return DoAccept();
  }
  if (connections_open.load(std::memory_order_relaxed) >=
      static_cast<uint64_t>(options.max_connections)) {
    uint64_t n = connections_rejected.fetch_add(1, std::memory_order_relaxed) + 1;
    if ((n & (n - 1)) == 0) {  // Log the 1st, 2nd, 4th, 8th... rejection: no log flood.
      LOG(WARNING) << "HTTP connection limit (" << options.max_connections << ") reached; "
                   << n << " connections rejected so far";
    }
    socket.close(opt_ec);
    return DoAccept();
  }
  connections_accepted.fetch_add(1, std::memory_order_relaxed);
  connections_open.fetch_add(1, std::memory_order_relaxed);
  auto session = std::make_shared<Session>(this, std::move(socket), EndpointString(remote));
  {
    MutexLock l(&sessions_mu);
    sessions.emplace(session.get(), session);
  }
  session->Start();
  DoAccept();
}

void Webserver::Impl::RunIoThread(int index) {
  char name[16];
  snprintf(name, sizeof(name), "http-io-%d", index);
  pthread_setname_np(pthread_self(), name);
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      LOG(ERROR) << "exception escaped an HTTP I/O handler: " << e.what();
    }
  }
}

void Webserver::Impl::CloseAllSessions() {
  std::vector<std::shared_ptr<Session>> live;
  {
    MutexLock l(&sessions_mu);
    for (auto& entry : sessions) {
      if (auto s = entry.second.lock()) live.push_back(std::move(s));
    }
  }
  // Outside the lock: releasing the last reference runs ~Session, which takes it.
  for (auto& s : live) s->Close();
}

Webserver::Webserver(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Webserver::~Webserver() { Stop(); }

void Webserver::RegisterHandler(http::verb method, std::string path, HttpHandler handler) {
  DCHECK(!path.empty() && path[0] == '/') << "a route must start with '/': " << path;
  {
    MutexLock l(&impl_->lifecycle_mu);
    DCHECK(impl_->state == Impl::State::kNew) << "RegisterHandler() after Start()";
  }
  auto& routes = impl_->routes;
  auto it = std::find_if(routes.begin(), routes.end(),
                         [&](const Impl::Route& r) { return r.path == path; });
  if (it == routes.end()) {
    Impl::Route route;
    route.prefix = path.back() == '/';
    route.path = std::move(path);
    routes.push_back(std::move(route));
    it = routes.end() - 1;
  }
  for (auto& entry : it->handlers) {
    if (entry.first == method) {
      entry.second = std::move(handler);
      return;
    }
  }
  it->handlers.emplace_back(method, std::move(handler));
}

Status Webserver::Start() {
  Impl& s = *impl_;
  MutexLock l(&s.lifecycle_mu);
  if (s.state != Impl::State::kNew) {
    return AlreadyExists("the webserver was already started (it cannot be restarted)");
  }
  RETURN_IF_ERROR(ValidateOptions(s.options));
  tcp::endpoint endpoint;
  RETURN_IF_ERROR(ResolveBindAddress(s.options, &endpoint));
  beast::error_code ec;
  const char* step = "open";
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) {
    step = "bind";
    s.acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    step = "listen";
    s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return Status(StatusCode::kUnavailable, std::string("cannot ") + step + " HTTP address " +
                                                EndpointString(endpoint) + ": " + ec.message());
  }
  s.port.store(s.acceptor.local_endpoint().port(), std::memory_order_release);
  s.FinishRoutes();
  s.work.emplace(s.ioc.get_executor());
  s.DoAccept();
  s.state = Impl::State::kRunning;
  for (int i = 0; i < s.options.num_threads; ++i) {
    s.threads.emplace_back([&s, i] { s.RunIoThread(i); });
  }
  LOG(INFO) << "HTTP server listening on "
            << EndpointString(tcp::endpoint(endpoint.address(), s.port.load())) << " with "
            << s.options.num_threads << " I/O threads";
  return Status::OK();
}

void Webserver::Stop() {
  Impl& s = *impl_;
  DCHECK(!s.ioc.get_executor().running_in_this_thread())
      << "Webserver::Stop() called from an HTTP I/O thread (it joins them)";
  MutexLock l(&s.lifecycle_mu);
  {
    MutexLock c(&s.control->mu);
    s.control->stopped = true;
  }
  if (s.state != Impl::State::kRunning) {
    s.state = Impl::State::kStopped;
    return;
  }
  s.state = Impl::State::kStopped;
  s.work.reset();
  s.ioc.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  // No I/O thread runs any more: this thread may use the acceptor and the sockets.
  beast::error_code ec;
  s.acceptor.close(ec);
  s.accept_retry_timer.cancel();
  s.CloseAllSessions();
  LOG(INFO) << "HTTP server on port " << s.port.load() << " stopped";
}

int Webserver::port() const { return impl_->port.load(std::memory_order_acquire); }

asio::io_context& Webserver::io_context() { return impl_->ioc; }

uint64_t Webserver::responses_with_status(unsigned status) const {
  if (status < 100 || status >= impl_->responses.size()) return 0;
  return impl_->responses[status].load(std::memory_order_relaxed);
}

uint64_t Webserver::connections_accepted() const {
  return impl_->connections_accepted.load(std::memory_order_relaxed);
}

uint64_t Webserver::connections_open() const {
  return impl_->connections_open.load(std::memory_order_relaxed);
}

}  // namespace qr
