#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>

namespace qr::loadgen {

/// One HTTP answer, as a handler sees it. 'body' is valid only during the callback.
struct HttpAnswer {
  unsigned status = 0;
  std::string_view body;
};

/// Receives the outcome of HttpConnection::Send() on the connection's I/O thread.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  /// 'error' is empty on success; otherwise it names the failure ("timeout", "connect: ...",
  /// "read: end of stream", ...) and 'answer' is empty.
  virtual void OnHttp(std::string_view error, const HttpAnswer& answer) = 0;
};

/// A keep-alive HTTP/1.1 client connection (Boost.Beast over Asio) with at most one request in
/// flight. Connects lazily, reconnects after the server closed the connection, and writes each
/// request as one preformatted buffer (no per-request header objects).
/// Thread-safety: not thread-safe; use it only from the thread running its io_context.
/// Ownership: the handler must outlive every pending request (the owner runs the io_context
/// to completion before destroying either).
/// A response parser that keeps only what the loadgen needs (status and body) in buffers that
/// live as long as the connection: no allocation per header field, unlike
/// http::response_parser. Chunked and Content-Length bodies, keep-alive, limits: Beast's.
class LeanResponseParser : public boost::beast::http::basic_parser<false> {
 public:
  /// Parses bodies into '*body', which must outlive the parser.
  explicit LeanResponseParser(std::string* body) : body_(body) { body_->clear(); }
  unsigned status() const { return status_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override {
    status_ = static_cast<unsigned>(code);
  }
  void on_field_impl(boost::beast::http::field, string_view, string_view, error_code&) override {}
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<uint64_t>& length, error_code&) override {
    if (length) body_->reserve(*length);
  }
  size_t on_body_impl(string_view data, error_code&) override {
    body_->append(data.data(), data.size());
    return data.size();
  }
  void on_chunk_header_impl(uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, string_view data, error_code&) override {
    body_->append(data.data(), data.size());
    return data.size();
  }
  void on_finish_impl(error_code&) override {}

  std::string* const body_;
  unsigned status_ = 0;
};

class HttpConnection {
 public:
  /// 'host' is the Host header value ("127.0.0.1:8080"); 'common_headers' are full header
  /// lines ("X-Trino-User: u\r\n") sent with every request.
  HttpConnection(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint endpoint,
                 std::string host, std::string common_headers, size_t max_body_bytes,
                 HttpHandler* handler);
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  /// Sends one request. 'extra_headers' are full header lines added to this request only.
  /// QR_REQUIRES: no request is in flight.
  void Send(std::string_view method, std::string_view target, std::string_view body = {},
            std::string_view extra_headers = {});

  /// Fails the request in flight with "timeout" if it was sent before 'deadline'.
  void ExpireIfSentBefore(std::chrono::steady_clock::time_point deadline);
  /// Closes the socket (no request may be in flight).
  void Close();

  bool busy() const { return busy_; }
  /// Connections opened (the first one included).
  int64_t connects() const { return connects_; }
  /// Requests sent again on a new connection because the server had closed the kept-alive one
  /// before answering (e.g. its idle timeout), as HTTP clients do.
  int64_t retries() const { return retries_; }

 private:
  void Connect();
  void Write();
  void Read();
  void Finish(std::string_view error, const HttpAnswer& answer);
  /// On a failed exchange: reconnects and resends if the server closed a reused connection
  /// before sending any byte of the answer. True if it did.
  bool RetryAfterPeerClose(const boost::beast::error_code& ec);

  boost::asio::ip::tcp::socket socket_;
  const boost::asio::ip::tcp::endpoint endpoint_;
  const std::string host_;
  const std::string common_headers_;
  const size_t max_body_bytes_;
  HttpHandler* const handler_;

  bool busy_ = false;
  bool connected_ = false;
  bool timed_out_ = false;
  bool fresh_connection_ = false;  // the request in flight went out on a new connection
  bool retried_ = false;
  int64_t retries_ = 0;
  std::chrono::steady_clock::time_point sent_at_;
  int64_t connects_ = 0;
  std::string request_;
  boost::beast::flat_buffer buffer_;
  std::string body_;
  std::optional<LeanResponseParser> parser_;
};

/// The raw text of the first string field named 'key' in a JSON document ("nextUri" finds
/// "nextUri":"..."), or nullopt. Escapes are left as they are. A cheap scan instead of a
/// parse: the loadgen shares the cores with the server it measures. Correct for the answers
/// the Trino protocol produces, because a quote inside a JSON string is always escaped, so
/// '"key":"' can only match a real key.
std::optional<std::string_view> FindJsonString(std::string_view json, std::string_view key,
                                               size_t from = 0);

/// The protocol state of a QueryResults answer: "stats":{"state":"..."}, else the first
/// "state" field; empty if absent.
std::string_view QueryResultsState(std::string_view json);

/// The origin-form target of an absolute http URI ("http://h:p/a?b" -> "/a?b"), with JSON
/// escapes of '/' undone; empty if 'uri' is not an absolute http(s) URI.
std::string UriTarget(std::string_view uri);

}  // namespace qr::loadgen
