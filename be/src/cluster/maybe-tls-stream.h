// A client connection that is plain TCP or TLS over TCP, chosen when it is opened (the scheme
// of the URI it goes to), read and written through one interface.
#pragma once

#include <memory>
#include <utility>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace qr {

/// A Beast TCP stream, or a TLS stream over one.
/// Thread-safety: as the Beast stream's (one thread at a time).
class MaybeTlsStream {
 public:
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  explicit MaybeTlsStream(boost::asio::io_context& io)
      : stream_(std::in_place_type<boost::beast::tcp_stream>, io) {}
  /// Keeps 'tls' alive as long as the stream: a connection outlives a reload that replaces
  /// the context its owner hands to new connections (pooled, or kept alive).
  MaybeTlsStream(boost::asio::io_context& io, std::shared_ptr<boost::asio::ssl::context> tls)
      : context_(std::move(tls)), stream_(std::in_place_type<TlsStream>, io, *context_) {}

  /// The TCP layer: connect, expiry, cancel and close.
  boost::beast::tcp_stream& tcp() {
    if (TlsStream* s = std::get_if<TlsStream>(&stream_)) return s->next_layer();
    return std::get<boost::beast::tcp_stream>(stream_);
  }
  /// Null for a plain connection.
  TlsStream* tls() { return std::get_if<TlsStream>(&stream_); }
  /// Calls 'f' with the stream to read and write.
  template <class F>
  decltype(auto) Visit(F&& f) {
    return std::visit(std::forward<F>(f), stream_);
  }

 private:
  /// Declared before the stream, which refers to it: destroyed after it.
  const std::shared_ptr<boost::asio::ssl::context> context_;
  std::variant<boost::beast::tcp_stream, TlsStream> stream_;
};

}  // namespace qr
