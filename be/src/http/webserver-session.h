#pragma once

// Internal to the webserver (webserver-session.cc, webserver-response.cc): a connection,
// Session<Stream>, one class for plain HTTP and HTTPS (templated on the stream; only the TLS
// handshake and the close differ). Not for other users.
//
// Its members are defined in two files: webserver-session.cc reads, authenticates and
// dispatches a request (and creates the sessions, which instantiates its members);
// webserver-response.cc writes the response, streamed or not, and closes the connection, and
// instantiates its members for both streams explicitly.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "http/http-framing.h"
#include "http/http-message.h"
#include "http/webserver-internal.h"

namespace qr {
namespace webserver_session {

using PlainStream = beast::basic_stream<tcp, IoExecutor>;
using TlsStream = beast::ssl_stream<PlainStream>;

/// The peer went away or the connection was closed on purpose: not worth a warning.
inline bool IsDisconnect(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::not_connected || ec == asio::error::connection_aborted ||
         ec == asio::error::bad_descriptor || ec == beast::error::timeout ||
         // A TLS peer that closes without close_notify: any client can do it, and HTTP's own
         // framing already tells a complete request from a cut one. Not worth a WARNING.
         ec == asio::ssl::error::stream_truncated;
}

/// Refuses (400) chunk extensions with whitespace: see IsStrictChunkExtension().
struct ChunkExtensionCheck {
  void operator()(uint64_t, beast::string_view ext, beast::error_code& ec) {
    if (!IsStrictChunkExtension(ToStd(ext))) ec = http::error::bad_chunk_extension;
  }
};

}  // namespace webserver_session

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
  static constexpr bool kTls = !std::is_same_v<Stream, webserver_session::PlainStream>;

  /// 'tls' (TLS only; null for plain HTTP) is the server's context when the connection was
  /// accepted: the session keeps it alive, so replacing the server's context leaves it alone.
  Session(Impl* server, IoSocket socket, std::string remote_address,
          std::shared_ptr<asio::ssl::context> tls = nullptr)
      : SessionBase(socket.get_executor()),
        server_(server),
        tls_context_(std::move(tls)),
        stream_(MakeStream(std::move(socket), tls_context_.get())),
        buffer_(server->options.max_header_bytes + kReadSlackBytes),
        peer_address_(std::move(remote_address)) {
    req_.remote_address = peer_address_;
    req_.secure = kTls;
  }
  ~Session() override;

  void Start() override;
  void Complete(uint64_t seq, HttpResponse resp, bool dropped) override;
  void Close() override;
  void DrainIfIdle() override;

 private:
  std::shared_ptr<Session> Self() {
    return std::static_pointer_cast<Session>(shared_from_this());
  }
  /// The TCP layer: timeouts, close.
  webserver_session::PlainStream& Tcp() { return beast::get_lowest_layer(stream_); }
  void OnHandshake(const beast::error_code& ec);
  void DoReadHeader();
  void OnReadHeader(const beast::error_code& ec);
  void DoReadBody();
  void OnReadError(const beast::error_code& ec);
  /// Decides on a request from its head, before its body is read (the cross-origin check,
  /// authentication, authorization), so that a request refused there costs no body read.
  void Admit();
  /// Reads the body of an admitted request (after a 100 Continue if the client expects one),
  /// then dispatches it.
  void ReadBody();
  /// Takes the body and routes the request.
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

  static Stream MakeStream(IoSocket socket, [[maybe_unused]] asio::ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  Impl* const server_;
  /// Declared before 'stream_', which uses it: destroyed after it.
  const std::shared_ptr<asio::ssl::context> tls_context_;
  Stream stream_;
  /// What the read buffer holds beyond a whole head: one read (Beast reads up to 64 KiB at a
  /// time). A chunk-size line or a trailer section that does not end within it fails the
  /// request (400) instead of growing the buffer for as long as the client sends.
  static constexpr size_t kReadSlackBytes = 64 * 1024;
  /// The read buffer, reused for every request (it may hold the start of the next one); at
  /// most --max_header_bytes plus kReadSlackBytes.
  FramingReadBuffer buffer_;
  /// The connection's peer ("ip:port"). A hook may rewrite req_.remote_address (a trusted
  /// proxy's or member's client): each request starts again from this.
  const std::string peer_address_;
  std::optional<http::request_parser<http::string_body>> parser_;
  /// The parser's chunk-header callback (it keeps a reference).
  webserver_session::ChunkExtensionCheck chunk_check_;
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
  /// Waiting for the head of a request (an idle connection, unless part of it arrived).
  bool awaiting_head_ = false;
  /// The request's head asked for "Expect: 100-continue".
  bool expect_continue_ = false;
  bool head_request_ = false;
  bool closed_ = false;
};

}  // namespace qr
