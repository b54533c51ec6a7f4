// The connections of the webserver, writing side: a Session<Stream> (webserver-session.h)
// writes a response (whole, or streamed from a BodySource with Content-Length, chunked or
// close-delimited framing) and closes the connection, lingering so that the close does not
// reset it. Reading a request is in webserver-session.cc.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <glog/logging.h>

#include "http/http-framing.h"
#include "http/http-message.h"
#include "http/webserver-internal.h"
#include "http/webserver-session.h"

namespace qr {
namespace {

using webserver_session::IsDisconnect;
using webserver_session::PlainStream;
using webserver_session::TlsStream;

// After a response that closes the connection, the server stops sending and reads (and
// discards) what the client still sends for at most this long / this many bytes before it
// closes: closing with unread input makes the kernel send a RST, which can destroy the
// response (e.g. a 413) before the client has read it.
constexpr std::chrono::milliseconds kMaxLinger{2000};
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr size_t kLingerReadBytes = 16 * 1024;

}  // namespace

template <class Stream>
void Webserver::Impl::Session<Stream>::SendErrorAndClose(unsigned status, std::string text) {
  keep_alive_ = false;
  WriteResponse(HttpResponse::Text(status, std::move(text)));
}

template <class Stream>
void Webserver::Impl::Session<Stream>::WriteResponse(HttpResponse resp) {
  // An answer before the body was read (a refusal from the head): the unread body must not be
  // taken for the next request, so the connection closes (lingering, so the answer arrives).
  if (parser_.has_value() && !parser_->is_done()) keep_alive_ = false;
  // Draining: this is the connection's last response (Drain()).
  if (server_->draining.load(std::memory_order_relaxed)) keep_alive_ = false;
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

// The members defined in this file, for both streams (those of webserver-session.cc are
// instantiated there).
template class Webserver::Impl::Session<PlainStream>;
template class Webserver::Impl::Session<TlsStream>;

}  // namespace qr
