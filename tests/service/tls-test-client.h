#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "test-client.h"

/// A blocking HTTPS client for the TLS tests: Beast's ssl_stream over Asio, verifying the
/// server's certificate against a given CA file. Every operation runs on a private
/// io_context with a deadline (Beast's stream timeouts), so a broken server fails a test
/// instead of hanging it.
/// Thread-safety: one object per thread.

namespace qr::testing {

class TlsTestClient {
 public:
  TlsTestClient(int port, std::string ca_file,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~TlsTestClient();
  TlsTestClient(const TlsTestClient&) = delete;
  TlsTestClient& operator=(const TlsTestClient&) = delete;

  /// Connects and completes the TLS handshake unless connected. False (see last_error()).
  bool Connect();
  /// Sends one request over the kept-alive connection and reads its answer ('status' 0 and
  /// 'error' set on failure).
  TestResponse Send(const std::string& method, const std::string& target,
                    const Headers& headers = {}, const std::string& body = "");
  const std::string& last_error() const { return last_error_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string last_error_;
};

}  // namespace qr::testing
