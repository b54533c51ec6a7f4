// The connections of the webserver: Session<Stream>, one class for plain HTTP and HTTPS
// (templated on the stream; only the TLS handshake and the close differ), and the
// ResponseCallback plumbing.

#include <algorithm>
#include <array>
#include <chrono>
#include <type_traits>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <glog/logging.h>

#include "http/http-framing.h"
#include "http/http-origin.h"
#include "http/http-message.h"
#include "http/webserver-internal.h"

namespace qr {
namespace {

using PlainStream = beast::basic_stream<tcp, IoExecutor>;
using TlsStream = beast::ssl_stream<PlainStream>;

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";
// After a response that closes the connection, the server stops sending and reads (and
// discards) what the client still sends for at most this long / this many bytes before it
// closes: closing with unread input makes the kernel send a RST, which can destroy the
// response (e.g. a 413) before the client has read it.
constexpr std::chrono::milliseconds kMaxLinger{2000};
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr size_t kLingerReadBytes = 16 * 1024;
// The peer went away or the connection was closed on purpose: not worth a warning.
bool IsDisconnect(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::not_connected || ec == asio::error::connection_aborted ||
         ec == asio::error::bad_descriptor || ec == beast::error::timeout ||
         // A TLS peer that closes without close_notify: any client can do it, and HTTP's own
         // framing already tells a complete request from a cut one. Not worth a WARNING.
         ec == asio::ssl::error::stream_truncated;
}

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

// Refuses (400) chunk extensions with whitespace: see IsStrictChunkExtension().
struct ChunkExtensionCheck {
  void operator()(uint64_t, beast::string_view ext, beast::error_code& ec) {
    if (!IsStrictChunkExtension(ToStd(ext))) ec = http::error::bad_chunk_extension;
  }
};

}  // namespace

/// One connection over 'Stream' (PlainStream or TlsStream): reads a request, dispatches it,
/// writes the response, and repeats while the connection is kept alive.
/// Thread-safety: every member is used only on the connection's I/O thread, except Close() from
/// Stop() after the I/O threads are joined, and OnIoThread()/executor() from any thread.
/// Ownership: shared; each pending asynchronous operation holds a reference, and while a
/// handler owns the request (no I/O is pending then) the session holds one to itself, dropped
/// when the response is written or the connection is closed. A ResponseCallback holds only a
/// weak reference, so a callback kept after Stop() never keeps a connection alive.
template <class Stream>
class Webserver::Impl::Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, PlainStream>;

  /// 'tls' (only for TLS) is the server's context.
  template <class... Tls>
  Session(Impl* server, IoSocket socket, std::string remote_address, Tls&... tls)
      : SessionBase(socket.get_executor()), server_(server), stream_(std::move(socket), tls...) {
    req_.remote_address = std::move(remote_address);
    req_.secure = kTls;
  }
  ~Session() override;

  void Start() override;
  void Complete(uint64_t seq, HttpResponse resp, bool dropped) override;
  void Close() override;

 private:
  std::shared_ptr<Session> Self() {
    return std::static_pointer_cast<Session>(shared_from_this());
  }
  /// The TCP layer: timeouts, close.
  PlainStream& Tcp() { return beast::get_lowest_layer(stream_); }
  void OnHandshake(const beast::error_code& ec);
  void DoReadHeader();
  void OnReadHeader(const beast::error_code& ec);
  void DoReadBody();
  void OnReadError(const beast::error_code& ec);
  void Dispatch();
  /// Runs Options::authenticate; false when it answered the request or deferred it.
  /// QR_REQUIRES: the request needs authentication (Options::authenticate set, not an open path).
  bool Authenticate();
  /// Runs Options::authorize (if set) on an authenticated request; false when it answered.
  bool Authorize();
  /// Parks the request for a deferred authentication: the AuthDeferrer's answer.
  AuthCallback DeferAuthentication();
  /// Resumes request 'seq' when its deferred authentication is decided.
  void OnAuthenticated(uint64_t seq, bool ok, std::string user, HttpResponse denied);
  /// Routes the request to its handler (or answers 404, 405).
  void RouteRequest();
  void CallHandler(const HttpHandler& handler);
  void SendErrorAndClose(unsigned status, std::string text);
  void WriteResponse(HttpResponse resp);
  void OnWrite(const beast::error_code& ec);
  /// Writes the head of a response with a BodySource, then its chunks as they come: the head
  /// goes with the first chunk, and each next chunk is pulled once the previous was written.
  void WriteStreamedResponse(unsigned status, HttpResponse resp);
  void PullChunk();
  void OnChunk(BodySource::Chunk chunk);
  void OnChunkWritten(const beast::error_code& ec, bool last);
  /// The streamed body cannot be completed: resets the connection, so the client never
  /// takes a truncated body for a whole one.
  void AbortStream(const char* why);
  /// Stops sending (after TLS's close_notify) and drains what the client still sends for a
  /// bounded time before closing, so that the close does not reset the connection.
  void LingeringClose();
  void LingerTcp();
  void DoDrain();

  Impl* const server_;
  Stream stream_;
  /// The read buffer, reused for every request (it may hold the start of the next one).
  FramingReadBuffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  /// The parser's chunk-header callback (it keeps a reference).
  ChunkExtensionCheck chunk_check_;
  /// The request being served; handlers get a reference valid during their call.
  HttpRequest req_;
  /// The serialized status line and headers of the response being written.
  std::string head_;
  /// The response being written: owns the buffers (and shared_body) until the write ends.
  HttpResponse resp_;
  /// A streamed response's source, until it delivered its last chunk or failed.
  std::shared_ptr<BodySource> source_;
  /// The source that delivered its last chunk, kept until that chunk was written: the chunk's
  /// bytes are the source's, and it may hold the last reference (never cancelled).
  std::shared_ptr<BodySource> finished_source_;
  /// A streamed body's framing, and the bytes its Content-Length still expects.
  StreamedBody stream_framing_ = StreamedBody::kNo;
  uint64_t stream_left_ = 0;
  /// The head is still to go out (with the first chunk).
  bool stream_head_pending_ = false;
  /// A chunk's framing (chunked transfer coding).
  std::string chunk_prefix_;
  std::string chunk_suffix_;
  std::chrono::steady_clock::time_point request_start_;
  /// Numbers the dispatched requests, so a late callback cannot answer a later request.
  uint64_t seq_ = 0;
  size_t lingered_bytes_ = 0;
  /// Set while 'pending_': keeps the session alive with no I/O outstanding.
  std::shared_ptr<SessionBase> self_while_pending_;
  /// A handler owns the current request; reads and the idle timer are off meanwhile.
  bool pending_ = false;
  bool keep_alive_ = false;
  bool http10_ = false;
  bool head_request_ = false;
  bool closed_ = false;
};

template <class Stream>
void Webserver::Impl::Session<Stream>::Start() {
  asio::dispatch(executor_, [self = Self()] {
    if constexpr (kTls) {
      self->Tcp().expires_after(self->server_->options.idle_timeout);
      self->stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self](const beast::error_code& ec) { self->OnHandshake(ec); });
    } else {
      self->DoReadHeader();
    }
  });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnHandshake(const beast::error_code& ec) {
  if (ec) {
    // Scanners and plain-HTTP clients end here: not worth more than a verbose line.
    if (!closed_) VLOG(1) << req_.remote_address << ": TLS handshake failed: " << ec.message();
    return Close();
  }
  DoReadHeader();
}

template <class Stream>
Webserver::Impl::Session<Stream>::~Session() {
  ReleaseAddressSlot();
  if (!closed_) server_->connections_open.fetch_sub(1, std::memory_order_relaxed);
  MutexLock l(&server_->sessions_mu);
  server_->sessions.erase(static_cast<SessionBase*>(this));
}

template <class Stream>
void Webserver::Impl::Session<Stream>::Close() {
  if (closed_) return;
  closed_ = true;
  // Dropped when this function returns (every caller holds another reference).
  std::shared_ptr<SessionBase> self = std::move(self_while_pending_);
  Tcp().close();  // Also cancels the timer; pending operations complete with an error.
  if (source_ != nullptr) std::exchange(source_, nullptr)->Cancel();  // The client is gone.
  ReleaseAddressSlot();
  server_->connections_open.fetch_sub(1, std::memory_order_relaxed);
}

template <class Stream>
void Webserver::Impl::Session<Stream>::DoReadHeader() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
  parser_->body_limit(server_->options.max_body_bytes);
  parser_->on_chunk_header(chunk_check_);
  buffer_.BeginHeader();
  req_.method_string.clear();
  req_.target.clear();
  req_.authenticated_user.clear();
  head_request_ = false;
  request_start_ = std::chrono::steady_clock::now();  // Error answers measure from here.
  Tcp().expires_after(server_->options.idle_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = Self()](beast::error_code ec, size_t) { self->OnReadHeader(ec); });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnReadHeader(const beast::error_code& ec) {
  const bool folded = buffer_.EndHeader();
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
  if (FramingError error; !CheckRequestHead(msg, folded, &req_, &error)) {
    return SendErrorAndClose(error.status, std::move(error.message));
  }
  const bool expect_continue =
      msg.version() >= 11 && beast::iequals(msg[http::field::expect], "100-continue");
  // The header fields are taken now: the trailer fields of a chunked body, which Beast adds
  // to the message, are dropped and never become headers (RFC 9112 7.1.2).
  req_.headers = std::move(static_cast<http::fields&>(parser_->get()));
  if (parser_->is_done()) return Dispatch();
  if (expect_continue) {
    asio::async_write(stream_, asio::buffer(k100Continue),
                      [self = Self()](beast::error_code ec, size_t) {
                        if (ec) return self->OnReadError(ec);
                        self->DoReadBody();
                      });
    return;
  }
  DoReadBody();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::DoReadBody() {
  Tcp().expires_after(server_->options.idle_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = Self()](beast::error_code ec, size_t) {
                     if (ec) return self->OnReadError(ec);
                     self->Dispatch();
                   });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnReadError(const beast::error_code& ec) {
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
  } else if (ec == http::error::bad_version && HasWellFormedVersion(buffer_.View())) {
    return SendErrorAndClose(505, "HTTP version not supported: use HTTP/1.0 or HTTP/1.1");
  } else if (ec == http::error::bad_chunk_extension) {
    return SendErrorAndClose(400, "Malformed chunk extension: expected ';name' or "
                                  "';name=value' (a token or a quoted string), no whitespace");
  } else if (IsHttpParseError(ec)) {
    return SendErrorAndClose(400, "Malformed HTTP request: " + ec.message());
  } else if (!IsDisconnect(ec)) {
    LOG(WARNING) << "HTTP read from " << req_.remote_address << " failed: " << ec.message();
  }
  Close();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::Dispatch() {
  req_.body = std::move(parser_->get().body());
  // Before authentication: a forged request costs no password verification.
  std::string forged;
  if (IsCrossOriginWrite(req_, &forged)) {
    return WriteResponse(HttpResponse::Text(403, std::move(forged) + "\n"));
  }
  const Options& o = server_->options;
  if (o.authenticate &&
      std::find(o.open_paths.begin(), o.open_paths.end(), req_.path) == o.open_paths.end()) {
    if (!Authenticate() || !Authorize()) return;
  }
  RouteRequest();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::RouteRequest() {
  const Impl::Route* route = server_->FindRoute(req_.path);
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

template <class Stream>
bool Webserver::Impl::Session<Stream>::Authenticate() {
  HttpResponse denied;
  // Converts to an AuthDeferrer without allocating ('this' fits std::function's buffer).
  auto defer = [this] { return DeferAuthentication(); };
  switch (server_->options.authenticate(req_, &denied, defer)) {
    case AuthVerdict::kAllow: return true;
    case AuthVerdict::kDeny: WriteResponse(std::move(denied)); return false;
    case AuthVerdict::kDeferred:
      DCHECK(pending_) << "kDeferred without calling 'defer'";
      return false;
  }
  return false;
}

template <class Stream>
bool Webserver::Impl::Session<Stream>::Authorize() {
  if (!server_->options.authorize) return true;
  HttpResponse denied;
  if (server_->options.authorize(req_, &denied)) return true;
  WriteResponse(std::move(denied));
  return false;
}

template <class Stream>
AuthCallback Webserver::Impl::Session<Stream>::DeferAuthentication() {
  DCHECK(!pending_);
  // No read until the verdict (HTTP/1.1 order); the verifier's queue bounds the wait.
  pending_ = true;
  self_while_pending_ = Self();
  ++seq_;
  Tcp().expires_never();
  return [control = server_->control, weak = std::weak_ptr<Session>(Self()), seq = seq_](
             bool ok, std::string user, HttpResponse denied) {
    // As in PendingResponse::Deliver: a session is handed to the io_context only while the
    // server runs. Always posted: the caller is a verification thread (or the hook itself).
    MutexLock l(&control->mu);
    if (control->stopped) return;
    std::shared_ptr<Session> s = weak.lock();
    if (s == nullptr) return;  // The connection is gone.
    IoExecutor ex = s->executor();
    asio::post(ex, [s = std::move(s), seq, ok, u = std::move(user),
                    d = std::move(denied)]() mutable {
      s->OnAuthenticated(seq, ok, std::move(u), std::move(d));
    });
  };
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnAuthenticated(uint64_t seq, bool ok, std::string user,
                                                       HttpResponse denied) {
  if (closed_ || !pending_ || seq != seq_) return;
  pending_ = false;
  // Whatever follows (a write or a handler) holds the session from now on.
  std::shared_ptr<SessionBase> self = std::move(self_while_pending_);
  if (!ok) return WriteResponse(std::move(denied));
  req_.authenticated_user = std::move(user);
  if (Authorize()) RouteRequest();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::CallHandler(const HttpHandler& handler) {
  pending_ = true;
  self_while_pending_ = Self();
  ++seq_;
  // The handler bounds its own wait (a long poll answers within its timeout).
  Tcp().expires_never();
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

template <class Stream>
void Webserver::Impl::Session<Stream>::Complete(uint64_t seq, HttpResponse resp, bool dropped) {
  if (closed_ || !pending_ || seq != seq_) return;
  if (dropped) {
    LOG(WARNING) << "the handler of " << req_.method_string << " "
                 << QuoteForError(req_.target, 200) << " never responded; answering 500";
  }
  pending_ = false;
  // The write below holds the session from now on.
  std::shared_ptr<SessionBase> self = std::move(self_while_pending_);
  WriteResponse(std::move(resp));
}

template <class Stream>
void Webserver::Impl::Session<Stream>::SendErrorAndClose(unsigned status, std::string text) {
  keep_alive_ = false;
  WriteResponse(HttpResponse::Text(status, std::move(text)));
}

template <class Stream>
void Webserver::Impl::Session<Stream>::WriteResponse(HttpResponse resp) {
  unsigned status = resp.status;
  if (status < 200 || status > 599) {
    LOG(WARNING) << "HTTP handler answered status " << status << " to "
                 << QuoteForError(req_.target, 200) << "; sending 500";
    resp = HttpResponse::Text(500, "Internal error: bad response status");
    status = 500;
  }
  if (resp.body_source != nullptr) return WriteStreamedResponse(status, std::move(resp));
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
  Tcp().expires_after(server_->options.idle_timeout);
  asio::async_write(stream_, buffers, [self = Self()](beast::error_code ec, size_t) {
    self->OnWrite(ec);
  });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnWrite(const beast::error_code& ec) {
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

template <class Stream>
void Webserver::Impl::Session<Stream>::WriteStreamedResponse(unsigned status, HttpResponse resp) {
  source_ = std::move(resp.body_source);
  const bool no_body = StatusHasNoBody(status) || head_request_;
  if (resp.body_length.has_value()) {
    stream_framing_ = StreamedBody::kNo;
    stream_left_ = *resp.body_length;
  } else if (!http10_) {
    stream_framing_ = StreamedBody::kChunked;
  } else {
    stream_framing_ = StreamedBody::kCloseDelimited;  // An HTTP/1.0 client knows no chunks.
    keep_alive_ = keep_alive_ && no_body;
  }
  head_.clear();
  AppendResponseHead(status, resp, StatusHasNoBody(status) ? std::nullopt : resp.body_length,
                     keep_alive_, http10_, &head_,
                     StatusHasNoBody(status) ? StreamedBody::kNo : stream_framing_);
  server_->CountResponse(status);
  VLOG(1) << req_.remote_address << " " << req_.method_string << " "
          << QuoteForError(req_.target, 200) << " -> " << status << ", streamed";
  if (no_body) {
    // The head alone, as for any answer without a body; the source is not read.
    std::exchange(source_, nullptr)->Cancel();
    resp_ = HttpResponse();
    Tcp().expires_after(server_->options.idle_timeout);
    asio::async_write(stream_, asio::buffer(head_), [self = Self()](beast::error_code ec,
                                                                    size_t) { self->OnWrite(ec); });
    return;
  }
  stream_head_pending_ = true;
  PullChunk();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::PullChunk() {
  // The source bounds its own wait; the client's is bounded again by each write.
  Tcp().expires_never();
  source_->Pull([self = Self()](BodySource::Chunk chunk) {
    if (self->OnIoThread()) return self->OnChunk(chunk);
    // A source that completes elsewhere: the chunk stays valid until the next Pull().
    asio::post(self->executor(), [self, chunk] { self->OnChunk(chunk); });
  });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnChunk(BodySource::Chunk chunk) {
  if (closed_ || source_ == nullptr) return;
  if (chunk.failed) return AbortStream("its source failed");
  if (chunk.data.empty() && !chunk.last) return PullChunk();
  if (stream_framing_ == StreamedBody::kNo) {
    if (chunk.data.size() > stream_left_ || (chunk.last && chunk.data.size() != stream_left_)) {
      if (!chunk.last) std::exchange(source_, nullptr)->Cancel();
      return AbortStream("its source did not deliver the announced Content-Length");
    }
    stream_left_ -= chunk.data.size();
  }
  if (chunk.last) finished_source_ = std::exchange(source_, nullptr);  // Complete: no Cancel().
  chunk_prefix_.clear();
  chunk_suffix_.clear();
  if (stream_framing_ == StreamedBody::kChunked) {
    AppendChunkFraming(chunk.data.size(), chunk.last, &chunk_prefix_, &chunk_suffix_);
  }
  std::array<asio::const_buffer, 4> buffers{};
  if (stream_head_pending_) buffers[0] = asio::buffer(head_);
  stream_head_pending_ = false;
  buffers[1] = asio::buffer(chunk_prefix_);
  buffers[2] = asio::buffer(chunk.data.data(), chunk.data.size());
  buffers[3] = asio::buffer(chunk_suffix_);
  // A client that does not read its response is dropped like an idle one.
  Tcp().expires_after(server_->options.idle_timeout);
  asio::async_write(stream_, buffers, [self = Self(), last = chunk.last](beast::error_code ec,
                                                                         size_t) {
    self->OnChunkWritten(ec, last);
  });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnChunkWritten(const beast::error_code& ec, bool last) {
  finished_source_.reset();
  if (closed_) return;
  if (ec || !last) {
    if (ec && !IsDisconnect(ec)) {
      LOG(WARNING) << "HTTP write to " << req_.remote_address << " failed: " << ec.message();
    }
    return ec ? Close() : PullChunk();  // Close() cancels the source.
  }
  if (stream_framing_ == StreamedBody::kCloseDelimited) {
    return LingeringClose();  // The close ends the body.
  }
  OnWrite(ec);
}

template <class Stream>
void Webserver::Impl::Session<Stream>::AbortStream(const char* why) {
  LOG(WARNING) << "HTTP response to " << req_.method_string << " "
               << QuoteForError(req_.target, 200) << " for " << req_.remote_address
               << " cut short: " << why << "; resetting the connection";
  source_.reset();  // It failed, or ended short: nothing to cancel.
  beast::error_code ignored;
  Tcp().socket().set_option(asio::socket_base::linger(true, 0), ignored);
  Close();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::LingeringClose() {
  if constexpr (kTls) {
    // close_notify first (bounded like the linger), then the TCP linger below.
    Tcp().expires_after(std::min<std::chrono::milliseconds>(server_->options.idle_timeout,
                                                            kMaxLinger));
    stream_.async_shutdown([self = Self()](beast::error_code) { self->LingerTcp(); });
  } else {
    LingerTcp();
  }
}

template <class Stream>
void Webserver::Impl::Session<Stream>::LingerTcp() {
  if (closed_) return;
  beast::error_code ec;
  Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  Tcp().expires_after(std::min<std::chrono::milliseconds>(server_->options.idle_timeout,
                                                            kMaxLinger));
  buffer_.consume(buffer_.size());
  lingered_bytes_ = 0;
  DoDrain();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::DoDrain() {
  // Below TLS: what arrives now is discarded unread.
  Tcp().async_read_some(buffer_.prepare(kLingerReadBytes),
                          [self = Self()](beast::error_code ec, size_t n) {
                            self->lingered_bytes_ += n;
                            if (ec || self->lingered_bytes_ > kMaxLingerBytes) {
                              return self->Close();
                            }
                            self->DoDrain();
                          });
}

std::shared_ptr<Webserver::Impl::SessionBase> Webserver::Impl::MakeSession(
    IoSocket socket, std::string remote_address) {
  if (options.tls_context) {
    return std::make_shared<Session<TlsStream>>(this, std::move(socket),
                                                std::move(remote_address), *options.tls_context);
  }
  return std::make_shared<Session<PlainStream>>(this, std::move(socket),
                                                std::move(remote_address));
}

}  // namespace qr
