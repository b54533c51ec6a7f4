#include "loadgen/loadgen-http.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

namespace qr::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpConnection::HttpConnection(asio::io_context& io, tcp::endpoint endpoint, std::string host,
                               std::string common_headers, size_t max_body_bytes,
                               HttpHandler* handler)
    : socket_(io),
      endpoint_(endpoint),
      host_(std::move(host)),
      common_headers_(std::move(common_headers)),
      max_body_bytes_(max_body_bytes),
      handler_(handler) {
  request_.reserve(1024);
}

void HttpConnection::Send(std::string_view method, std::string_view target, std::string_view body,
                          std::string_view extra_headers) {
  busy_ = true;
  timed_out_ = false;
  retried_ = false;
  fresh_connection_ = !connected_;
  parser_.reset();
  sent_at_ = std::chrono::steady_clock::now();
  request_.clear();
  request_.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
  request_.append(host_).append("\r\n").append(common_headers_).append(extra_headers);
  if (!body.empty() || method == "POST") {
    request_.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  request_.append("\r\n").append(body);
  if (connected_) {
    Write();
  } else {
    Connect();
  }
}

void HttpConnection::Connect() {
  buffer_.clear();
  ++connects_;
  fresh_connection_ = true;
  socket_.async_connect(endpoint_, [this](const beast::error_code& ec) {
    if (ec) return Finish(timed_out_ ? "timeout" : "connect: " + ec.message(), {});
    beast::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    connected_ = true;
    Write();
  });
}

void HttpConnection::Write() {
  asio::async_write(socket_, asio::buffer(request_), [this](const beast::error_code& ec, size_t) {
    if (ec && RetryAfterPeerClose(ec)) return;
    if (ec) return Finish(timed_out_ ? "timeout" : "write: " + ec.message(), {});
    Read();
  });
}

void HttpConnection::Read() {
  parser_.emplace(&body_);
  parser_->body_limit(max_body_bytes_);
  parser_->header_limit(64 * 1024);
  http::async_read(socket_, buffer_, *parser_, [this](const beast::error_code& ec, size_t) {
    if (ec && RetryAfterPeerClose(ec)) return;
    if (ec) return Finish(timed_out_ ? "timeout" : "read: " + ec.message(), {});
    HttpAnswer answer{parser_->status(), body_};
    if (!parser_->keep_alive()) Close();  // the next Send() reconnects
    Finish("", answer);
  });
}

void HttpConnection::Finish(std::string_view error, const HttpAnswer& answer) {
  busy_ = false;
  if (!error.empty()) Close();  // a broken or expired exchange leaves the stream unusable
  handler_->OnHttp(error, answer);
}

bool HttpConnection::RetryAfterPeerClose(const beast::error_code& ec) {
  const bool peer_closed = ec == http::error::end_of_stream || ec == asio::error::eof ||
                           ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
  if (!peer_closed || timed_out_ || retried_ || fresh_connection_ ||
      (parser_ && parser_->got_some())) {
    return false;
  }
  retried_ = true;
  ++retries_;
  Close();
  Connect();
  return true;
}

void HttpConnection::ExpireIfSentBefore(std::chrono::steady_clock::time_point deadline) {
  if (!busy_ || timed_out_ || sent_at_ >= deadline) return;
  timed_out_ = true;
  beast::error_code ignored;
  socket_.close(ignored);  // the pending operation completes with operation_aborted
}

void HttpConnection::Close() {
  beast::error_code ignored;
  if (socket_.is_open()) socket_.close(ignored);
  connected_ = false;
}

std::optional<std::string_view> FindJsonString(std::string_view json, std::string_view key,
                                               size_t from) {
  while (true) {
    size_t k = json.find(key, from);
    if (k == std::string_view::npos) return std::nullopt;
    from = k + key.size();
    // Require "key":" around the match.
    if (k == 0 || json[k - 1] != '"' || json.substr(from, 3) != "\":\"") continue;
    size_t start = from + 3;
    size_t end = start;
    while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
    if (end >= json.size()) return std::nullopt;
    return json.substr(start, end - start);
  }
}

std::string_view QueryResultsState(std::string_view json) {
  size_t stats = json.rfind("\"stats\":{");
  std::optional<std::string_view> state;
  if (stats != std::string_view::npos) state = FindJsonString(json, "state", stats);
  if (!state) state = FindJsonString(json, "state");
  return state.value_or(std::string_view());
}

std::string UriTarget(std::string_view uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos || (uri.substr(0, scheme) != "http" &&
                                           uri.substr(0, scheme) != "https")) {
    return "";
  }
  std::string out;
  size_t slash = uri.find('/', scheme + 3);
  if (slash == std::string_view::npos) return "/";
  out.reserve(uri.size() - slash);
  for (size_t i = slash; i < uri.size(); ++i) {
    if (uri[i] == '\\' && i + 1 < uri.size() && uri[i + 1] == '/') continue;  // JSON "\/"
    out.push_back(uri[i]);
  }
  return out;
}

}  // namespace qr::loadgen
