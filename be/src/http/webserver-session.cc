// The connections of the webserver, reading side: a Session<Stream> (webserver-session.h)
// reads a request, authenticates it and hands it to its handler, and MakeSession() creates the
// sessions. Writing the response and closing are in webserver-response.cc.

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <glog/logging.h>

#include "http/http-framing.h"
#include "http/http-origin.h"
#include "http/http-message.h"
#include "http/webserver-internal.h"
#include "http/webserver-session.h"

namespace qr {
namespace {

using webserver_session::IsDisconnect;
using webserver_session::PlainStream;
using webserver_session::TlsStream;

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

}  // namespace

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
  if (!closed_) server_->ConnectionClosed();
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
  server_->ConnectionClosed();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::DrainIfIdle() {
  // Not even the start of a request line arrived (Beast may have consumed a request line
  // while its header fields are still on the way: got_some()).
  if (awaiting_head_ && buffer_.size() == 0 && !parser_->got_some()) Close();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::DoReadHeader() {
  if (closed_) return;
  // Draining: a connection with no request under way closes (Drain() closes the others' as
  // they are answered); one whose next request already arrived, in part, is served.
  if (buffer_.size() == 0 && server_->draining.load(std::memory_order_relaxed)) return Close();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
  parser_->body_limit(server_->options.max_body_bytes);
  parser_->on_chunk_header(chunk_check_);
  buffer_.BeginHeader();
  req_.method_string.clear();
  req_.target.clear();
  req_.authenticated_user.clear();
  req_.remote_address.assign(peer_address_);  // reuses the capacity: no allocation
  req_.body.clear();  // The hooks that run before the body is read see none.
  head_request_ = false;
  request_start_ = std::chrono::steady_clock::now();  // Error answers measure from here.
  Tcp().expires_after(server_->options.idle_timeout);
  awaiting_head_ = true;
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = Self()](beast::error_code ec, size_t) { self->OnReadHeader(ec); });
}

template <class Stream>
void Webserver::Impl::Session<Stream>::OnReadHeader(const beast::error_code& ec) {
  awaiting_head_ = false;
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
  expect_continue_ =
      msg.version() >= 11 && beast::iequals(msg[http::field::expect], "100-continue");
  // The header fields are taken now: the trailer fields of a chunked body, which Beast adds
  // to the message, are dropped and never become headers (RFC 9112 7.1.2).
  req_.headers = std::move(static_cast<http::fields&>(parser_->get()));
  Admit();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::Admit() {
  // Before authentication: a forged request costs no password verification.
  const Options& o = server_->options;
  if (o.allowed_hosts && !IsAllowedHost(req_.Header("Host"), *o.allowed_hosts)) {
    return WriteResponse(HttpResponse::Text(
        403, "Host " + QuoteForError(req_.Header("Host"), 200) +
                 " is not a name this server answers to: use localhost or an IP address, or "
                 "list the name in --http_allowed_hosts (a defence against DNS rebinding, on by "
                 "default for a server on loopback without authentication)\n"));
  }
  std::string forged;
  if (IsCrossOriginWrite(req_, &forged)) {
    return WriteResponse(HttpResponse::Text(403, std::move(forged) + "\n"));
  }
  if (o.authenticate &&
      std::find(o.open_paths.begin(), o.open_paths.end(), req_.path) == o.open_paths.end()) {
    if (!Authenticate() || !Authorize()) return;
  }
  ReadBody();
}

template <class Stream>
void Webserver::Impl::Session<Stream>::ReadBody() {
  if (parser_->is_done()) return Dispatch();
  if (expect_continue_) {
    // Only now: a client that waits for it sends no body that would be refused.
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
  } else if (ec == http::error::buffer_overflow) {
    // A whole head fits (header_limit answers first), so this is a chunk-size line or a
    // trailer section that went on past what one read adds to --max_header_bytes.
    return SendErrorAndClose(400, "Malformed chunked body: a chunk-size line or the trailer "
                                  "section is longer than " +
                                      std::to_string(buffer_.max_size()) +
                                      " bytes (--max_header_bytes plus 64 KiB)");
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
  if (Authorize()) ReadBody();
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

std::shared_ptr<Webserver::Impl::SessionBase> Webserver::Impl::MakeSession(
    IoSocket socket, std::string remote_address) {
  if (options.tls_context) {
    std::shared_ptr<asio::ssl::context> tls;
    {
      MutexLock l(&tls_mu);
      tls = tls_context;
    }
    return std::make_shared<Session<TlsStream>>(this, std::move(socket),
                                                std::move(remote_address), std::move(tls));
  }
  return std::make_shared<Session<PlainStream>>(this, std::move(socket),
                                                std::move(remote_address));
}

// The reading side's members are instantiated by MakeSession() above, the virtual ones with the
// vtable. DoReadHeader() is not virtual, and OnWrite() (webserver-response.cc) calls it to read
// the next request: instantiated explicitly, so that an inlined use here cannot leave it out.
template void Webserver::Impl::Session<PlainStream>::DoReadHeader();
template void Webserver::Impl::Session<TlsStream>::DoReadHeader();

}  // namespace qr
