#pragma once

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

}  // namespace qr
