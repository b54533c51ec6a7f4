#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/status.h"

namespace boost::asio::ssl {
class context;
}

namespace qr {

/// Builds the server-side TLS context of the webserver from PEM files: 'cert_file' holds the
/// certificate (chain, leaf first), 'key_file' its private key. TLS 1.2 and newer only.
/// Errors name the file and what is wrong with it (missing, unreadable, not PEM, key does not
/// match the certificate).
/// Thread-safety: thread-safe; the context is immutable once built and shared by sessions.
Status CreateTlsServerContext(const std::string& cert_file, const std::string& key_file,
                              std::shared_ptr<boost::asio::ssl::context>* out);

/// The leaf certificate a server context presents: its subject (OpenSSL's one-line form) and
/// the end of its validity (notAfter, seconds since the Unix epoch).
struct TlsCertificateInfo {
  std::string subject;
  int64_t not_after_unix_seconds = 0;
};
/// The certificate of a context made by CreateTlsServerContext(); an error if it has none or
/// its notAfter cannot be read.
Status GetTlsCertificateInfo(const boost::asio::ssl::context& ctx, TlsCertificateInfo* out);

}  // namespace qr
