#include "tls-test-client.h"

#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace qr::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

struct TlsTestClient::Impl {
  Impl(int p, const std::string& ca, std::chrono::milliseconds t)
      : port(p), timeout(t), ctx(ssl::context::tls_client) {
    ctx.load_verify_file(ca);
    ctx.set_verify_mode(ssl::verify_peer);
  }

  /// Runs the queued operation to completion (bounded by the stream's timeout).
  void Run() {
    ioc.restart();
    ioc.run();
  }

  const int port;
  const std::chrono::milliseconds timeout;
  asio::io_context ioc;
  ssl::context ctx;
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream;
  beast::flat_buffer buffer;
};

TlsTestClient::TlsTestClient(int port, std::string ca_file, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(port, ca_file, timeout)) {}

TlsTestClient::~TlsTestClient() = default;

bool TlsTestClient::Connect() {
  Impl& c = *impl_;
  if (c.stream) return true;
  c.stream.emplace(c.ioc, c.ctx);
  c.buffer.clear();
  beast::error_code ec;
  auto& tcp = beast::get_lowest_layer(*c.stream);
  tcp.expires_after(c.timeout);
  asio::ip::tcp::endpoint server(asio::ip::make_address("127.0.0.1"),
                                 static_cast<uint16_t>(c.port));
  tcp.async_connect(server, [&](beast::error_code e) { ec = e; });
  c.Run();
  if (!ec) {
    c.stream->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    c.Run();
  }
  if (ec) {
    last_error_ = "connect/handshake: " + ec.message();
    c.stream.reset();
    return false;
  }
  return true;
}

TestResponse TlsTestClient::Send(const std::string& method, const std::string& target,
                                 const Headers& headers, const std::string& body) {
  TestResponse resp;
  if (!Connect()) {
    resp.error = last_error_;
    return resp;
  }
  Impl& c = *impl_;
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1:" + std::to_string(c.port));
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  beast::get_lowest_layer(*c.stream).expires_after(c.timeout);
  http::async_write(*c.stream, req, [&](beast::error_code e, size_t) { ec = e; });
  c.Run();
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  if (!ec) {
    http::async_read(*c.stream, c.buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
    c.Run();
  }
  if (ec) {
    resp.error = last_error_ = "HTTPS exchange: " + ec.message();
    c.stream.reset();
    return resp;
  }
  const auto& msg = parser.get();
  resp.status = static_cast<int>(msg.result_int());
  for (const auto& field : msg) {
    resp.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  resp.body = msg.body();
  if (!msg.keep_alive()) c.stream.reset();
  return resp;
}

}  // namespace qr::testing
