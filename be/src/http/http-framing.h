#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>

#include "http/webserver.h"

/// The message-framing rules the webserver enforces on a request header before it reads a
/// body (RFC 9112 sections 3.2, 6 and 7): the checks Beast's parser leaves out, so that no two
/// parsers (a proxy in front of us, and us) can disagree on where a request ends.
/// Thread-safety: all functions are thread-safe (pure).

namespace qr {

/// Why a request's framing was refused: the status to answer (400 or 501) and a message
/// saying what was wrong and what is accepted. The connection is closed after the answer.
struct FramingError {
  unsigned status = 400;
  std::string message;
};

/// Checks, in one pass over the parsed header 'fields' of a request of HTTP 'version' (10,
/// 11), that:
///  - there is at most one Host field, and exactly one in HTTP/1.1 (else 400);
///  - a Transfer-Encoding is exactly "chunked" (one coding, any case, no parameters, one field
///    line): another coding, or chunked not last, is 501; an empty or malformed list, or
///    chunked twice or with parameters, is 400;
///  - a Transfer-Encoding comes with no Content-Length (400) and in HTTP/1.1 only (400);
///  - a Content-Length is one field line holding one decimal number (400 for "5, 5" or two
///    lines, even with equal values).
/// Returns true when the framing is acceptable; otherwise fills '*error'.
[[nodiscard]] bool CheckRequestFraming(const boost::beast::http::fields& fields,
                                       unsigned version, FramingError* error);

/// Everything the server checks in a request's parsed header 'head' before reading its body,
/// in order: no folded line ('folded', from FramingReadBuffer::EndHeader()); the framing
/// (CheckRequestFraming()); the target (ParseRequestTarget()), which fills req->target, path
/// and query; and the path, percent-decoded in place (PercentDecodePath()). Returns false with
/// the answer in '*error' (a 400 or 501 after which the connection closes).
[[nodiscard]] bool CheckRequestHead(const boost::beast::http::request_header<>& head, bool folded,
                                    HttpRequest* req, FramingError* error);

/// Whether the raw chunk extensions 'ext' of a chunk-size line (what follows the size, up to
/// CRLF) are strictly *( ";" token [ "=" ( token / quoted-string ) ] ), with no whitespace:
/// RFC 9112 7.1.1 allows BWS around ';' and '=', which other parsers (llhttp) refuse, and
/// parsers that disagree on a chunk line disagree on where the request ends.
bool IsStrictChunkExtension(std::string_view ext);

/// Whether the request line in 'data' (the unparsed start of a request) ends with a
/// syntactically valid "HTTP/d.d" and CRLF: then a version Beast refuses is answered 505, not
/// 400. A bare CR after the version is a malformed line (400), not a version.
bool HasWellFormedVersion(std::string_view data);

/// The read buffer of a connection: a DynamicBuffer (Asio's v1 concept) over a
/// beast::flat_buffer that looks at the bytes of each request header as the parser consumes
/// them, for what Beast's parsed fields no longer show: obsolete line folding (RFC 9112 5.2),
/// which Beast unfolds, so that "Transfer-Encoding:\r\n chunked" would be chunked to us and
/// garbage to a proxy in front. Beast consumes a header in one piece once it is complete, and
/// (not eager) none of the body with it.
/// Thread-safety: none; used by one connection's I/O thread.
class FramingReadBuffer {
 public:
  using const_buffers_type = boost::beast::flat_buffer::const_buffers_type;
  using mutable_buffers_type = boost::beast::flat_buffer::mutable_buffers_type;

  /// At most 'max_size' unparsed bytes are held: a read that would need more fails with
  /// boost::beast::error::buffer_overflow. Beast bounds the head (header_limit) and the body
  /// data (body_limit) but neither a chunk-size line nor the trailer section, which it
  /// buffers until their end arrives.
  explicit FramingReadBuffer(size_t max_size) : buffer_(max_size) {}

  /// Consumed bytes are scanned from now until EndHeader().
  void BeginHeader() {
    scanning_ = true;
    folded_ = false;
    after_lf_ = false;
  }
  /// Stops scanning; returns whether a header line started with SP or HTAB (a folded line,
  /// or whitespace before the first field).
  bool EndHeader() {
    scanning_ = false;
    return folded_;
  }
  std::string_view View() const {
    return {static_cast<const char*>(buffer_.data().data()), buffer_.size()};
  }

  size_t size() const { return buffer_.size(); }
  size_t max_size() const { return buffer_.max_size(); }
  size_t capacity() const { return buffer_.capacity(); }
  const_buffers_type data() const { return buffer_.data(); }
  mutable_buffers_type prepare(size_t n) { return buffer_.prepare(n); }
  void commit(size_t n) { buffer_.commit(n); }
  void consume(size_t n) {
    if (scanning_) Scan(View().substr(0, n));
    buffer_.consume(n);
  }

 private:
  void Scan(std::string_view consumed);

  boost::beast::flat_buffer buffer_;
  bool scanning_ = false;
  bool folded_ = false;
  /// The last scanned byte was LF (a fold may begin the next piece).
  bool after_lf_ = false;
};

}  // namespace qr
